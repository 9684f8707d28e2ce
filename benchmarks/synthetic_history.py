"""Nightly history, synthetic but stored exactly as `flopwatch run` stores it: a year of one GPU,
or three years of a fleet.

    python3 benchmarks/synthetic_history.py OUT [--commits 365] [--variants 25] [--shapes 4] [--devices 1]
    python3 benchmarks/synthetic_history.py OUT --fleet      # 1,095 commits × 4 devices × 50 variants × 5 shapes

writes OUT/repo (a git repository with one commit per night, first-parent line) and
OUT/repo/.flopwatch/results.db (one run per commit, one result per device × variant × shape,
written through `pipeline.store.Store`). So `flopwatch report --repo OUT/repo` and `flopwatch
detect --repo OUT/repo` work on it as on a real history. What it holds:

- variants × shapes on each device (the year: 25 × 4 on one AMD MI300X = 100 series; the
  fleet: 50 × 5 on an MI300X, an MI325X, an H100 and an H200 = 1,000 series): four fifths GEMM
  variants (TFLOP/s, `torch_ref` the peer), one fifth copy variants (GB/s, `torch_copy` the
  peer); on NVIDIA devices the `hip_` variants are called `cuda_`;
- run times with per-sample noise and a night-to-night wobble, and three single-night spikes
  per series (a busy node): 1%, ±0.3% and +4% on AMD devices, 0.5%, ±0.1% and +1.5% on NVIDIA
  ones (whose default history threshold is 1%, not 5%: pipeline/project/config.py);
- resources (VGPR, LDS, ...) and counters (vL1D hit, coalescing, waves/CU, MFMA) per result;
- planted slowdowns (`plants`): each is one culprit commit that slows several series from
  that commit on, as a change to a shared header would (the year: 2 commits, 5 series; the
  fleet: 4 commits, 13 series, one of them 12 nights before the end); the first also raises
  VGPRs, so a resource panel steps with it;
- one variant that fails to build from the last night on and one whose output is wrong on the
  last night (tile heatmap), for the "failing" part of the dashboard.

Every night draws from its own seeded generator, so `record_nights` can add a night later
(the incremental nightly of benchmarks/site_scale.py) and get what a longer history would
have held. The planted steps are the ground truth of `tests/test_dashboard_planted.py` and of
the report + detect figures in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.store import Store
from reports.device_specs import spec_of
from workers.core.records import Result
from workers.measure.stats import median_ci

DEVICES = ("rocm:AMD Instinct MI300X", "rocm:AMD Instinct MI325X", "cuda:NVIDIA H100 80GB HBM3",
           "cuda:NVIDIA H200")
GEMM_SHAPES = ((1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192),
               (16384, 16384, 16384))
COPY_SHAPES = (1 << 22, 1 << 24, 1 << 26, 1 << 28, 1 << 30)
SAMPLES = 20
# (per-sample noise, night-to-night wobble, busy-night spike) per device kind
NOISE = {"rocm": (0.01, 0.003, 0.04), "cuda": (0.005, 0.001, 0.015)}
FLEET = {"commits": 1095, "variants": 50, "shapes": 5, "devices": 4}


@dataclass(frozen=True)
class Plant:
    """One culprit commit (index `at`, its `subject`): from it on, each (variant, shape index,
    throughput change) of `slowed` is that much slower on every device whose key contains
    `devices` ("" for all; "rocm:" for the AMD ones). vgprs > 0 also raises the kernels' VGPR
    count (registers on NVIDIA) there. Variants are named as on AMD (`hip_…`); NVIDIA devices run them as `cuda_…`."""

    at: int
    subject: str
    slowed: tuple[tuple[str, int, float], ...]
    devices: str = ""
    vgprs: int = 0


def plants(commits: int, fleet: bool = False) -> tuple[Plant, ...]:
    """The planted culprit commits, placed relative to the history's length."""
    if not fleet:
        return (Plant(int(commits * 0.55), "Unroll the K loop twice in the shared GEMM tile",
                      (("hip_mfma_tiled", 2, -0.08), ("hip_mfma_tiled", 1, -0.06), ("hip_gemm_v00", 2, -0.05)),
                      vgprs=32),
                Plant(int(commits * 0.8), "Use non-temporal stores in the copy kernels",
                      (("hip_copy_vec4", 1, -0.04), ("hip_copy_vec4", 2, -0.05))))
    return (Plant(int(commits * 0.3), "Unroll the K loop twice in the shared GEMM tile",
                  (("hip_mfma_tiled", 2, -0.08), ("hip_mfma_tiled", 3, -0.07)), devices="rocm:", vgprs=32),
            Plant(int(commits * 0.55), "Use non-temporal stores in the copy kernels",
                  (("hip_copy_vec4", 1, -0.07),)),
            Plant(int(commits * 0.8), "Raise the GEMM tile to 256 columns",
                  (("hip_gemm_v03", 3, -0.025), ("hip_gemm_v03", 4, -0.03)), devices="cuda:"),
            Plant(commits - 12, "Switch the epilogue to fp32 stores", (("hip_gemm_v07", 4, -0.10),),
                  devices="MI325X"))


def variant_names(n: int) -> tuple[list[str], list[str]]:
    """(gemm variants, copy variants): a fifth of them copies, peers first."""
    n_copy = max(1, n // 5)
    copies = ["torch_copy", "hip_copy_vec4"] + [f"hip_copy_v{i}" for i in range(n_copy - 2)]
    gemms = ["torch_ref", "hip_mfma_tiled", "hip_naive", "hip_broken", "hip_wrong_tile"] + \
        [f"hip_gemm_v{i:02d}" for i in range(n - n_copy - 5)]
    return gemms[: n - n_copy], copies[:n_copy]


def on_device(variant: str, device: str) -> str:
    """The name a variant has on `device`: `hip_x` runs as `cuda_x` on NVIDIA devices."""
    return "cuda_" + variant[4:] if device.startswith("cuda:") and variant.startswith("hip_") else variant


def shape_key(copy: bool, index: int) -> str:
    return f"n={COPY_SHAPES[index]}" if copy else "M={},N={},K={}".format(*GEMM_SHAPES[index])


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


@dataclass(frozen=True)
class SeriesSpec:
    """One synthetic series: where it runs, its work per call and its base time."""

    variant: str
    shape: int
    copy: bool
    device: str
    seconds: float
    flops: float
    moved: float
    spikes: frozenset

    @property
    def kind(self) -> str:
        return self.device.split(":", 1)[0]

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.variant, shape_key(self.copy, self.shape), "fp32" if self.copy else "bf16", self.device)


def _base_time(variant: str, shape_index: int, copy: bool, device: str,
               rng: np.random.Generator) -> tuple[float, float, float]:
    """(seconds, flops, bytes) of one series: peers fastest (the copy at 80% of the device's
    data-sheet bandwidth, torch.matmul at 60% of its bf16 peak), the others a spread below them."""
    spec = spec_of(device)
    bandwidth, peak = (spec.bandwidth, spec.peak_flops["bf16"]) if spec else (5e12, 1e15)
    if copy:
        n = COPY_SHAPES[shape_index]
        moved = 2.0 * 4 * n
        speed = 0.8 * bandwidth * (1.0 if variant == "torch_copy" else rng.uniform(0.4, 0.9))
        return moved / speed, 0.0, moved
    m, n, k = GEMM_SHAPES[shape_index]
    flops = 2.0 * m * n * k
    moved = 2.0 * (m * k + n * k) + 4.0 * m * n  # bf16 inputs read once, fp32 output written once
    speed = 0.6 * peak * (1.0 if variant == "torch_ref" else rng.uniform(0.003, 0.55))
    return flops / speed, flops, moved


def series_specs(commits: int, variants: int, shapes: int, devices: int, seed: int) -> list[SeriesSpec]:
    rng = np.random.default_rng(seed)
    gemms, copies = variant_names(variants)
    out = []
    for device in DEVICES[:devices]:
        for v in gemms + copies:
            for s in range(shapes):
                seconds, flops, moved = _base_time(v, s, v in copies, device, rng)
                spikes = frozenset(rng.choice(commits, 3, replace=False).tolist())
                out.append(SeriesSpec(on_device(v, device), s, v in copies, device, seconds, flops, moved, spikes))
    return out


def _resources(variant: str, extra_regs: int, copy: bool, nvidia: bool) -> dict:
    """The build's static analysis as the ROCm or CUDA back end stores it."""
    if nvidia:
        kernel = {"arch": "sm_90a", "registers": (32 if copy else 168) + extra_regs, "barriers": 1,
                  "smem_bytes": 0 if copy else 49152, "stack_bytes": 0, "spill_stores": 0, "spill_loads": 0,
                  "tensor_insts": 0 if copy else 2048}
        return {"vendor": "nvidia", "kernels": {variant: kernel}}
    vgprs = (32 if copy else 128) + extra_regs
    kernel = {"arch": "gfx942", "vgprs": vgprs, "agprs": 0 if copy else 64, "sgprs": 48,
              "lds_bytes": 0 if copy else 65536, "scratch_bytes": 0, "vgpr_spill": 0,
              "waves_per_simd": 8 if vgprs <= 128 else 4, "mfma_insts": 0 if copy else 4096}
    return {"vendor": "amd", "kernels": {variant: kernel}}


def _counters(copy: bool, rng: np.random.Generator, extra_regs: int, matrix_insts: float, nvidia: bool) -> dict:
    """Counters as the profile stage stores them: flopwatch short names, raw floats."""
    counters = {"l1_hit_pct": float(rng.uniform(45, 55) if not copy else rng.uniform(0, 2)),
                "coalescing_pct": 100.0 if copy else 75.0, "l2_hit_pct": float(rng.uniform(60, 90)),
                "kernel_names": ["gemm_kernel" if not copy else "copy_kernel"]}
    if nvidia:
        counters |= {"occupancy_pct": float((50.0 if not extra_regs else 37.5) + rng.uniform(-0.5, 0.5)),
                     "tensor_insts": matrix_insts}
    else:
        counters |= {"waves_per_cu": float((8.0 if not extra_regs else 4.0) + rng.uniform(-0.05, 0.05)),
                     "mfma_insts": matrix_insts, "lds_bank_conflict_pct": float(rng.uniform(0, 3))}
    return counters


def _slowdown(spec: SeriesSpec, night: int, plant_list) -> tuple[float, int]:
    """(run-time factor, extra VGPRs) that the plants put on `spec` at `night`."""
    factor, extra = 1.0, 0
    for p in plant_list:
        if night < p.at or p.devices not in spec.device:
            continue
        for variant, shape, change in p.slowed:
            if on_device(variant, spec.device) == spec.variant and shape == spec.shape:
                factor *= 1.0 / (1.0 + change)  # a throughput change of -8% is a run time 1/0.92 as long
                extra = max(extra, p.vgprs)
    return factor, extra


def record_nights(store: Store, repo: Path, meta: list[dict], specs: list[SeriesSpec], plant_list,
                  nights: range, seed: int) -> None:
    """Store one run per night in `nights` (indices into `meta`), one result per series."""
    last = len(meta) - 1
    first_device = specs[0].device
    for i in nights:
        c = meta[i]
        rng = np.random.default_rng([seed, i])
        store.record_commit(c["sha"], c["subject"], c["author"], c["authored_at"], [])
        run = store.start_run(c["sha"], False, "nightly", str(repo), "synthetic", "synthetic_history")
        noise = rng.standard_normal((len(specs), SAMPLES))
        wobble = rng.standard_normal(len(specs))
        night: list[Result] = []
        for j, spec in enumerate(specs):
            sample_noise, wobble_sd, spike = NOISE[spec.kind]
            factor, extra = _slowdown(spec, i, plant_list)
            seconds = spec.seconds * factor * (1 + wobble_sd * wobble[j] + (spike if i in spec.spikes and i != last
                                                                             else 0.0))
            samples = tuple((seconds * (1 + sample_noise * noise[j])).tolist())
            variant, shape_text, dtype, device = spec.key
            common = {"variant": variant, "op": "copy" if spec.copy else "gemm",
                      "backend": "torch" if variant.startswith("torch") else variant.split("_", 1)[0],
                      "shape": shape_text, "dtype": dtype, "device": device, "build_hash": f"{variant}-{i}",
                      "peer": variant in ("torch_ref", "torch_copy"), "flops": spec.flops, "bytes_moved": spec.moved}
            if variant == "hip_broken" and i == last and device == first_device:
                r = Result(**common, status="build_failed", diagnostic="gemm.hip:41:9: error: use of "
                           "undeclared identifier 'tile_k'", stderr_tail="gemm.hip:41:9: error: use of "
                           "undeclared identifier 'tile_k'\n1 error generated.")
            elif variant == "hip_wrong_tile" and i == last and device == first_device:
                tiles = [[(0.002 if (r_ + c_) % 5 else 3.5) for c_ in range(8)] for r_ in range(8)]
                tiles[7][7] = "inf"
                r = Result(**common, status="incorrect", diagnostic="8 of 64 tiles over tolerance; "
                           "1 tile never written (rows 448+, cols 448+)",
                           correctness={"rel_fro_err": 0.0213, "tile": 64, "tile_map": tiles, "passed": False})
            else:
                nvidia = spec.kind == "cuda"
                matrix_insts = 0.0 if spec.copy else float(spec.flops / (16384 if not nvidia else 32768))
                low, high = median_ci(samples)  # as workers/measure/timing.py stores them
                r = Result(**common, status="ok", median_s=statistics.median(samples), ci_low_s=low, ci_high_s=high,
                           samples_s=samples,
                           correctness={"rel_fro_err": float(rng.uniform(1e-7, 4e-7)), "passed": True},
                           resources=_resources(variant, extra, spec.copy, nvidia),
                           counters=_counters(spec.copy, rng, extra, matrix_insts, nvidia))
            night.append(r)
        store.record_results(run, c["sha"], False, night)  # one transaction per night
        store.finish_run(run)


def write_history(out: Path, commits: int = 365, variants: int = 25, shapes: int = 4, seed: int = 0,
                  devices: int = 1, fleet: bool = False, nights: int | None = None) -> dict:
    """Write the repository and the store; returns what was planted (for tests and benchmarks).
    nights: store results for the first `nights` commits only (default all); `add_night` adds
    the next one later, as a nightly would."""
    plant_list = plants(commits, fleet)
    repo = out / "repo"
    meta = make_repo(repo, commits, dt.date(2025, 11, 1), plant_list)
    specs = series_specs(commits, variants, shapes, devices, seed)
    with Store(repo / ".flopwatch" / "results.db") as store:
        record_nights(store, repo, meta, specs, plant_list, range(commits if nights is None else nights), seed)
    steps = []
    for p in plant_list:
        for spec in specs:
            for variant, shape, change in p.slowed:
                if on_device(variant, spec.device) == spec.variant and shape == spec.shape and \
                        p.devices in spec.device:
                    steps.append({"variant": spec.variant, "shape": spec.key[1], "dtype": spec.key[2],
                                  "device": spec.device, "good_sha": meta[p.at - 1]["sha"],
                                  "bad_sha": meta[p.at]["sha"], "change": change})
    return {"repo": str(repo), "shas": [c["sha"] for c in meta], "seed": seed,
            "settings": {"commits": commits, "variants": variants, "shapes": shapes, "devices": devices,
                         "fleet": fleet},
            "spikes": {"|".join(spec.key): sorted(i for i in spec.spikes if i != commits - 1) for spec in specs},
            "plants": [{"sha": meta[p.at]["sha"], "subject": p.subject, "good_sha": meta[p.at - 1]["sha"],
                        "steps": [s for s in steps if s["bad_sha"] == meta[p.at]["sha"]]} for p in plant_list],
            "steps": steps}


def add_night(planted: dict, night: int, store: str | None = None) -> None:
    """Store the results of commit `night` of a history written with `nights=night`: the next
    nightly, generated exactly as a longer history would have held it. store: where the history
    is kept when not in the repository's `.flopwatch/results.db` (a URL or a path)."""
    s = planted["settings"]
    repo = Path(planted["repo"])
    meta_rows = subprocess.run(["git", "-C", str(repo), "log", "--first-parent", "--reverse", "--format=%H%x00%s%x00"
                                "%an <%ae>%x00%aI", "main"], check=True, capture_output=True, text=True).stdout
    meta = [dict(zip(("sha", "subject", "author", "authored_at"), line.split("\x00")))
            for line in meta_rows.splitlines()]
    specs = series_specs(s["commits"], s["variants"], s["shapes"], s["devices"], planted["seed"])
    with Store(store or repo / ".flopwatch" / "results.db") as kept:
        record_nights(kept, repo, meta, specs, plants(s["commits"], s["fleet"]), range(night, night + 1),
                      planted["seed"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="folder to create (repo/ and repo/.flopwatch/results.db inside)")
    ap.add_argument("--fleet", action="store_true", help="three years of a fleet: " +
                    ", ".join(f"--{k} {v}" for k, v in FLEET.items()) + " (the other options then override)")
    ap.add_argument("--commits", type=int)
    ap.add_argument("--variants", type=int)
    ap.add_argument("--shapes", type=int, choices=range(3, 6))
    ap.add_argument("--devices", type=int, choices=range(1, len(DEVICES) + 1))
    ap.add_argument("--nights", type=int, help="store results for the first N commits only (default: all)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    preset = FLEET if args.fleet else {"commits": 365, "variants": 25, "shapes": 4, "devices": 1}
    size = {k: getattr(args, k) if getattr(args, k) is not None else v for k, v in preset.items()}
    if size["variants"] < 10:
        ap.error("--variants: at least 10 (two copy variants, peers, the planted and the failing ones)")
    if size["commits"] < 40:
        ap.error("--commits: at least 40 (the planted steps need segments on both sides)")
    if (args.out / "repo").exists():
        ap.error(f"{args.out / 'repo'} exists; give a new folder")
    t0 = time.perf_counter()
    planted = write_history(args.out, seed=args.seed, fleet=args.fleet, nights=args.nights, **size)
    print(f"{size['commits']} commits × {size['devices'] * size['variants'] * size['shapes']} series in "
          f"{time.perf_counter() - t0:.1f} s: {planted['repo']}")
    for p in planted["plants"]:
        print(f"planted {p['sha'][:10]} {p['subject']}: " + ", ".join(
            f"{s['change']:+.1%} {s['variant']} {s['shape']} {s['device'].split(':')[1]}" for s in p["steps"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
