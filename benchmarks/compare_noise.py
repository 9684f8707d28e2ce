"""False-alarm and detection rates of `flopwatch compare` on this machine's CPU.

Builds a throw-away git repository with one CPU GEMM variant (256³ fp32) and three commits:
  base     the kernel;
  same     only README changes (same sources, same build): comparing it with base is comparing
           a commit with itself, so every `slower`/`faster` verdict is a false alarm;
  planted  the kernel recomputes ~5% of the rows of C into a scratch row (extra work that
           cannot be optimised away and does not change the result): a planted small slowdown.
Each trial measures as `flopwatch compare` does: a run of each commit, then paired timing
(both builds alternated sample by sample in one child process) of base against `same` and of
base against `planted`, decided by `pipeline.history.compare.compare_rounds`. The measured size of the
planted slowdown is reported next to the detection rate.

    python3 benchmarks/compare_noise.py --count 50 --pair-budget 2 --out noise.json

With --device cuda the same two rates are measured on one NVIDIA GPU, on the suite's own GPU
kernels (`benchmarks/gpu_noise.py`): false alarms of each of the fastest and the slowest series
compared with itself, and detections of a ~1% spin planted before two CUDA GEMMs. Without a
CUDA device that mode refuses with exit status 2.

    python3 benchmarks/compare_noise.py --device cuda --count 20 --threshold 1% --out "$OUT"
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import git
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.fleet import cluster
from pipeline.history import compare as cmp
from pipeline.history import paired, verdicts
from pipeline.run.progress import Progress
from pipeline.run.runflow import RunOptions, Session, run_commit
from pipeline.store import Store

KERNEL = Path(__file__).resolve().parents[1] / "kernels" / "gemm" / "cpp_blocked" / "gemm_blocked.cpp"
# Per mille of the rows of C computed a second time in the planted commit (81 of 256 rows),
# calibrated so that the measured slowdown is about 5% (the extra rows reuse cached panels).
EXTRA_PER_MILLE = 320
PLANT_DECL = "extern \"C\" void gemm_blocked("
PLANT = """static volatile float flopwatch_sink;
static void extra_rows(const float* A, const float* panel, int M, int K, int k0, int kb) {
    // The planted slowdown: recompute a few rows into a scratch row; the sink keeps it alive.
    float acc[BN] = {0.0f};
    for (int i = 0; i < (M * EXTRA_PER_MILLE) / 1000; ++i) {
        const float* a = A + (long)i * K + k0;
        for (int k = 0; k < kb; ++k)
            for (int j = 0; j < BN; ++j) acc[j] += a[k] * panel[(std::size_t)k * BN + j];
    }
    flopwatch_sink = acc[0];
}

""".replace("EXTRA_PER_MILLE", str(EXTRA_PER_MILLE))
PLANT_CALL_AFTER = "for (int i = 0; i < M; ++i) {\n                float acc[BN]"


def make_repo(root: Path) -> dict[str, str]:
    """The three-commit repository; returns {"base", "same", "planted"} → SHA."""
    repo = git.Repo.init(root, initial_branch="main")
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "Noise Bench")
        cw.set_value("user", "email", "noise@example.com")
    folder = root / "kernels" / "gemm" / "blocked"
    folder.mkdir(parents=True)
    (root / "flopwatch.toml").write_text('kernels = ["kernels"]\n\n[shape_sets]\nsmall = [[256, 256, 256]]\n')
    (folder / "variant.toml").write_text(
        'name = "blocked"\nop = "gemm"\nbackend = "cpp"\nsources = ["gemm_blocked.cpp"]\nlayout = "nt"\n'
        'dtypes = ["fp32"]\nshapes = "small"\n\n[binding]\nkind = "c"\nentry = "gemm_blocked"\n\n'
        '[build]\nflags = ["-O3"]\n')
    source = KERNEL.read_text()
    planted = source.replace(PLANT_DECL, PLANT + PLANT_DECL).replace(
        PLANT_CALL_AFTER, "extra_rows(A, panel.data(), M, K, k0, kb);\n            " + PLANT_CALL_AFTER)
    assert planted != source and "extra_rows(A" in planted, "kernel text changed; update the plant"
    shas = {}
    for name, text, readme in (("base", source, "one"), ("same", source, "two"), ("planted", planted, "two")):
        (folder / "gemm_blocked.cpp").write_text(text)
        (root / "README.md").write_text(f"noise benchmark {readme}\n")
        repo.index.add(["flopwatch.toml", "README.md", str(folder / "variant.toml"), str(folder / "gemm_blocked.cpp")])
        shas[name] = repo.index.commit(name).hexsha
    return shas


def trial(session: Session, repo, shas: dict, options: RunOptions, pair_budget: float) -> dict[str, tuple]:
    """One compare's worth of measurement, as `flopwatch compare` does it: a run of each commit
    (status, correctness, builds), then paired timing of base against `same` and base against
    `planted` (both builds alternated sample by sample in one process). Returns
    {"same": (base Side, same Side), "planted": (base Side, planted Side)}."""
    outcomes = {name: run_commit(session, repo, sha, options) for name, sha in shas.items()}
    got = {}
    for name in ("same", "planted"):
        pairs = paired.paired_samples(session, outcomes["base"], outcomes[name], {"timing": {"budget_s": pair_budget}})
        (base_samples, head_samples), = pairs.values()
        got[name] = (cmp.Side("ok", base_samples, paired=True), cmp.Side("ok", head_samples, paired=True))
    return got


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--device" in argv or any(a.startswith("--device=") for a in argv):
        from benchmarks import gpu_noise

        return gpu_noise.main(argv)
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--count", type=int, default=50, help="trials (default 50)")
    p.add_argument("--budget", type=float, default=0.5, help="timing budget of each commit's run (compare's default 0.5 s)")
    p.add_argument("--pair-budget", type=float, default=2.0, help="paired timing budget (compare's default 2 s)")
    p.add_argument("--threshold", default="3%")
    p.add_argument("--out", default="compare_noise.json", help="results (rewritten after every trial)")
    args = p.parse_args(argv)
    threshold = verdicts.parse_threshold(args.threshold)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    work = Path(tempfile.mkdtemp(prefix="flopwatch-noise-"))
    shas = make_repo(work / "repo")
    repo = git.Repo(work / "repo")
    info = cluster.connect(None)
    session = Session(Store(work / "results.db"), work / ".flopwatch", info, Progress(enabled=False))
    options = RunOptions(budget_s=args.budget, command="noise")
    outcomes = {"same": [], "planted": []}
    pooled = {k: [] for k in shas}
    started = time.time()
    loads = []
    meta = {"machine": f"{platform.node()} ({os.cpu_count()} cores, {platform.processor() or platform.machine()})",
            "date": dt.date.today().isoformat(), "command": " ".join(["python3", *sys.argv]),
            "threshold": threshold, "budget_s": args.budget, "pair_budget_s": args.pair_budget,
            "extra_rows_per_mille": EXTRA_PER_MILLE}
    try:
        for t in range(args.count):
            got = trial(session, repo, shas, options, args.pair_budget)
            loads.append(os.getloadavg()[0])
            pooled["base"].append(float(np.median(got["planted"][0].samples)))
            for name in ("same", "planted"):
                pooled[name].append(float(np.median(got[name][1].samples)))
            for name in ("same", "planted"):  # exactly what `flopwatch compare` decides
                c = cmp.compare_rounds(*got[name], threshold)
                outcomes[name].append({"verdict": c.verdict, "change": c.change, "n": [c.n_base, c.n_head]})
            summary = summarise(outcomes, pooled)
            Path(args.out).write_text(json.dumps({**meta, "trials": t + 1, "elapsed_s": time.time() - started,
                                                  "load_avg_1min": loads,
                                                  **summary, "verdicts": outcomes}, indent=1))
            print(f"trial {t + 1}/{args.count}: same {outcomes['same'][-1]['verdict']} "
                  f"({outcomes['same'][-1]['change']:+.2%}), planted {outcomes['planted'][-1]['verdict']} "
                  f"({outcomes['planted'][-1]['change']:+.2%})", flush=True)
    finally:
        cluster.shutdown(info)
    print(json.dumps(summarise(outcomes, pooled), indent=1))
    return 0


def summarise(outcomes: dict, medians: dict) -> dict:
    """Rates with their counts; the planted slowdown as the median of per-trial throughput changes."""
    def rate(name, kinds):
        hits = sum(v["verdict"] in kinds for v in outcomes[name])
        return {"hits": hits, "of": len(outcomes[name]), "rate": hits / max(len(outcomes[name]), 1)}

    per_trial = [b / p - 1 for b, p in zip(medians["base"], medians["planted"])]
    return {"false_alarm": rate("same", (cmp.verdicts.SLOWER, cmp.verdicts.FASTER)),
            "same_unsure": rate("same", (verdicts.UNSURE,)),
            "detected": rate("planted", (verdicts.SLOWER,)),
            "planted_unsure": rate("planted", (verdicts.UNSURE,)),
            "planted_throughput_change_median": float(np.median(per_trial)) if per_trial else None}


if __name__ == "__main__":
    sys.exit(main())
