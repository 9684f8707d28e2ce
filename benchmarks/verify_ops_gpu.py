"""Verify on one NVIDIA GPU, in one command, what docs/ops.md claims of ops and peers:

1. attention (causal and not) and softmax: the bundled CUDA and Triton variants checked against
   the fp64 reference and timed against the built-in peers (torch SDPA, torch.softmax);
2. an op the repository declares itself (tests/repo_ops: rmsnorm, CUDA and CPU variants) built,
   checked, timed and reported, with its own peer function as the built-in peer;
3. drafts `flopwatch new` wrote for kernels as a collection ships them (tests/new_kernels/cuda:
   a header-only template softmax and a tiled SGEMM, launched from a runner), run unedited;
4. optionally (`--collection PATH`), a public collection onboarded with `flopwatch init` (a
   checkout of siboehm/SGEMM_CUDA, say).

The repository under test declares no peer anywhere, so every correct row must carry a % of the
built-in peer; the script says whether it does. Full outputs (JSON, site, logs) go to OUT
(default ./gpu-verify-ops); a short table comes last.

    python3 benchmarks/verify_ops_gpu.py [--budget 1] [--collection PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(os.environ.get("OUT", ROOT / "gpu-verify-ops"))
BUNDLED = ("attention/cuda_rows", "attention/cuda_rows_causal", "attention/triton_flash",
           "attention/triton_flash_causal", "softmax/cuda_rows", "softmax/triton_fused")
CONFIG = """\
kernels = ["kernels", "flopwatch"]
include_dirs = ["kernels/include"]
[shape_sets]
attention_gpu = [[4, 16, 1024, 64], [2, 16, 4096, 64]]
softmax_gpu = [[4096, 4096], [16384, 1024]]
"""


def cli(repo: Path, *args: str, log: str, out: Path | None = None, label: str = "") -> subprocess.CompletedProcess:
    """`flopwatch ARGS` in `repo`, its output kept as `out/log`: the progress stream (stderr) is
    written there as it comes, so a call stopped at its time limit still shows how far it got
    (the other GPU verification scripts use this too)."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    path = (out or OUT).joinpath(log)
    t0 = time.time()
    with path.open("w") as progress, tempfile.TemporaryFile("w+") as stdout:
        progress.write(f"$ flopwatch {' '.join(args)}\n")
        progress.flush()
        proc = subprocess.run([sys.executable, "-m", "pipeline.cli", *args], cwd=repo, stdout=stdout,
                              stderr=progress, text=True, env=env, check=False)
        stdout.seek(0)
        proc.stdout, proc.stderr = stdout.read(), ""
        progress.write(f"\n{proc.stdout}")
    print(f"{label}$ flopwatch {' '.join(args)}  (exit {proc.returncode}, {time.time() - t0:.0f} s)", flush=True)
    return proc


def git_commit(repo: Path, message: str) -> None:
    """Commit everything in `repo` (a repository made for the verification), creating it first."""
    first = [] if (repo / ".git").exists() else [["init", "-q", "-b", "main"]]
    for cmd in (*first, ["add", "-A"],
                ["-c", "user.name=verify", "-c", "user.email=verify@example.com", "commit", "-qm", message,
                 "--allow-empty"]):
        subprocess.run(["git", *cmd], cwd=repo, check=True)


def build_repo(repo: Path) -> None:
    """The bundled attention/softmax GPU variants, the repository op and the collection-style
    kernels, with no peer declared anywhere."""
    for rel in BUNDLED:
        shutil.copytree(ROOT / "kernels" / rel, repo / "kernels" / rel)
    shutil.copytree(ROOT / "kernels" / "include", repo / "kernels" / "include")
    shutil.copytree(ROOT / "tests" / "repo_ops" / "kernels" / "rmsnorm", repo / "kernels" / "rmsnorm")
    shutil.copytree(ROOT / "tests" / "new_kernels" / "cuda", repo / "collection")
    (repo / "flopwatch.toml").write_text(CONFIG)


def run(repo: Path, name: str, budget: float) -> dict:
    proc = cli(repo, "run", "--json", "--no-peer-check", "--budget", str(budget), "--db", str(OUT / f"{name}.db"),
               "--site", str(OUT / f"{name}-site"), log=f"{name}-run.log")
    if not proc.stdout.strip():
        print(proc.stderr[-3000:])
        raise SystemExit(f"flopwatch printed no summary for {name}")
    summary = json.loads(proc.stdout)
    (OUT / f"{name}.json").write_text(json.dumps(summary, indent=1))
    return summary


def table(title: str, summary: dict) -> bool:
    rows = [r for r in summary["results"] if (r.get("device") or "").startswith("cuda")]
    print(f"\n{title}\n{'variant':34} {'op':17} {'shape':20} {'dtype':5} {'status':12} {'throughput':>13} "
          f"{'% peer':>7} {'rel err':>8}")
    complete = True
    for r in sorted(rows, key=lambda r: (r["op"], r["shape"], not r["peer"], -(r.get("rate") or 0))):
        rate = r.get("rate")
        shown = "" if not rate else (f"{rate / 1e12:.2f} TFLOP/s" if r.get("flops") else f"{rate / 1e9:.0f} GB/s")
        pct = f"{r['pct_of_peer']:.1f}%" if r.get("pct_of_peer") else ""
        err = (r.get("correctness") or {}).get("rel_fro_err")
        name = r["variant"] + (" (built-in)" if r.get("backend") == "builtin" else "")
        err_text = "" if not isinstance(err, (int, float)) else f"{err:.1e}"
        print(f"{name[:34]:34} {r['op'][:17]:17} {r['shape'][:20]:20} {r['dtype']:5} {r['status']:12} {shown:>13} "
              f"{pct:>7} {err_text:>8}")
        if r["status"] != "ok":
            print(f"    {r['diagnostic'][:240]}")
        elif not r["peer"] and not r.get("pct_of_peer"):
            complete = False
    print(f"every correct row has a % of peer: {'yes' if complete else 'NO'}")
    return complete


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=1.0, help="timing budget per job, seconds")
    parser.add_argument("--collection", help="a kernel collection checkout to onboard with flopwatch init")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    repo = OUT / "repo"
    if repo.exists():
        shutil.rmtree(repo)
    build_repo(repo)
    git_commit(repo, "ops and kernels without a peer")
    drafted = cli(repo, "new", "collection/row_ops.cuh", "--json", log="new.log")
    drafts = json.loads(drafted.stdout)["drafts"] if drafted.stdout.strip() else []
    git_commit(repo, "drafts of flopwatch new, unedited")
    summaries = {"ops": run(repo, "ops", args.budget)}
    if args.collection:
        coll = OUT / "collection"
        if coll.exists():
            shutil.rmtree(coll)
        shutil.copytree(args.collection, coll, ignore=shutil.ignore_patterns(".git"))
        git_commit(coll, "collection")
        init = cli(coll, "init", "--json", "--no-workflow", log="collection-init.log")
        (OUT / "collection-init.json").write_text(init.stdout)
        git_commit(coll, "drafts of flopwatch init, unedited")
        summaries["collection"] = run(coll, "collection", args.budget)
    print("\nflopwatch new drafts: " + ", ".join(f"{d['variant']} ({d['op']}, {d['state']})" for d in drafts))
    ok = table("bundled ops, a repository op, flopwatch new drafts (built-in peers only)", summaries["ops"])
    if "collection" in summaries:
        ok = table(f"collection {args.collection} onboarded with flopwatch init", summaries["collection"]) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
