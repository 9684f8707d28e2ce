"""`output_dtype`: a kernel that writes its output in another dtype than the op's (a HipKittens
GEMM writes bf16 C where the gemm op's output is fp32) is handed an output of that dtype, checked
against the fp64 reference with the tolerance of its inputs, and timed."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.project.config import ProjectConfig
from pipeline.project.manifest import ManifestError, load_variant
from pipeline.run.plan import build_plan, jobs_for
from workers.backends.build import build_variant
from workers.core import status
from workers.job.runner import execute_job

KERNEL = '''
import torch


def gemm_nt(A, B, C):
    if C.dtype != torch.bfloat16:
        raise TypeError(f"expected a bf16 output, got {C.dtype}")
    C.copy_(torch.matmul(A.float(), B.float().T))
'''

MANIFEST = '''
name = "bf16_out"
op = "gemm"
backend = "python"
sources = ["k.py"]
dtypes = ["bf16"]
shapes = [[128, 128, 128]]
devices = ["cpu"]
output_dtype = "{out}"

[binding]
kind = "python"
entry = "k.py:gemm_nt"
'''


def _variant(tmp_path: Path, out: str):
    folder = tmp_path / "kernels" / "gemm" / "bf16_out"
    folder.mkdir(parents=True)
    (folder / "k.py").write_text(KERNEL)
    (folder / "variant.toml").write_text(MANIFEST.format(out=out))
    return load_variant(tmp_path, folder / "variant.toml", ProjectConfig())


def test_the_kernel_gets_an_output_of_its_declared_dtype_and_passes(tmp_path):
    v = _variant(tmp_path, "bf16")
    assert v.output_dtype == "bf16"
    plan = build_plan(tmp_path, v, (), "python")
    build, artifact = build_variant(v, plan.bundle, plan.build_hash, [])
    r = execute_job(jobs_for([v])[0], v, build, artifact, {"timing": {"budget_s": 0.05}, "threads": 1})
    assert r.status == status.OK, r.diagnostic + r.stderr_tail
    assert r.correctness["rel_fro_err"] < 1e-2 and r.median_s > 0


def test_without_the_field_the_same_kernel_sees_the_ops_fp32_output(tmp_path):
    v = _variant(tmp_path, "bf16")
    v = type(v).from_dict({**v.to_dict(), "output_dtype": ""})
    plan = build_plan(tmp_path, v, (), "python")
    build, artifact = build_variant(v, plan.bundle, plan.build_hash, [])
    r = execute_job(jobs_for([v])[0], v, build, artifact, {"timing": {"budget_s": 0.05}, "threads": 1})
    assert r.status != status.OK and "expected a bf16 output" in (r.diagnostic + r.stderr_tail)


def test_an_unknown_output_dtype_is_a_manifest_error(tmp_path):
    with pytest.raises(ManifestError, match="output_dtype"):
        _variant(tmp_path, "int4")
