"""Drafts timed at the sizes that matter, on one GPU (issue 47): public repositories onboarded
unedited, at default settings, their drafts' sizes taken from the repositories' benchmarks.

Two parts, each under the device machine's 10 minutes (`--part draft`, then `--part run`, on the
same warm machine: the drafted checkouts stay in WORK between them; `--part all` does both):

draft  Liger-Kernel @ ead96b6: `flopwatch new src/liger_kernel/transformers/functional.py`, which
       runs Liger's benchmark scripts under the recorder (they compute their sizes from model
       configurations and memory probes; transformers is installed here). pytorch/extension-cpp
       @ 0ec4969 on this node without `expecttest`: `flopwatch init`, then `flopwatch run`
       (mymuladd, mymul and myadd_out ok, each at ≥ 16M elements).
run    Liger's drafts run (`flopwatch run`, default settings) at each entry's largest timed size
       (`--shape`: the rows the report needs, not every size a draft lists); then, for the ops
       whose benchmark script compares Liger with a torch or huggingface implementation, that
       script run in forward speed mode only (its other modes and its memory pass left out:
       `utils.run_benchmarks` patched), and its Liger-to-torch speed ratio at the largest size
       it shares with flopwatch's row held against flopwatch's % of peer there (target: ±25%).

The checkouts are carried as .ext/Liger-Kernel and .ext/extension-cpp. Full outputs (new and
run JSON, logs, the scripts' measurements) go to OUT; a short table comes last.

    python3 benchmarks/verify_sizes_gpu.py --ext .ext --part draft
    python3 benchmarks/verify_sizes_gpu.py --ext .ext --part run
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
OUT = Path(os.environ.get("OUT", ROOT / "gpu-verify-sizes"))
WORK = Path(os.environ.get("SIZES_WORK", "/tmp/bench/sizes"))
LIGER_MODULE = "src/liger_kernel/transformers/functional.py"
# entry → (its benchmark script, what flopwatch's peer runs beside what the script's torch side runs). Left
# out: rms_norm (flopwatch's peer is torch's fused F.rms_norm, the script's LlamaRMSNorm five eager kernels)
# and jsd (the script's TorchJSD and flopwatch's eager JSD differ in their fp32 casts), whose ratios
# measure different peers; swiglu and geglu (the scripts time a whole MLP, matmuls included).
COMPARED = {
    "liger_cross_entropy": ("benchmark_cross_entropy.py", "F.cross_entropy; the script: nn.CrossEntropyLoss (the same)"),
    "liger_softmax": ("benchmark_softmax.py", "torch.softmax; the script: torch.softmax (the same)"),
    "liger_layer_norm": ("benchmark_layer_norm.py", "F.layer_norm; the script: nn.LayerNorm (the same)"),
    "liger_group_norm": ("benchmark_group_norm.py", "F.group_norm; the script: nn.GroupNorm (the same)"),
    "liger_kl_div": ("benchmark_kl_div.py", "F.kl_div; the script: nn.KLDivLoss (the same)"),
    "liger_dyt": ("benchmark_dyt.py", "eager γ·tanh(α·x)+β; the script: its TorchDyT"),
    "liger_relu_squared": ("benchmark_relu_squared.py", "square(relu(x)); the script: its torch ReLU²"),
    "liger_poly_norm": ("benchmark_poly_norm.py", "eager PolyNorm (Liger's test); the script: its torch PolyNorm"),
    "liger_sparsemax": ("benchmark_sparsemax.py", "the repository's torch_sparsemax; the script: its torch sparsemax"),
    "liger_tvd": ("benchmark_tvd.py", "eager TVD (Liger's test); the script: its TorchTVDLoss"),
}
# Runs one Liger benchmark script with `utils.run_benchmarks` timing the forward mode of its speed
# metric only, every size, each provider; its measurements to a JSON file. Argv: SCRIPT OUT.json.
RUNNER = r'''
import json, runpy, sys
import utils

script, out = sys.argv[1], sys.argv[2]
rows = []


def forward_only(bench_test_fn, kernel_name, metric_name, metric_unit, x_name, x_label, x_values, kernel_providers,
                 kernel_operation_modes=(None,), extra_benchmark_configs=None, overwrite=False):
    if metric_name != "speed":
        return
    for cfg in extra_benchmark_configs or [{}]:
        for provider in kernel_providers:
            for x in x_values:
                try:
                    got = bench_test_fn(utils.SingleBenchmarkRunInput(x=x, kernel_provider=provider,
                                                                      kernel_operation_mode="forward",
                                                                      extra_benchmark_config=cfg))
                    rows.append({"kernel": kernel_name, "provider": provider, "x_name": x_name, "x": x,
                                 "ms": got.y_50, "config": repr(cfg)[:200]})
                except Exception as exc:  # an out-of-memory size: noted, the others go on
                    rows.append({"kernel": kernel_name, "provider": provider, "x": x, "error": repr(exc)[:200]})
                    import torch
                    torch.cuda.empty_cache()
                with open(out, "w") as f:
                    json.dump(rows, f)


utils.run_benchmarks = forward_only
sys.argv = [script]
runpy.run_path(script, run_name="__main__")
with open(out, "w") as f:
    json.dump(rows, f)
'''


def cli(repo: Path, *args: str, log: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    t0 = time.time()
    proc = subprocess.run([sys.executable, "-m", "pipeline.cli", *args], cwd=repo, capture_output=True, text=True,
                          env=env, check=False)
    (OUT / log).write_text(f"$ flopwatch {' '.join(args)}\n{proc.stdout}\n{proc.stderr}")
    print(f"$ flopwatch {' '.join(args)}  (exit {proc.returncode}, {time.time() - t0:.0f} s)", flush=True)
    return proc


def git_commit(repo: Path, message: str) -> None:
    first = [] if (repo / ".git").exists() else [["init", "-q", "-b", "main"]]
    for cmd in (*first, ["add", "-A"], ["-c", "user.name=verify", "-c", "user.email=verify@example.com", "commit",
                                        "-qm", message, "--allow-empty"]):
        subprocess.run(["git", *cmd], cwd=repo, check=True)


def fresh(source: Path, name: str) -> Path:
    repo = WORK / name
    if repo.exists():
        shutil.rmtree(repo)
    shutil.copytree(source, repo, ignore=shutil.ignore_patterns(".git"))
    git_commit(repo, f"{name} as fetched")
    return repo


def last_json(text: str) -> dict:
    lines = [line for line in text.strip().splitlines() if line.startswith("{")]
    return json.loads(lines[-1]) if lines else {}


# -- the drafts' sizes --------------------------------------------------------------------------------

def largest_shapes(repo: Path) -> dict[str, tuple[str, int]]:
    """Variant → (its largest timed shape's key, its element count), read as `run` reads it."""
    from pipeline.project.config import load_config
    from pipeline.project.discovery import find_ops
    from pipeline.project.manifest import ManifestError, load_variant

    config = load_config(repo)
    ops, _ = find_ops(repo, config.kernel_dirs)
    out = {}
    for manifest in sorted((repo / "flopwatch").glob("*/variant.toml")):
        try:
            v = load_variant(repo, manifest, config, ops)
        except ManifestError as exc:
            print(f"  {manifest.parent.name}: {exc}")
            continue
        if v.shapes:
            def size(s) -> int:
                n = 1
                for value in s.dims.values():
                    n *= int(value)
                return n
            best = max(v.shapes, key=size)
            out[v.name] = (best.key, size(best))
    return out


def source_of(label: str) -> str:
    """Where a draft's sizes came from, in a word: bench (a script or sweep of the repository),
    scaled (the test's, grown by the rule), test, guess."""
    if label.startswith("a guess"):
        return "guess"
    if "scaled from" in label:
        return "scaled"
    if label.startswith(("benchmark", "bench")) or "(recorded" in label or "(read from" in label \
            or "triton.testing.Benchmark" in label:
        return "bench"
    return "test" if label else "—"


# -- parts -----------------------------------------------------------------------------------------------

def part_draft(ext: Path) -> None:
    liger = fresh(ext / "Liger-Kernel", "Liger-Kernel")
    proc = cli(liger, "new", LIGER_MODULE, "--no-build", "--json", log="sizes-liger-new.log")
    (OUT / "sizes-liger-new.json").write_text(json.dumps(last_json(proc.stdout), indent=1))
    git_commit(liger, "drafts of flopwatch new")
    try:
        import expecttest  # noqa: F401
        has_expecttest = "yes (the check below does not show that the reference is taken without it)"
    except ImportError:
        has_expecttest = "no"
    ext_cpp = fresh(ext / "extension-cpp", "extension-cpp")
    drafted = cli(ext_cpp, "init", "--no-build", "--no-workflow", "--json", log="sizes-extcpp-init.log")
    (OUT / "sizes-extcpp-init.json").write_text(json.dumps(last_json(drafted.stdout), indent=1))
    git_commit(ext_cpp, "drafts of flopwatch init")
    ran = cli(ext_cpp, "run", "--json", "--db", str(WORK / "extcpp.db"), "--site", str(WORK / "extcpp-site"),
              log="sizes-extcpp-run.log")
    summary = last_json(ran.stdout)
    summary["expecttest_installed"] = has_expecttest
    (OUT / "sizes-extcpp-run.json").write_text(json.dumps(summary, indent=1))


def part_run(ext: Path) -> None:
    liger = WORK / "Liger-Kernel"
    if not (liger / "flopwatch").is_dir():
        raise SystemExit(f"no drafts in {liger}: run --part draft first on this machine")
    largest = largest_shapes(liger)
    (OUT / "sizes-liger-largest.json").write_text(json.dumps(largest, indent=1))
    args = ["run", "--json", "--db", str(WORK / "liger.db"), "--site", str(WORK / "liger-site")]
    for key in sorted({k for k, _ in largest.values()}):
        args += ["--shape", key]
    ran = cli(liger, *args, log="sizes-liger-run.log")
    (OUT / "sizes-liger-run.json").write_text(json.dumps(last_json(ran.stdout), indent=1))
    runner = WORK / "forward_only.py"
    runner.write_text(RUNNER)
    scripts = liger / "benchmark" / "scripts"
    # utils.py asks importlib.metadata for liger-kernel, which this checkout never installed: the
    # recorder's stand-in dist-info (read from its pyproject.toml, never run) answers, as it does there
    from workers.recorder.distribution import read_distribution, write_dist_info

    dist = WORK / "dist"
    found = read_distribution(liger)
    if found is not None:
        write_dist_info(dist, found[0], found[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(liger / "src"), str(scripts), str(dist),
                                                        os.environ.get("PYTHONPATH", "")])}
    for entry, (script, _) in COMPARED.items():
        out = OUT / f"sizes-script-{entry}.json"
        t0 = time.time()
        try:
            proc = subprocess.run([sys.executable, str(runner), script, str(out)], cwd=scripts, env=env,
                                  capture_output=True, text=True, check=False, timeout=150)
        except subprocess.TimeoutExpired as exc:  # what it measured until then is in `out`
            (OUT / f"sizes-script-{entry}.log").write_text(f"timed out after {exc.timeout} s")
            print(f"{script}: forward speed only (timed out, {time.time() - t0:.0f} s)", flush=True)
            continue
        (OUT / f"sizes-script-{entry}.log").write_text(proc.stdout[-20000:] + "\n" + proc.stderr[-20000:])
        print(f"{script}: forward speed only (exit {proc.returncode}, {time.time() - t0:.0f} s)", flush=True)


# -- the tables ---------------------------------------------------------------------------------------------

def _rows(summary: dict) -> list[dict]:
    return summary.get("results", []) if summary else []


def _load(name: str) -> dict:
    path = OUT / name
    return json.loads(path.read_text()) if path.is_file() and path.read_text().strip() else {}


def ratio_at(script_rows: list[dict], shape_key: str) -> tuple[float | None, str]:
    """The script's torch-to-Liger forward time ratio (its Liger speed-up) at the largest x
    that is one of the sizes in flopwatch's row, and that x."""
    values = {v for part in shape_key.split(",") for v in [part.split("=")[-1]] if v.isdigit()}
    by_x: dict = {}
    for r in script_rows:
        if "ms" in r and str(r["x"]) in values:
            by_x.setdefault(r["x"], {})[r["provider"]] = r["ms"]
    for x in sorted(by_x, reverse=True):
        times = by_x[x]
        liger = times.get("liger")
        other = next((times[p] for p in ("torch", "huggingface") if p in times), None)
        if liger and other:
            return other / liger, f"x={x}"
    return None, ""


def tables() -> bool:
    new = _load("sizes-liger-new.json")
    drafts = {d["variant"]: d for d in new.get("drafts", [])}
    largest = _load("sizes-liger-largest.json")
    rows = [r for r in _rows(_load("sizes-liger-run.json")) if not r.get("peer")]
    by_variant = {r["variant"]: r for r in rows if largest.get(r["variant"], [""])[0] == r["shape"]}
    good = True
    if drafts:
        print(f"\n== Liger-Kernel @ ead96b6 ({LIGER_MODULE}): {len(drafts)} drafts")
        print(f"  {'entry':36} {'sizes':7} {'largest size':30} {'status':10} {'median':>10} {'% peer':>7} {'launch':>7}")
        counted = 0
        for name, d in drafts.items():
            source = source_of(d.get("sizes") or "")
            counted += source in ("bench", "scaled")
            r = by_variant.get(name, {})
            median = f"{r['median_s'] * 1e3:.3f} ms" if r.get("median_s") else ""
            pct = f"{r['pct_of_peer']:.0f}%" if r.get("pct_of_peer") else ""
            bound = "" if "launch_bound" not in r else ("bound" if r["launch_bound"] else "no")
            print(f"  {name:36} {source:7} {largest.get(name, ['—'])[0][:30]:30} {r.get('status', '—'):10} "
                  f"{median:>10} {pct:>7} {bound:>7}")
        print(f"  timed at a size from its benchmark scripts or scaled, source named: {counted} of {len(drafts)} "
              f"(at least 22: {'yes' if counted >= 22 else 'NO'})")
        good = good and counted >= 22
    compared = []
    for entry, (script, peers) in COMPARED.items():
        data = _load(f"sizes-script-{entry}.json")
        r = by_variant.get(entry)
        if not isinstance(data, list) or not r or not r.get("pct_of_peer"):
            compared.append((entry, script, None, None, "", peers, "no script result" if not isinstance(data, list)
                             else "no flopwatch row with a % of peer"))
            continue
        theirs, at = ratio_at(data, r["shape"])
        mine = r["pct_of_peer"] / 100
        compared.append((entry, script, mine, theirs, at, peers, ""))
    if any(c[2] is not None for c in compared):
        print("\n== Liger-to-peer forward speed: flopwatch's % of peer against the benchmark script's own ratio")
        print(f"  {'entry':28} {'at':10} {'flopwatch':>9} {'script':>7} {'within 25%':>10}  peers")
        within = 0
        for entry, script, mine, theirs, at, peers, why in compared:
            if mine is None or theirs is None:
                print(f"  {entry:28} {'':10} {'':>9} {'':>7} {'—':>10}  {why or 'no shared size'}")
                continue
            ok = abs(mine / theirs - 1) <= 0.25
            within += ok
            print(f"  {entry:28} {at:10} {mine:>8.2f}x {theirs:>6.2f}x {'yes' if ok else 'no':>10}  {peers}")
        print(f"  within ±25%: {within} (at least 6: {'yes' if within >= 6 else 'NO'})")
        good = good and within >= 6
    ext = _load("sizes-extcpp-run.json")
    if ext:
        print(f"\n== extension-cpp @ 0ec4969, flopwatch init (expecttest installed here: "
              f"{ext.get('expecttest_installed')})")
        for name in ("mymuladd", "mymul", "myadd_out"):
            mine = [r for r in _rows(ext) if r["variant"] == name]
            for r in mine:
                n = 1
                for part in r["shape"].split(","):
                    value = part.split("=")[-1]
                    n *= int(value) if value.isdigit() else 1
                fine = r["status"] == "ok" and n >= 16 << 20
                good = good and (fine or not r["device"].startswith("cuda"))
                print(f"  {name:10} {r['shape'][:24]:24} {r['device'][:28]:28} {r['status']:10} "
                      f"{n / 2**20:6.1f}M elements {'ok' if fine else 'NO'}")
    print(f"\nevery target met: {'yes' if good else 'NO'}")
    return good


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ext", default=".ext", help="folder holding the Liger-Kernel and extension-cpp checkouts")
    parser.add_argument("--part", choices=("draft", "run", "all", "tables"), default="all")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    WORK.mkdir(parents=True, exist_ok=True)
    ext = Path(args.ext).resolve()
    if args.part in ("draft", "all"):
        part_draft(ext)
    if args.part in ("run", "all"):
        part_run(ext)
    return 0 if tables() else 1


if __name__ == "__main__":
    sys.exit(main())
