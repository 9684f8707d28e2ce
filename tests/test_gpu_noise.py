"""The GPU noise benchmark, as far as it goes without a GPU: the plant, the repository it
measures, the decision of each repetition, and its refusal on a machine without CUDA."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import gpu_noise
from pipeline.project.config import load_config
from pipeline.project.discovery import discover


@pytest.mark.parametrize("variant", sorted(gpu_noise.PLANT_TARGETS))
def test_plant_launches_the_spin_before_the_gemm(variant, tmp_path):
    source = (ROOT / "kernels" / gpu_noise.PLANT_TARGETS[variant]).read_text()
    planted = gpu_noise.plant_source(source, "gemm_" + variant, 12345)
    body = planted[planted.index(f'extern "C" void gemm_{variant}('):]
    assert body.index("flopwatch_planted_spin<<<1, 1, 0, (cudaStream_t)stream>>>(12345LL)") < body.index("_kernel<<<")
    assert planted.index("__global__ void flopwatch_planted_spin") < planted.index(f'extern "C" void gemm_{variant}(')
    with pytest.raises(ValueError):
        gpu_noise.plant_source(source, "no_such_entry", 1)


@pytest.mark.parametrize("variant", sorted(gpu_noise.PLANT_TARGETS))
def test_the_planted_source_still_builds_for_the_suites_arch(variant, tmp_path):
    nvcc = shutil.which("nvcc")
    if not nvcc:
        pytest.skip("nvcc is not installed: the planted source is not compiled here")
    source = (ROOT / "kernels" / gpu_noise.PLANT_TARGETS[variant]).read_text()
    (tmp_path / "k.cu").write_text(gpu_noise.plant_source(source, "gemm_" + variant, 12345))
    done = subprocess.run([nvcc, "-arch=sm_90a", "-c", "k.cu", "-o", "k.o"], cwd=tmp_path,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_spin_cycles_are_the_fraction_of_the_call():
    assert gpu_noise.spin_cycles(2e-3, 0.01, 1980.0) == 39600  # 1% of 2 ms at 1.98 GHz
    assert gpu_noise.spin_cycles(1e-9, 0.01, 1.0) == 1


def test_repository_has_the_gpu_variants_and_a_planted_commit(tmp_path):
    repo, shas = gpu_noise.make_repo(tmp_path / "repo")
    planted = gpu_noise.commit_planted(repo, tmp_path / "repo", {"cuda_wmma": 1000, "cuda_naive": 2000})
    root = tmp_path / "repo"
    variants, invalid = discover(root, load_config(root), None)
    assert not invalid
    names = {v.name for v in variants}
    assert {Path(d).name for d in gpu_noise.VARIANT_DIRS} == names
    assert all("cpu" not in v.devices for v in variants), "the GPU benchmark must not run 4096³ on the CPU"
    assert {s.key for v in variants if v.op == "gemm" for s in v.shapes} == {"M=4096,N=4096,K=4096"}
    diff = repo.git.diff(shas["same"], planted, "--stat")
    assert "gemm_wmma.cu" in diff and "gemm_naive.cu" in diff and "README" not in diff
    assert repo.git.diff(shas["base"], shas["same"], "--name-only") == "README.md"


def test_each_repetition_is_decided_like_compare():
    rng = np.random.default_rng(0)
    base = 1e-3 * (1 + 0.0005 * rng.standard_normal(100))
    same = base * (1 + 0.0005 * rng.standard_normal(100))
    slow = base * 1.02 * (1 + 0.0005 * rng.standard_normal(100))
    verdicts = gpu_noise.decide([[list(base), list(same)], [list(base), list(slow)]], 0.01)
    assert [v["verdict"] for v in verdicts] == ["same", "slower"]
    assert abs(verdicts[1]["time_ratio_median"] - 1.02) < 0.002
    row = gpu_noise.summarise("planted", "k", 1e-3, verdicts, ("slower",))
    assert row["hits"] == 1 and row["reps"] == 2 and "k" in gpu_noise.table([row], 0.01)


def test_refuses_without_a_cuda_device(tmp_path, capsys):
    from workers.measure import device

    if device.gpu_kind() == "cuda":
        pytest.skip("a CUDA device is present")
    assert gpu_noise.main(["--device", "cuda", "--out", str(tmp_path)]) == 2
    assert "no CUDA device" in capsys.readouterr().err


def test_pair_worker_repeats_fresh_paired_measurements(tmp_path):
    """The repetition loop, on the CPU: one process, `count` paired measurements of two builds."""
    import json

    from pipeline.run.plan import build_plan, jobs_for
    from workers.backends.build import build_variant, toolchains
    from workers.toolkit.bundle import unpack

    variants, _ = discover(ROOT, load_config(ROOT), ("kernels/gemm",))
    v = next(x for x in variants if x.name == "cpp_naive")
    plan = build_plan(ROOT, v, (), toolchains()["cpp"]["ident"])
    build, artifact = build_variant(v, plan.bundle, plan.build_hash, [])
    assert build.ok, build.first_errors
    for i in range(2):
        unpack(artifact, tmp_path / f"artifact{i}")
    job = next(j for j in jobs_for([v]) if j.shape.dims["M"] <= 256)
    # 128³, not the suite's smallest 256³: a call of about 1 ms (not 30) is seldom cut by the
    # scheduler, so a repetition's ~40 pairs show the pairing itself when other processes share
    # the 2 cores (the suite's own workers do); at 256³ six pairs of cut calls put a
    # repetition's median ratio anywhere from 0.9 to 1.5.
    dims = {"M": 128, "N": 128, "K": 128}
    spec = {"mode": "pair", "variants": [v.to_dict(), v.to_dict()], "device_kind": "cpu", "dims": dims,
            "dtype": job.dtype, "artifacts": [str(tmp_path / "artifact0"), str(tmp_path / "artifact1")],
            "timing": {"budget_s": 0.3}, "count": 3, "time_limit_s": 60}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    assert gpu_noise.main(["--pair-worker", str(tmp_path / "spec.json"), str(tmp_path / "reps.json")]) == 0
    reps = json.loads((tmp_path / "reps.json").read_text())
    from workers.job.child import PAIR_MIN_SAMPLES

    assert len(reps) == 3 and all(len(a) == len(b) >= PAIR_MIN_SAMPLES for a, b in reps)
    # three fresh measurements, not one copied three times
    assert len({tuple(a) for a, _ in reps}) == 3
    # Identical builds, alternated call by call: each repetition's paired time ratio sits at 1.
    # A pairing that favoured one side (always first, or a stale cache for one of them) shows as
    # a ratio off 1 in every repetition; the 2-core machine's load moves both sides alike.
    for a, b in reps:
        ratios = sorted(y / x for x, y in zip(a, b))
        assert 0.8 < ratios[len(ratios) // 2] < 1.25, ratios
    verdicts = gpu_noise.decide(reps, 0.2)
    assert all(v["verdict"] in ("same", "unsure") for v in verdicts), verdicts
