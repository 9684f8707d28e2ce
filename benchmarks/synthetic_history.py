"""A year of nightly history, synthetic but stored exactly as `flopwatch run` stores it.

    python3 benchmarks/synthetic_history.py OUT [--commits 365] [--variants 25] [--shapes 4]

writes OUT/repo (a git repository with one commit per night, first-parent line) and
OUT/repo/.flopwatch/results.db (one run per commit, one result per variant × shape, written
through `pipeline.store.Store`). So `flopwatch report --repo OUT/repo` and `flopwatch detect
--repo OUT/repo` work on it as on a real history. What it holds:

- 25 variants × 4 shapes on one AMD MI300X: 20 GEMM variants (TFLOP/s, `torch_ref` the peer)
  and 5 copy variants (GB/s, `torch_copy` the peer); run times with 1% noise per sample and a
  night-to-night wobble of ±0.3%, occasional single-night spikes of +4% (a busy node);
- resources (VGPR, LDS, ...) and counters (vL1D hit, coalescing, waves/CU, MFMA) per result;
- two planted slowdowns (`PLANTS`): 8% in one GEMM series and 4% in one copy series, from a
  given commit on, with the 8% one also raising VGPRs (so a resource panel steps with it);
- one variant that fails to build from the last night on and one whose output is wrong on the
  last night (tile heatmap), for the "failing" part of the dashboard.

The planted steps are the ground truth of `tests/test_dashboard_planted.py` and of the
`report + detect` figure in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.store import Store
from workers.records import Result

DEVICE = "rocm:AMD Instinct MI300X"
GEMM_SHAPES = ((1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192))
COPY_SHAPES = (1 << 22, 1 << 24, 1 << 26, 1 << 28)
SAMPLES = 20


@dataclass(frozen=True)
class Plant:
    """Series (variant, shape index) slower by `slowdown` (run time × (1 + slowdown)) from
    commit index `at` on; `vgprs` > 0 also raises the kernel's VGPR count there."""

    variant: str
    shape: int
    at: int
    slowdown: float
    subject: str
    vgprs: int = 0


def plants(commits: int, shapes: int = 4) -> tuple[Plant, Plant]:
    """The two planted slowdowns (throughput −8% and −4%), placed relative to the history's length."""
    return (Plant("hip_mfma_tiled", min(2, shapes - 1), int(commits * 0.55), 0.08 / 0.92, "Unroll the K loop twice",
                  vgprs=32),
            Plant("hip_copy_vec4", min(1, shapes - 1), int(commits * 0.8), 0.04 / 0.96, "Use non-temporal stores"))


def variant_names(n: int) -> tuple[list[str], list[str]]:
    """(gemm variants, copy variants): a fifth of them copies, peers first."""
    n_copy = max(1, n // 5)
    copies = ["torch_copy", "hip_copy_vec4"] + [f"hip_copy_v{i}" for i in range(n_copy - 2)]
    gemms = ["torch_ref", "hip_mfma_tiled", "hip_naive", "hip_broken", "hip_wrong_tile"] + \
        [f"hip_gemm_v{i:02d}" for i in range(n - n_copy - 5)]
    return gemms[: n - n_copy], copies[:n_copy]


def make_repo(path: Path, commits: int, start: dt.date, plant_list) -> list[dict]:
    """A first-parent line of `commits` nightly commits (git fast-import: seconds, not minutes)."""
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    subjects = {p.at: p.subject for p in plant_list}
    stream, meta = [], []
    for i in range(commits):
        day = start + dt.timedelta(days=i)
        when = int(dt.datetime(day.year, day.month, day.day, 22, 0, tzinfo=dt.UTC).timestamp())
        author = ("Ada Lovelace", "ada@example.com") if i % 3 else ("Grace Hopper", "grace@example.com")
        subject = subjects.get(i, f"Nightly change {i}: tune kernel parameters")
        body = f"note {i}\n"
        stream.append(f"commit refs/heads/main\nmark :{i + 1}\nauthor {author[0]} <{author[1]}> {when} +0000\n"
                      f"committer {author[0]} <{author[1]}> {when} +0000\ndata {len(subject.encode())}\n{subject}\n"
                      + (f"from :{i}\n" if i else "")
                      + f"M 644 inline NOTES.md\ndata {len(body.encode())}\n{body}\n")
        meta.append({"subject": subject, "author": f"{author[0]} <{author[1]}>",
                     "authored_at": dt.datetime.fromtimestamp(when, dt.UTC).isoformat()})
    subprocess.run(["git", "-C", str(path), "fast-import", "--quiet"], input="".join(stream).encode(), check=True)
    subprocess.run(["git", "-C", str(path), "checkout", "-q", "main"], check=True)
    (path / ".gitignore").write_text(".flopwatch/\n")
    shas = subprocess.run(["git", "-C", str(path), "rev-list", "--first-parent", "--reverse", "main"],
                          check=True, capture_output=True, text=True).stdout.split()
    return [dict(m, sha=s) for m, s in zip(meta, shas)]


def _base_time(variant: str, shape_index: int, copy: bool, rng: np.random.Generator) -> tuple[float, float, float]:
    """(seconds, flops, bytes) of one series: peers fastest, the others a spread below them."""
    if copy:
        n = COPY_SHAPES[shape_index]
        moved = 2.0 * 4 * n
        speed = 4.0e12 if variant == "torch_copy" else rng.uniform(1.5e12, 3.6e12)
        return moved / speed, 0.0, moved
    m, n, k = GEMM_SHAPES[shape_index]
    flops = 2.0 * m * n * k
    speed = 6.5e14 if variant == "torch_ref" else rng.uniform(2e12, 3.5e14)
    return flops / speed, flops, 0.0


def _resources(variant: str, extra_vgprs: int, copy: bool) -> dict:
    vgprs = (32 if copy else 128) + extra_vgprs
    lds = 0 if copy else 65536
    kernel = {"arch": "gfx942", "vgprs": vgprs, "agprs": 0 if copy else 64, "sgprs": 48, "lds_bytes": lds,
              "scratch_bytes": 0, "vgpr_spill": 0, "waves_per_simd": 8 if vgprs <= 128 else 4,
              "mfma_insts": 0 if copy else 4096}
    return {"vendor": "amd", "kernels": {variant: kernel}}


def _counters(copy: bool, rng: np.random.Generator, extra_vgprs: int, mfma: float) -> dict:
    """Counters as the profile stage stores them: flopwatch short names, raw floats."""
    return {"l1_hit_pct": float(rng.uniform(45, 55) if not copy else rng.uniform(0, 2)),
            "coalescing_pct": 100.0 if copy else 75.0,
            "l2_hit_pct": float(rng.uniform(60, 90)),
            "waves_per_cu": float((8.0 if not extra_vgprs else 4.0) + rng.uniform(-0.05, 0.05)),
            "mfma_insts": mfma, "lds_bank_conflict_pct": float(rng.uniform(0, 3)),
            "kernel_names": ["gemm_kernel" if not copy else "copy_kernel"]}


def write_history(out: Path, commits: int = 365, variants: int = 25, shapes: int = 4, seed: int = 0) -> dict:
    """Write the repository and the store; returns what was planted (for tests and benchmarks)."""
    rng = np.random.default_rng(seed)
    plant_list = plants(commits, shapes)
    repo = out / "repo"
    meta = make_repo(repo, commits, dt.date(2025, 11, 1), plant_list)
    gemms, copies = variant_names(variants)
    series = [(v, s, v in copies) for v in gemms + copies for s in range(shapes)]
    base = {(v, s): _base_time(v, s, c, rng) for v, s, c in series}
    wobble = {key: rng.normal(0, 0.003, commits) for key in base}
    spikes = {key: set(rng.choice(commits, 3, replace=False).tolist()) for key in base}
    last = commits - 1
    with Store(repo / ".flopwatch" / "results.db") as store:
        for i, c in enumerate(meta):
            store.record_commit(c["sha"], c["subject"], c["author"], c["authored_at"], [])
            run = store.start_run(c["sha"], False, "nightly", str(repo), "synthetic", "synthetic_history")
            for v, s, copy in series:
                seconds, flops, moved = base[(v, s)]
                extra = 0
                for p in plant_list:
                    if p.variant == v and p.shape == s and i >= p.at:
                        seconds *= 1 + p.slowdown
                        extra = p.vgprs
                seconds *= 1 + wobble[(v, s)][i] + (0.04 if i in spikes[(v, s)] and i != last else 0.0)
                samples = tuple(float(x) for x in seconds * (1 + 0.01 * rng.standard_normal(SAMPLES)))
                shape_key = (f"n={COPY_SHAPES[s]}" if copy else
                             "M={},N={},K={}".format(*GEMM_SHAPES[s]))
                common = {"variant": v, "op": "copy" if copy else "gemm", "backend": "torch" if v.startswith("torch")
                          else "hip", "shape": shape_key, "dtype": "fp32" if copy else "bf16", "device": DEVICE,
                          "build_hash": f"{v}-{i}", "peer": v in ("torch_ref", "torch_copy"),
                          "flops": flops, "bytes_moved": moved}
                if v == "hip_broken" and i == last:
                    r = Result(**common, status="build_failed", diagnostic="gemm.hip:41:9: error: use of "
                               "undeclared identifier 'tile_k'", stderr_tail="gemm.hip:41:9: error: use of "
                               "undeclared identifier 'tile_k'\n1 error generated.")
                elif v == "hip_wrong_tile" and i == last:
                    tiles = [[(0.002 if (r_ + c_) % 5 else 3.5) for c_ in range(8)] for r_ in range(8)]
                    tiles[7][7] = "inf"
                    r = Result(**common, status="incorrect", diagnostic="8 of 64 tiles over tolerance; "
                               "1 tile never written (rows 448+, cols 448+)",
                               correctness={"rel_fro_err": 0.0213, "tile": 64, "tile_map": tiles, "passed": False})
                else:
                    mfma = 0.0 if copy else float(flops / 16384)
                    r = Result(**common, status="ok", median_s=float(np.median(samples)),
                               ci_low_s=min(samples), ci_high_s=max(samples), samples_s=samples,
                               correctness={"rel_fro_err": float(rng.uniform(1e-7, 4e-7)), "passed": True},
                               resources=_resources(v, extra, copy), counters=_counters(copy, rng, extra, mfma))
                store.record_result(run, c["sha"], False, r)
            store.finish_run(run)
    def key(v, s, copy):
        return (v, f"n={COPY_SHAPES[s]}" if copy else "M={},N={},K={}".format(*GEMM_SHAPES[s]))

    return {"repo": str(repo), "shas": [c["sha"] for c in meta],
            "spikes": {"|".join(key(v, s, c)): sorted(i for i in spikes[(v, s)] if i != last) for v, s, c in series},
            "plants": [{"variant": p.variant, "shape": (f"n={COPY_SHAPES[p.shape]}" if p.variant in copies else
                                                       "M={},N={},K={}".format(*GEMM_SHAPES[p.shape])),
                        "dtype": "fp32" if p.variant in copies else "bf16", "device": DEVICE,
                        "good_sha": meta[p.at - 1]["sha"], "bad_sha": meta[p.at]["sha"],
                        "change": -(1 - 1 / (1 + p.slowdown))} for p in plant_list]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="folder to create (repo/ and repo/.flopwatch/results.db inside)")
    ap.add_argument("--commits", type=int, default=365)
    ap.add_argument("--variants", type=int, default=25)
    ap.add_argument("--shapes", type=int, default=4, choices=range(1, 5))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.variants < 10:
        ap.error("--variants: at least 10 (two copy variants, peers, the planted and the failing ones)")
    if args.commits < 20:
        ap.error("--commits: at least 20 (the planted steps need segments on both sides)")
    if (args.out / "repo").exists():
        ap.error(f"{args.out / 'repo'} exists; give a new folder")
    t0 = time.perf_counter()
    planted = write_history(args.out, args.commits, args.variants, args.shapes, args.seed)
    print(f"{args.commits} commits × {args.variants * args.shapes} series in {time.perf_counter() - t0:.1f} s: "
          f"{planted['repo']}")
    for p in planted["plants"]:
        print(f"planted {p['change']:+.1%} {p['variant']} {p['shape']} at {p['bad_sha'][:10]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
