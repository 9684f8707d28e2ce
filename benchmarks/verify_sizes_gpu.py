"""Drafts timed at the sizes that matter, on one GPU (issue 47): public repositories onboarded
unedited, at default settings, their drafts' sizes taken from the repositories' benchmarks.

Parts, each under the device machine's 10 minutes (`--part draft`, then `--part run`, on the
same warm machine: the drafted checkouts stay in WORK between them; `--part all` does all three):

draft  Liger-Kernel @ ead96b6: `flopwatch new src/liger_kernel/transformers/functional.py`, which
       runs Liger's benchmark scripts under the recorder (they compute their sizes from model
       configurations and memory probes; transformers is installed here). The drafts are copied
       to OUT/liger-drafts (verify_modes_gpu.py --drafts takes them on a later call).
run    Liger's drafts run (`flopwatch run`, default settings) at each entry's largest timed size
       (`--shape`: the rows the report needs, not every size a draft lists); then, for the ops
       whose benchmark script compares Liger with a torch or huggingface implementation, that
       script run in forward speed mode at its largest size only (its other sizes, modes and its
       memory pass left out: `utils.run_benchmarks` patched), and its Liger-to-torch speed ratio
       there held against flopwatch's % of peer at the same size (target: ±25%).
extcpp pytorch/extension-cpp @ 0ec4969 on this node without `expecttest`: `flopwatch init`, then
       `flopwatch run` (mymuladd, mymul and myadd_out ok, each at ≥ 16M elements).

The checkouts are carried as .ext/Liger-Kernel and .ext/extension-cpp. Full outputs (new and
run JSON, logs, the scripts' measurements) go to OUT, each as soon as its step ends; a short
table comes last (`--part tables` prints it again from OUT).

    python3 benchmarks/verify_sizes_gpu.py --ext .ext --part draft
    python3 benchmarks/verify_sizes_gpu.py --ext .ext --part run
    python3 benchmarks/verify_sizes_gpu.py --ext .ext --part extcpp
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
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
OUT = Path(os.environ.get("OUT", ROOT / "gpu-verify-sizes"))
WORK = Path(os.environ.get("SIZES_WORK", "/tmp/bench/sizes"))
LIGER_MODULE = "src/liger_kernel/transformers/functional.py"
SCRIPT_TIMEOUT_S = 90  # one script, forward speed at its largest size: imports, compiles, two timings
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
# entry → (x, the script's config) → flopwatch's sizes in the op's DIMS order, and the dtype the
# script's inputs have: where a draft's sizes are not the script's (drafted where the scripts could
# not run), a copy of the draft at the script's largest point is what the ratio is read from.
# Left out: sparsemax (the draft's op is the repository's own, sized N, M, K).
def _dtype(cfg: dict) -> str:
    return {"torch.bfloat16": "bf16", "torch.float16": "fp16"}.get(str(cfg.get("dtype")), "fp32")


AT_SCRIPT_POINT = {
    "liger_cross_entropy": (lambda x, c: [x, c["vocab_size"]], lambda c: "fp32"),  # torch.randn's default
    "liger_softmax": (lambda x, c: [x, c["hidden_size"]], _dtype),
    "liger_layer_norm": (lambda x, c: [x, c["hidden_size"]], _dtype),
    "liger_group_norm": (lambda x, c: [max(1, x // c["H"]), c["hidden_size"], c["H"],
                                       c["hidden_size"] // c["channels_per_group"]], _dtype),
    "liger_kl_div": (lambda x, c: [x, c["vocab_size"]], lambda c: "fp32"),
    "liger_dyt": (lambda x, c: [x, c["hidden_size"]], _dtype),
    "liger_relu_squared": (lambda x, c: [x, c["hidden_size"]], _dtype),
    "liger_poly_norm": (lambda x, c: [x, c["hidden_size"]], _dtype),
    "liger_tvd": (lambda x, c: [x, c["vocab_size"]], lambda c: "fp32"),
}
# Runs one Liger benchmark script with `utils.run_benchmarks` timing the forward mode of its speed
# metric only, every size, each provider; its measurements to a JSON file. Argv: SCRIPT OUT.json.
RUNNER = r'''
import json, runpy, sys
import utils

script, out = sys.argv[1], sys.argv[2]
largest_only = sys.argv[3:] == ["largest"]
rows = []


def forward_only(bench_test_fn, kernel_name, metric_name, metric_unit, x_name, x_label, x_values, kernel_providers,
                 kernel_operation_modes=(None,), extra_benchmark_configs=None, overwrite=False):
    if metric_name != "speed":
        return
    if largest_only:  # the size the ratio is read at: flopwatch's draft is timed at the sweep's largest
        x_values = [max(x_values)]
    for cfg in extra_benchmark_configs or [{}]:
        for provider in kernel_providers:
            for x in x_values:
                try:
                    got = bench_test_fn(utils.SingleBenchmarkRunInput(x=x, kernel_provider=provider,
                                                                      kernel_operation_mode="forward",
                                                                      extra_benchmark_config=cfg))
                    rows.append({"kernel": kernel_name, "provider": provider, "x_name": x_name, "x": x,
                                 "ms": got.y_50, "config": repr(cfg)[:200],
                                 "cfg": {k: v if isinstance(v, (int, float, str, bool)) else str(v)
                                         for k, v in cfg.items()}})
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
    from verify_ops_gpu import cli as flopwatch  # its progress written to the log as it comes

    return flopwatch(repo, *args, log=log, out=OUT)


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
    # every file `new` wrote (flopwatch.toml, the drafts), at its path in the repository: for the
    # record and for verify_modes_gpu.py --drafts (a later call)
    written = subprocess.run(["git", "diff", "--name-only", "HEAD~1", "HEAD"], cwd=liger, capture_output=True,
                             text=True, check=True).stdout.split()
    for rel in written:
        (OUT / "liger-drafts" / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(liger / rel, OUT / "liger-drafts" / rel)


def part_extcpp(ext: Path) -> None:
    """pytorch/extension-cpp: `init` and `run` on this node, with or without expecttest."""
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


def run_scripts(liger: Path, entries: list[str] | None = None) -> None:
    """Each COMPARED op's benchmark script, forward speed at its largest size only, one at a
    time (their timings share the GPU with nothing): measurements to OUT/sizes-script-ENTRY.json."""
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
        if entries is not None and entry not in entries:
            continue
        out = OUT / f"sizes-script-{entry}.json"
        t0 = time.time()
        try:
            proc = subprocess.run([sys.executable, str(runner), script, str(out), "largest"], cwd=scripts, env=env,
                                  capture_output=True, text=True, check=False, timeout=SCRIPT_TIMEOUT_S)
        except subprocess.TimeoutExpired as exc:  # what it measured until then is in `out`
            (OUT / f"sizes-script-{entry}.log").write_text(f"timed out after {exc.timeout} s")
            print(f"{script}: forward speed only (timed out, {time.time() - t0:.0f} s)", flush=True)
            continue
        (OUT / f"sizes-script-{entry}.log").write_text(proc.stdout[-20000:] + "\n" + proc.stderr[-20000:])
        print(f"{script}: forward speed only (exit {proc.returncode}, {time.time() - t0:.0f} s)", flush=True)


def script_point(rows: list[dict]) -> tuple[int, dict, float] | None:
    """The script's largest x with both a Liger and a torch (or huggingface) time: (x, its
    config, torch-to-Liger time ratio)."""
    by_x: dict = {}
    for r in rows:
        if "ms" in r:
            by_x.setdefault(r["x"], {})[r["provider"]] = r
    for x in sorted(by_x, reverse=True):
        times = by_x[x]
        other = next((times[p] for p in ("torch", "huggingface") if p in times), None)
        if "liger" in times and other:
            return x, times["liger"].get("cfg") or {}, other["ms"] / times["liger"]["ms"]
    return None


def at_point_copy(text: str, name: str, sizes: list[int], dtype: str) -> str:
    """A draft's variant.toml renamed, timed at `sizes` in `dtype`, forward only
    (`verify_modes_gpu.sized_copy`): its `[[check]]` point (the test's size, `new` writes it
    last) dropped, every other line as drafted."""
    from verify_modes_gpu import sized_copy

    return sized_copy(text.split("\n[[check]]")[0].rstrip() + "\n", name, [sizes], dtype, ["forward"])


def write_point_copies(liger: Path) -> list[str]:
    """`ratio_ENTRY`: each COMPARED draft at its script's largest point (AT_SCRIPT_POINT), where
    the script measured one; the names written."""
    names = []
    for entry, (sizes_of, dtype_of) in AT_SCRIPT_POINT.items():
        draft = liger / "flopwatch" / entry / "variant.toml"
        point = script_point(_load(f"sizes-script-{entry}.json") or [])
        if point is None or not draft.is_file():
            continue
        x, cfg, _ = point
        try:
            sizes, dtype = sizes_of(x, cfg), dtype_of(cfg)
        except (KeyError, TypeError, ZeroDivisionError) as exc:
            print(f"{entry}: the script's point {x} ({cfg}) gives no sizes: {exc!r}", flush=True)
            continue
        folder = liger / "flopwatch" / f"ratio_{entry}"
        folder.mkdir(exist_ok=True)
        (folder / "variant.toml").write_text(at_point_copy(draft.read_text(), f"ratio_{entry}", sizes, dtype))
        names.append(f"ratio_{entry}")
    return names


def run_drafts(liger: Path, largest: dict[str, tuple[str, int]], names: list[str], log: str) -> None:
    """`flopwatch run --json` of `names` at their largest sizes, into the one store; what the
    store holds is exported beside (OUT/sizes-liger-stored.csv) however the run ends, so that a
    run stopped at the call's deadline still shows every job it finished."""
    if not names:
        return
    args = ["run", "--json", "--db", str(WORK / "liger.db"), "--site", str(WORK / "liger-site")]
    for key in sorted({largest[n][0] for n in names if n in largest}):
        args += ["--shape", key]
    for name in names:
        args += ["--variant", name]
    try:
        ran = cli(liger, *args, log=log)
        summary = last_json(ran.stdout)
        merged = _load("sizes-liger-run.json")
        merged["results"] = merged.get("results", []) + summary.get("results", [])
        merged.setdefault("runs", []).append({k: v for k, v in summary.items() if k != "results"})
        (OUT / "sizes-liger-run.json").write_text(json.dumps(merged, indent=1))
    finally:
        subprocess.run([sys.executable, "-m", "pipeline.cli", "export", str(OUT / "sizes-liger-stored.csv"), "--db",
                        str(WORK / "liger.db")], cwd=liger, check=False, timeout=60,
                       env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"})


def part_run(ext: Path, drafts: Path | None = None, scripts: bool = True, scripts_first: bool = False,
             largest_run: bool = True, only: list[str] | None = None) -> None:
    """The drafts at their largest sizes; with `scripts`, Liger's own scripts of the COMPARED
    ops too. `scripts_first`: the scripts, then the compared drafts' copies at the scripts'
    points (`write_point_copies`), then (`largest_run`) every draft at its largest size, so that
    a call stopped at its deadline keeps the ratios whole."""
    liger = WORK / "Liger-Kernel"
    if drafts is not None:
        liger = fresh(ext / "Liger-Kernel", "Liger-Kernel")
        shutil.copytree(drafts / "liger-drafts", liger, dirs_exist_ok=True)
        shutil.copy2(drafts / "sizes-liger-new.json", OUT / "sizes-liger-new.json")
        git_commit(liger, f"drafts of flopwatch new, written earlier ({drafts})")
    if not (liger / "flopwatch").is_dir():
        raise SystemExit(f"no drafts in {liger}: run --part draft first on this machine")
    largest = largest_shapes(liger)
    (OUT / "sizes-liger-largest.json").write_text(json.dumps(largest, indent=1))
    (OUT / "sizes-liger-run.json").unlink(missing_ok=True)
    if scripts and scripts_first:
        run_scripts(liger, [e for e in COMPARED if e in AT_SCRIPT_POINT])
        copies = write_point_copies(liger)
        git_commit(liger, "the compared entries at their scripts' largest points")
        run_drafts(liger, {}, copies, log="sizes-liger-run-compared.log")  # each copy has its one size
        if largest_run:
            run_drafts(liger, largest, list(largest), log="sizes-liger-run.log")
        return
    run_drafts(liger, largest, [n for n in largest if not only or n in only], log="sizes-liger-run.log")
    if scripts:
        run_scripts(liger)


# -- the tables ---------------------------------------------------------------------------------------------

def _rows(summary: dict) -> list[dict]:
    return summary.get("results", []) if summary else []


def _load(name: str) -> dict:
    path = OUT / name
    return json.loads(path.read_text()) if path.is_file() and path.read_text().strip() else {}


def ratio_at(script_rows: list[dict], shape_key: str) -> tuple[float | None, str]:
    """The script's torch-to-Liger forward time ratio (its Liger speed-up) at the largest x
    that is one of the sizes in flopwatch's row, and that x (`script_point` over those rows)."""
    values = {v for part in shape_key.split(",") for v in [part.split("=")[-1]] if v.isdigit()}
    point = script_point([r for r in script_rows if str(r["x"]) in values])
    return (point[2], f"x={point[0]}") if point else (None, "")


def stored_rows() -> list[dict]:
    """The rows of OUT/sizes-liger-stored.csv (a run stopped before its JSON) as the run's JSON
    gives them: variant, shape, status, median_s, launch_bound, and % of peer from the peer's
    row at the same shape and dtype."""
    import csv

    path = OUT / "sizes-liger-stored.csv"
    if not path.is_file():
        return []
    with path.open() as f:
        table = list(csv.DictReader(f))
    peers = {(r["op"], r["shape"], r["dtype"]): float(r["median_s"]) for r in table
             if r["peer"] == "True" and r["median_s"]}
    rows = []
    for r in table:
        row = {"variant": r["variant"], "shape": r["shape"], "status": r["status"], "peer": r["peer"] == "True",
               "device": r.get("device", ""), "median_s": float(r["median_s"]) if r["median_s"] else None}
        if r["launch_bound"] in ("True", "False"):
            row["launch_bound"] = r["launch_bound"] == "True"
        peer = peers.get((r["op"], r["shape"], r["dtype"]))
        if peer and row["median_s"] and not row["peer"]:
            row["pct_of_peer"] = 100 * peer / row["median_s"]
        rows.append(row)
    return rows


def tables() -> bool:
    new = _load("sizes-liger-new.json")
    drafts = {d["variant"]: d for d in new.get("drafts", [])}
    largest = _load("sizes-liger-largest.json")
    # the exported store first: it holds every run's finished jobs, also of a run the deadline stopped
    rows = stored_rows() or _rows(_load("sizes-liger-run.json"))
    # this machine's GPU: a Triton draft's rocm rows are `skipped` on an NVIDIA node
    rows = [r for r in rows if not r.get("peer") and not (r.get("device") or "").startswith("rocm")]
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
        timed = [by_variant[n] for n in drafts if by_variant.get(n, {}).get("median_s")]
        bound = sorted(r["variant"] for r in timed if r.get("launch_bound"))
        print(f"  launch-bound at its largest size: {len(bound)} of {len(timed)} timed (none: "
              f"{'yes' if not bound else 'NO: ' + ', '.join(bound)})")
        good = good and not bound
    compared = []
    for entry, (script, peers) in COMPARED.items():
        data = _load(f"sizes-script-{entry}.json")
        copy = next((r for r in rows if r["variant"] == f"ratio_{entry}"), None)  # at the script's point
        r = copy or by_variant.get(entry)
        if not isinstance(data, list) or not r or not r.get("pct_of_peer"):
            compared.append((entry, script, None, None, "", peers, "no script result" if not isinstance(data, list)
                             else "no flopwatch row with a % of peer"))
            continue
        point = script_point(data) if copy else None
        theirs, at = (point[2], f"x={point[0]}") if point else ratio_at(data, r["shape"])
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
    parser.add_argument("--no-scripts", action="store_true",
                        help="--part run without Liger's own scripts (flopwatch's run alone)")
    parser.add_argument("--drafts", type=Path, default=None,
                        help="--part run on drafts written earlier (a folder with liger-drafts/, as --part draft "
                             "writes it) instead of those of a --part draft on this machine")
    parser.add_argument("--variant", action="append", default=None,
                        help="--part run: only these drafts (repeatable; default every draft)")
    parser.add_argument("--no-largest", action="store_true",
                        help="--part run --scripts-first: the scripts and the copies at their points only")
    parser.add_argument("--scripts-first", action="store_true",
                        help="--part run: Liger's scripts first, then the compared entries' run, then the others'")
    parser.add_argument("--part", choices=("draft", "run", "extcpp", "all", "tables"), default="all")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    WORK.mkdir(parents=True, exist_ok=True)
    ext = Path(args.ext).resolve()
    if args.part in ("draft", "all"):
        part_draft(ext)
    if args.part in ("run", "all"):
        part_run(ext, args.drafts, scripts=not args.no_scripts, scripts_first=args.scripts_first,
                 largest_run=not args.no_largest, only=args.variant)
    if args.part in ("extcpp", "all"):
        part_extcpp(ext)
    return 0 if tables() else 1


if __name__ == "__main__":
    sys.exit(main())
