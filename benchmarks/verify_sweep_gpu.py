"""Parameter axes on a GPU, as a user runs them: the bundled suite with its swept variants
(cuda_tiled_swept, triton_swept) timed at every point, at default settings.

    python3 benchmarks/verify_sweep_gpu.py                  # every step
    python3 benchmarks/verify_sweep_gpu.py --steps runs     # some of them (runs, compare, bisect, best)

The suite is copied into a fresh git repository under OUT (default ./sweep-out) with commits
  A  the bundled suite                 B  A plus a README edit
  C  B with one point's code path slowed: cuda_tiled_swept launches its kernel twice at
     TILE=64, BK=16 only (every point's source changes; only that point's binary does)
  D  C plus a README edit
and a second repository, the suite without its swept variants. One build cache serves both.

  runs     `run A` cold (nothing built), `run A` (builds cached) and the suite without its
           swept variants (builds cached): command walls and nvidia-smi utilization; each
           point's TFLOP/s and status, the best point per shape
  compare  `compare B C`: which series are slower (expected: that one point, and only it)
  bisect   `bisect --good A --bad D --variant 'cuda_tiled_swept[TILE=64,BK=16]'`: names C
  best     `run D --points best` on the store of the runs: one point per swept variant timed
  pairs    `compare C D --all` on the TILE=256 points (one binary against itself), the paired
           timing's sides on buffers of their own, then on one set of buffers

Everything goes under OUT: each command's JSON and stderr, and summary.json; the summary is
printed last.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import throughput  # noqa: E402  (benchmarks/throughput.py: the command runner and its figures)

from workers.core.params import split_point  # noqa: E402

ROOT = throughput.ROOT
OUT = throughput.OUT = Path(throughput.os.environ.get("OUT", ROOT / "sweep-out"))
SWEPT = ("cuda_tiled_swept", "triton_swept", "hip_tiled_swept")
PLANTED_POINT = "cuda_tiled_swept[TILE=64,BK=16]"
LAUNCH = "  if (vec)\n    gemm_tiled_swept_kernel<true>"
SLOWED = ("  for (int rep = 0; rep < ((TILE == 64 && BK == 16) ? 2 : 1); ++rep)\n"
          "  if (vec)\n    gemm_tiled_swept_kernel<true>")


def suite_repos() -> tuple[Path, Path, dict[str, str]]:
    git = throughput.git
    repo, plain = OUT / "suite", OUT / "suite_plain"
    for path in (repo, plain):
        if path.exists():
            shutil.rmtree(path)
    repo.mkdir(parents=True)
    for name in ("kernels", "flopwatch.toml"):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, repo / name)
    (repo / ".gitignore").write_text(".flopwatch/\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "bundled suite")
    shas = {"A": git(repo, "rev-parse", "HEAD")}
    shutil.copytree(repo, plain, ignore=shutil.ignore_patterns(".git"))
    for name in SWEPT:
        shutil.rmtree(plain / "kernels" / "gemm" / name)
    git(plain, "init", "-q", "-b", "main")
    git(plain, "add", "-A")
    git(plain, "commit", "-qm", "bundled suite without its swept variants")
    (repo / "README.md").write_text("# kernels\n\nNotes only.\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "docs: a README")
    shas["B"] = git(repo, "rev-parse", "HEAD")
    source = repo / "kernels" / "gemm" / "cuda_tiled_swept" / "gemm_tiled_swept.cu"
    text = source.read_text()
    assert LAUNCH in text, "cuda_tiled_swept's launch changed: update LAUNCH"
    source.write_text(text.replace(LAUNCH, SLOWED, 1))
    git(repo, "commit", "-qam", "cuda_tiled_swept: launch twice at TILE=64, BK=16")
    shas["C"] = git(repo, "rev-parse", "HEAD")
    (repo / "README.md").write_text("# kernels\n\nNotes only, again.\n")
    git(repo, "commit", "-qam", "docs: README")
    shas["D"] = git(repo, "rev-parse", "HEAD")
    (OUT / "shas.json").write_text(json.dumps(shas))
    return repo, plain, shas


def points_table(results: list[dict]) -> dict:
    """Per swept variant and shape: every point's status and TFLOP/s, and the best point."""
    table: dict[str, dict] = {}
    for r in results:
        family, params = split_point(r["variant"])
        if not params or r.get("peer"):
            continue
        rate = (r["flops"] / r["median_s"] / 1e12) if r.get("status") == "ok" and r.get("median_s") else None
        cell = table.setdefault(family, {}).setdefault(r["shape"], {"points": {}})
        cell["points"][r["variant"]] = {"status": r["status"], "tflops": round(rate, 1) if rate else None,
                                        "why": (r.get("diagnostic") or "")[:160] if r["status"] != "ok" else ""}
    for shapes in table.values():
        for cell in shapes.values():
            measured = {k: v["tflops"] for k, v in cell["points"].items() if v["tflops"]}
            if measured:
                best = max(measured, key=measured.get)
                cell["best"] = {"point": best, "tflops": measured[best]}
    return table


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", default="runs,compare,bisect,best", help="runs, pairs, compare, bisect, best")
    args = p.parse_args()
    steps = args.steps.split(",")
    OUT.mkdir(parents=True, exist_ok=True)
    repo, plain, shas = suite_repos()
    cache = str(OUT / "cache")
    db, summary = OUT / "suite.db", {"shas": shas}
    run = throughput.flopwatch

    def figures(s: dict, store: Path) -> dict:
        f = throughput.figures(s, store, "cuda", 1)
        return {k: f[k] for k in ("command_wall_s", "jobs_wall_s", "results", "device_results", "util_command",
                                  "util_jobs", "driver", "exit")}

    if "runs" in steps:
        cold = run(repo, "run_cold", db, "cuda", "run", shas["A"], "--cache", cache)
        warm = run(repo, "run_warm", db, "cuda", "run", shas["A"], "--cache", cache)
        bare = run(plain, "run_without_swept", OUT / "plain.db", "cuda", "run", "--cache", cache)
        summary["runs"] = {"cold": figures(cold, db), "warm": figures(warm, db),
                           "without_swept": figures(bare, OUT / "plain.db")}
        summary["points"] = points_table(warm["results"])
    if "compare" in steps:
        cmp = run(repo, "compare_BC", OUT / "compare.db", "cuda", "compare", shas["B"], shas["C"], "--cache", cache)
        summary["compare"] = {"exit": cmp["exit"], "command_wall_s": cmp["command_wall_s"],
                              "kinds": {r["variant"] + " " + r["shape"]: r["kind"] for r in cmp["rows"]
                                        if split_point(r["variant"])[1]},
                              "slower": sorted({r["variant"] + " " + r["shape"] for r in cmp["rows"]
                                                if r["kind"] == "slower"}),
                              "faster": sorted({r["variant"] + " " + r["shape"] for r in cmp["rows"]
                                                if r["kind"] == "faster"}),
                              "unsure": {r["variant"] + " " + r["shape"]: (r.get("comparison") or {}).get("reason")
                                         for r in cmp["rows"] if r["kind"] == "unsure"}}
    if "pairs" in steps:
        # One binary against itself (C and D build the same), the TILE=256 points that spill:
        # each side of the paired timing on buffers of its own, then on one set of buffers.
        same = {}
        for label, shared in (("own_buffers", "0"), ("shared_buffers", "1")):
            s = run(repo, f"compare_CD_{label}", OUT / f"pairs_{label}.db", "cuda", "compare", shas["C"], shas["D"],
                    "--all", "--variant", "cuda_tiled_swept[TILE=256]", "--cache", cache, "--no-ray-reuse",
                    "--no-report", env_extra={"FLOPWATCH_PAIR_SHARED_BUFFERS": shared})
            same[label] = {r["variant"] + " " + r["shape"]: [r["kind"], round((r.get("comparison") or {}).get(
                "change") or 0.0, 4), (r.get("head") or {}).get("order_ratios"), (r.get("comparison") or {}).get(
                "reason")] for r in s["rows"] if r["variant"].startswith("cuda_tiled_swept")}
        summary["pairs_same_binary"] = same
    if "bisect" in steps:
        bis = run(repo, "bisect_point", OUT / "bisect.db", "cuda", "bisect", "--good", shas["A"], "--bad", shas["D"],
                  "--variant", PLANTED_POINT, "--cache", cache, "--no-report")
        outcome = bis["outcome"]
        summary["bisect"] = {"exit": bis["exit"], "command_wall_s": bis["command_wall_s"],
                             "first_bad_is_C": outcome.get("first_bad") == shas["C"],
                             "evaluations": outcome.get("evaluations"), "message": outcome.get("message"),
                             "culprit": (bis.get("culprit") or {}).get("subject")}
    if "best" in steps:
        best = run(repo, "run_points_best", db, "cuda", "run", shas["D"], "--cache", cache, "--points", "best")
        timed = sorted({r["variant"] for r in best["results"] if split_point(r["variant"])[1]})
        summary["points_best"] = {**figures(best, db), "swept_points_timed": timed}
    (OUT / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    print(json.dumps(summary, indent=1, default=str))


if __name__ == "__main__":
    main()
