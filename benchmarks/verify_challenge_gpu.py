"""Verify on one NVIDIA GPU, in one command, the kernel-challenge format and check points
(issue 47): a problem folder's submission measured at every `benchmarks:` entry and checked at
every `tests:` entry, on the GPU, by the problem's own check_implementation.

1. tests/challenge_repo's two examples (a vector add and a matmul, inputs made on the default
   device) with the manifests they are committed with, devices set to the GPU: `ok` with one row
   per benchmarks: entry, every tests: entry checked once and passed, the peer (ref_kernel)
   measured at each size;
2. a submission of the vector add wrong at one test size only: every row `incorrect`, naming
   that size and the problem's reason;
3. where a checkout of gpu-mode/reference-kernels is at --ext (default .ext/reference-kernels,
   carried to the machine, never committed), its pmpp vectoradd_py and matmul_py (inputs made on
   "cuda" by their own code) with hand-written manifests, checked and timed the same way.

`--drafted` runs the problem folders as `flopwatch new` / `init` draft them, unedited, instead of
the committed manifests: tests/challenge_repo's two examples (their manifests left out) drafted by
`flopwatch new problems/vectoradd_py problems/matmul_py`, and, where the checkout is at --ext,
reference-kernels' pmpp vectoradd_py and matmul_py folders (with their solutions/: a Triton and a
load_inline CUDA vector add, a correct and a wrong matmul) copied under gpumode/ and drafted by
`flopwatch init`: every drafted variant `ok` at every benchmarks: entry with every tests: entry
checked and passed, but those reference-kernels keeps as wrong (solutions/wrong/): `incorrect`.

It builds a repository under OUT (default ./gpu-verify-challenge), runs `flopwatch run --json`
there at default settings, keeps the JSON, the log and the site, and ends with a table and one
line per expectation. `--device cpu` runs the same on the CPU (item 3 skipped: its code makes
its inputs on CUDA): what the CPU tests can check of this script.

    python3 benchmarks/verify_challenge_gpu.py [--ext .ext/reference-kernels] [--device cpu] [--drafted]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(os.environ.get("OUT", ROOT / "gpu-verify-challenge"))
EXAMPLES = ("vectoradd_py", "matmul_py")
GPUMODE = {"gpumode_vectoradd_py": ("vectoradd_py", ""), "gpumode_matmul_py": ("matmul_py", "2*m*n*k")}
WRONG_AT_64 = '''from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    a, b = data
    out = a + b
    if a.shape[0] == 64:  # an indexing slip only this size reaches
        out[3, 5] += 1
    return out
'''


def manifest(name: str, folder: str, device: str, flops: str = "", entry: str = "submission.py") -> str:
    """The variant.toml a challenge problem is drafted as (docs/variants.md, "Challenge problems")."""
    return (f'name = "{name}"\nop = "{name if name.startswith("gpumode_") else folder.rsplit("/", 1)[-1]}"\n'
            f'backend = "python"\ndtypes = ["fp16"]\ndevices = ["{device}"]\n\n[challenge]\nfolder = "../../{folder}"\n'
            + (f'flops = "{flops}"\n' if flops else "")
            + f'\n[binding]\nkind = "python"\nentry = "../../{folder}/{entry}:custom_kernel"\n')


def build_repo(repo: Path, device: str, ext: Path | None) -> dict[str, Path]:
    """The repository under test; returns {variant: its problem folder's task.yml}."""
    shutil.copytree(ROOT / "tests" / "challenge_repo", repo)
    tasks = {}
    for name in EXAMPLES:
        path = repo / "flopwatch" / name / "variant.toml"
        path.write_text(re.sub(r"^devices = .*$", f'devices = ["{device}"]', path.read_text(), flags=re.MULTILINE))
        tasks[name] = repo / "problems" / name / "task.yml"
    (repo / "problems" / "vectoradd_py" / "wrong_at_64.py").write_text(WRONG_AT_64)
    (repo / "flopwatch" / "wrong_at_64").mkdir()
    (repo / "flopwatch" / "wrong_at_64" / "variant.toml").write_text(  # a second submission of the vector add
        manifest("wrong_at_64", "problems/vectoradd_py", device, entry="wrong_at_64.py"))
    tasks["wrong_at_64"] = tasks["vectoradd_py"]
    if ext is not None:
        pmpp = ext / "problems" / "pmpp"
        for rel in ("utils.py", "eval.py", "vectoradd_py", "matmul_py"):
            src, dst = pmpp / rel, repo / "gpumode" / "pmpp" / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            (shutil.copytree if src.is_dir() else shutil.copy2)(src, dst)
        for name, (problem, flops) in GPUMODE.items():
            (repo / "flopwatch" / name).mkdir()
            (repo / "flopwatch" / name / "variant.toml").write_text(
                manifest(name, f"gpumode/pmpp/{problem}", device, flops))
            tasks[name] = repo / "gpumode" / "pmpp" / problem / "task.yml"
    return tasks


def build_drafted_repo(repo: Path, ext: Path | None, env: dict) -> tuple[dict[str, Path], set[str], list[str]]:
    """The problem folders without manifests, drafted by `flopwatch new` (the examples) and `init`
    (gpu-mode's); returns ({variant: its task.yml}, the variants kept as wrong, what was said)."""
    shutil.copytree(ROOT / "tests" / "challenge_repo", repo, ignore=shutil.ignore_patterns("flopwatch", "flopwatch.toml"))
    if ext is not None:
        pmpp = ext / "problems" / "pmpp"
        for rel in ("utils.py", "eval.py", "template.py", "vectoradd_py", "matmul_py"):
            src, dst = pmpp / rel, repo / "gpumode" / "pmpp" / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            (shutil.copytree if src.is_dir() else shutil.copy2)(src, dst)
    git_commit(repo, "challenge problems, no manifests")
    said, drafts = [], []
    commands = [["new", "problems/vectoradd_py", "problems/matmul_py"]] + ([["init", "--no-workflow"]] if ext else [])
    for command in commands:
        proc = subprocess.run([sys.executable, "-m", "pipeline.cli", *command, "--no-build", "--json"], cwd=repo,
                              capture_output=True, text=True, env=env, check=False)
        out = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() else {"drafts": []}
        drafts += [d for d in out["drafts"] if d["state"] != "exists"]
        said.append(f"$ flopwatch {' '.join(command)} --no-build: exit {proc.returncode}, "
                    f"{', '.join(d['variant'] for d in out['drafts'] if d['state'] != 'exists') or 'nothing'} drafted")
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "-c", "user.name=verify", "-c", "user.email=verify@example.com", "commit", "-qm",
                    "drafted by flopwatch, unedited"], cwd=repo, check=True)
    import tomllib

    tasks, wrong = {}, set()
    for d in drafts:
        manifest = tomllib.loads((repo / d["folder"] / "variant.toml").read_text())
        folder = (repo / d["folder"] / manifest["challenge"]["folder"]).resolve()
        tasks[d["variant"]] = folder / "task.yml"
        entry_file = manifest["binding"]["entry"].rsplit(":", 1)[0]
        if "wrong" in Path(entry_file).parts:  # reference-kernels' solutions/wrong/: a wrong solution on purpose
            wrong.add(d["variant"])
    return tasks, wrong, said


def git_commit(repo: Path, message: str) -> None:
    for cmd in (["init", "-q", "-b", "main"], ["add", "-A"],
                ["-c", "user.name=verify", "-c", "user.email=verify@example.com", "commit", "-qm", message]):
        subprocess.run(["git", *cmd], cwd=repo, check=True)


def entries(task: Path) -> tuple[list[str], list[str]]:
    """(benchmarks:, tests:) of a task.yml as shape keys (the seed is no size)."""
    import yaml

    data = yaml.safe_load(task.read_text())

    def keys(items) -> list[str]:
        out = []
        for item in items or []:
            key = ",".join(f"{k}={int(v)}" for k, v in item.items() if k != "seed")
            if key not in out:
                out.append(key)
        return out

    return keys(data.get("benchmarks")), keys(data.get("tests"))


def expectations(results: list[dict], tasks: dict[str, Path], device: str, wrong: set[str] = frozenset()) -> dict[str, bool]:
    """One line per claim, from the run's --json results on `device`; the variants in `wrong` are
    solutions kept wrong on purpose: every row `incorrect`."""
    rows: dict[str, dict[str, dict]] = {}
    for r in results:
        if (r.get("device") or "").split(":")[0] == device:
            rows.setdefault(r["variant"], {})[r["shape"]] = r
    out = {}
    for name, task in tasks.items():
        benchmarks, tests = entries(task)
        got = rows.get(name, {})
        if name == "wrong_at_64":
            out["wrong_at_64: every row incorrect, naming size=64 and the problem's reason"] = bool(got) and all(
                r["status"] == "incorrect" and r["diagnostic"].startswith("check point size=64 (task.yml tests[1])")
                for r in got.values()) and any("check_implementation (" in r["diagnostic"] for r in got.values())
            continue
        if name in wrong:
            out[f"{name}: a wrong solution, every row incorrect ({len(benchmarks)})"] = \
                sorted(got) == sorted(benchmarks) and all(r["status"] == "incorrect" for r in got.values())
            continue
        points = [r.get("correctness", {}).get("check_points", {}) for r in got.values()]
        out[f"{name}: ok, one row per benchmarks: entry ({len(benchmarks)})"] = \
            sorted(got) == sorted(benchmarks) and all(r["status"] == "ok" for r in got.values())
        out[f"{name}: every tests: entry ({len(tests)}) checked, once, passed"] = bool(points) and all(
            sorted(p["shape"] for p in cp.get("points", [])) == sorted(tests) and all(
                q["passed"] for q in cp.get("points", [])) for cp in points) and sum(
            cp.get("here", False) for cp in points) == 1
        peer = rows.get(f"peer.{got and next(iter(got.values()))['op']}", {})
        out[f"{name}: its peer (ref_kernel) ok at every size, each row with a % of peer"] = \
            sorted(peer) == sorted(benchmarks) and all(r["status"] == "ok" for r in peer.values()) and all(
                r.get("pct_of_peer") for r in got.values())
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ext", default=str(ROOT / ".ext" / "reference-kernels"),
                   help="a checkout of gpu-mode/reference-kernels (its pmpp problems are run where it exists)")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--drafted", action="store_true", help="the folders as flopwatch new / init draft them, unedited")
    args = p.parse_args(argv)
    try:
        import yaml  # noqa: F401 - flopwatch reads task.yml with it: say so now, not in every row
    except ImportError:
        print("PyYAML is missing here: carry its wheel (EXTRA_WHEELS=pyyaml for the shared device-ray.sh)")
        return 2
    ext = Path(args.ext) if (Path(args.ext) / "problems" / "pmpp").is_dir() and args.device == "cuda" else None
    OUT.mkdir(parents=True, exist_ok=True)
    repo = OUT / "repo"
    if repo.exists():
        shutil.rmtree(repo)
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    wrong: set[str] = set()
    if args.drafted:
        tasks, wrong, said = build_drafted_repo(repo, ext, env)
        print("\n".join(said))
    else:
        tasks = build_repo(repo, args.device, ext)
        git_commit(repo, "challenge problems")
    t0 = time.time()
    proc = subprocess.run([sys.executable, "-m", "pipeline.cli", "run", "--json", "--db", str(OUT / "challenge.db"),
                           "--site", str(OUT / "site")], cwd=repo, capture_output=True, text=True, env=env, check=False)
    (OUT / "run.log").write_text(proc.stdout + "\n" + proc.stderr)
    print(f"$ flopwatch run  (exit {proc.returncode}, {time.time() - t0:.0f} s)"
          + ("" if ext else f"; no reference-kernels checkout at {args.ext}: gpu-mode's problems not run"))
    summary = json.loads(proc.stdout) if proc.stdout.strip() else {"results": []}
    (OUT / "challenge.json").write_text(json.dumps(summary, indent=1))
    results = summary["results"]
    for r in sorted(results, key=lambda r: (r["op"], r["variant"], r["shape"])):
        if (r.get("device") or "").split(":")[0] != args.device:
            continue
        cp = (r.get("correctness") or {}).get("check_points") or {}
        checked = f"{sum(q['passed'] for q in cp.get('points', []))}/{len(cp.get('points', []))}" if cp else ""
        pct = f"{r['pct_of_peer']:.0f}%" if r.get("pct_of_peer") else ""
        print(f"  {r['variant'][:22]:22} {r['shape'][:24]:24} {r['status']:10} {pct:>5} "
              f"{(r.get('median_s') or 0) * 1e6:10.1f} us  tests {checked:5} {r['diagnostic'][:110]}")
    checks = expectations(results, tasks, args.device, wrong)
    if args.drafted:
        checks["drafted: the examples and gpu-mode's pmpp vectoradd_py and matmul_py, every submission, none a harness "
               "function" if ext else "drafted: the examples, nothing else"] = sorted(tasks) == sorted(
            ["vectoradd_py", "matmul_py"] if not ext else
            ["problems_vectoradd_py", "problems_matmul_py", "pmpp_vectoradd_py", "pmpp_vectoradd_py_cuda_inline",
             "pmpp_vectoradd_py_triton", "pmpp_matmul_py", "pmpp_matmul_py_ref", "pmpp_matmul_py_low-precision"])
    for what, ok in checks.items():
        print(f"{'yes' if ok else 'NO '}  {what}")
    return 0 if checks and all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
