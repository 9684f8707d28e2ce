"""The attention (causal and not) and softmax ops: work counted as FlashAttention's papers count
it, references checked against independent computations, peers passing their own op's check, a
wrong head located in the 4-D output, and the bundled variants: the CPU ones correct against
the reference, the CUDA, HIP (written as for hiprtc) and Triton ones built and analysed here."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from pipeline.onboarding.source.c_text import strip_comments
from pipeline.project.config import load_config
from pipeline.project.discovery import discover
from pipeline.run.peers import builtin_peers
from pipeline.run.plan import build_plan, jobs_for
from workers.backends.build import build_variant, toolchains
from workers.core import status
from workers.job.runner import execute_job
from workers.measure import correctness
from workers.ops import attention, attention_causal, op_source_digest, softmax

ROOT = Path(__file__).resolve().parents[1]
TOOLS = toolchains()


def test_flops_are_counted_as_flashattention_counts_them():
    dims = {"B": 2, "H": 3, "S": 512, "D": 64}
    # two matrix products of 2·S·S·D FLOPs per head; causal masks half of the score matrix
    assert attention.flops(dims) == 2 * 3 * (2 * 2 * 512 * 512 * 64)
    assert attention_causal.flops(dims) == attention.flops(dims) / 2
    assert attention.bytes_moved(dims, 2) == 4 * 2 * 2 * 3 * 512 * 64
    assert softmax.flops({"M": 4, "N": 8}) == 0 and softmax.bytes_moved({"M": 4, "N": 8}, 4) == 2 * 4 * 4 * 8


def _naive_attention(q, k, v, causal):
    b, h, s, d = q.shape
    out = torch.empty(b, h, s, d, dtype=torch.float64)
    for bi in range(b):
        for hi in range(h):
            for i in range(s):
                keys = i + 1 if causal else s
                scores = torch.tensor([float(q[bi, hi, i].double() @ k[bi, hi, j].double()) / math.sqrt(d) for j in range(keys)],
                                      dtype=torch.float64)
                p = torch.exp(scores - scores.max())
                p /= p.sum()
                out[bi, hi, i] = (p[:, None] * v[bi, hi, :keys].double()).sum(0)
    return out


@pytest.mark.parametrize("op,causal", [(attention, False), (attention_causal, True)])
def test_attention_reference_matches_a_row_by_row_computation(op, causal):
    dims = {"B": 1, "H": 2, "S": 9, "D": 4}
    inputs = op.make_inputs(dims, torch.float32, "bhsd", "cpu", torch.Generator().manual_seed(3))
    ref = op.reference(inputs, "bhsd")
    naive = _naive_attention(inputs["Q"], inputs["K"], inputs["V"], causal)
    assert ref.dtype == torch.float64 and torch.allclose(ref, naive, rtol=1e-10, atol=1e-12)
    if causal:  # the first query sees only the first key: its output is V's first row
        assert torch.allclose(ref[:, :, 0], inputs["V"][:, :, 0].double())


def test_softmax_reference_rows_sum_to_one_and_follow_the_logits():
    inputs = softmax.make_inputs({"M": 5, "N": 7}, torch.float32, "rows", "cpu", torch.Generator().manual_seed(1))
    ref = softmax.reference(inputs, "rows")
    assert torch.allclose(ref.sum(-1), torch.ones(5, dtype=torch.float64))
    x = inputs["X"].double()
    assert torch.allclose(ref[:, 1] / ref[:, 0], torch.exp(x[:, 1] - x[:, 0]))


@pytest.mark.parametrize("op,dims,dtype", [
    (attention, {"B": 1, "H": 2, "S": 64, "D": 32}, "fp32"),
    (attention_causal, {"B": 1, "H": 2, "S": 64, "D": 32}, "bf16"),
    (softmax, {"M": 16, "N": 300}, "fp32"),
    (softmax, {"M": 16, "N": 300}, "bf16"),
])
def test_each_peer_passes_its_own_ops_check(op, dims, dtype):
    torch_dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype]
    inputs = op.make_inputs(dims, torch_dtype, op.LAYOUTS[0], "cpu", torch.Generator().manual_seed(7))
    g = correctness.guarded_output(op.output_shape(dims), torch_dtype, "cpu")
    op.peer(inputs, g.out, op.LAYOUTS[0])
    rtol, atol = op.TOLERANCE[dtype]
    figures = correctness.evaluate(g, op.reference(inputs, op.LAYOUTS[0]), rtol, atol)
    assert figures["passed"], figures["rel_fro_err"]


def test_a_wrong_head_is_located_in_the_four_dimensional_output():
    dims = {"B": 1, "H": 2, "S": 128, "D": 64}
    inputs = attention.make_inputs(dims, torch.float32, "bhsd", "cpu", torch.Generator().manual_seed(5))
    g = correctness.guarded_output(attention.output_shape(dims), torch.float32, "cpu")
    attention.peer(inputs, g.out, "bhsd")
    g.out[0, 1, 64:128] += 1.0  # the second head's last 64 query rows
    figures = correctness.evaluate(g, attention.reference(inputs, "bhsd"), *attention.TOLERANCE["fp32"])
    assert not figures["passed"]
    # rows of [B·H·S, D]: head 1 starts at row 128, its rows 64..127 are rows 192..255
    assert [(t["row"], t["col"]) for t in figures["bad_tiles"]] == [(3, 0)]
    assert "tile (3, 0) = out.view(-1, last)[192:256, 0:64]" in correctness.diagnose(figures, (1, 2, 128, 64))


def test_op_digests_change_with_what_defines_the_op():
    assert op_source_digest("attention") != op_source_digest("attention_causal")
    # the same in another process (a digest of text, not of anything a process draws at random):
    # the driver computes it and a node's cache keys are compared with it
    other = subprocess.run([sys.executable, "-c", "from workers.ops import op_source_digest; "
                            "print(op_source_digest('softmax'))"], capture_output=True, text=True, check=True,
                           cwd=ROOT, env={**os.environ, "PYTHONHASHSEED": "random", "PYTHONPATH": str(ROOT)})
    assert other.stdout.strip() == op_source_digest("softmax")
    assert op_source_digest("gemm").startswith("builtin:")


# -- the bundled variants of the new ops -------------------------------------------------------------

def _bundled(names: tuple[str, ...]):
    variants, invalid = discover(ROOT, load_config(ROOT), ("kernels/attention", "kernels/softmax"))
    assert not invalid
    by_name = {v.name: v for v in [*variants, *builtin_peers(variants)]}
    return [by_name[n] for n in names]


@pytest.mark.parametrize("name", ["attention_cpp_naive", "attention_causal_cpp_naive", "softmax_cpp_rows",
                                  "peer.attention", "peer.attention_causal", "peer.softmax"])
def test_cpu_variants_and_builtin_peers_are_correct(name):
    (v,) = _bundled((name,))
    plan = build_plan(ROOT, v, ("kernels/include",), toolchains()[v.backend]["ident"])
    build, artifact = build_variant(v, plan.bundle, plan.build_hash, list(plan.include_dirs))
    assert build.ok, build.first_errors
    cpu_variants = _bundled(("attention_cpp_naive", "attention_causal_cpp_naive", "softmax_cpp_rows"))
    job = next(j for j in jobs_for([v, *cpu_variants]) if j.variant == name and j.device_kind == "cpu")
    r = execute_job(job, v, build, artifact, {"timing": {"budget_s": 0.05}, "threads": 1})
    assert r.status == status.OK, r.diagnostic
    assert r.correctness["rel_fro_err"] < 1e-5 and r.median_s > 0


@pytest.mark.skipif(not TOOLS["hip"].get("ident"), reason="no HIP toolchain (tools/install-hip-cross.sh)")
def test_hip_variants_written_as_for_hiprtc_build_with_labelled_lds():
    for v in _bundled(("attention_hip_rows", "attention_causal_hip_rows", "softmax_hip_rows")):
        assert v.flags == () and v.include_dirs == ()
        source = strip_comments((ROOT / v.folder / v.sources[0]).read_text())
        header = strip_comments((ROOT / "kernels/include/flopwatch_rowwise.h").read_text())
        assert "hip_runtime.h" not in source and "hip_runtime.h" not in header
        plan = build_plan(ROOT, v, ("kernels/include",), TOOLS["hip"]["ident"])
        build, _ = build_variant(v, plan.bundle, plan.build_hash, list(plan.include_dirs))
        assert build.ok, build.first_errors
        (k,) = build.analysis["kernels"].values()
        tiles = 2 * 64 * 64 * 2 if v.op.startswith("attention") else 256 * 4  # fp16 K and V tiles; the reduction
        assert k["lds_static_bytes"] == tiles and k["lds_bytes"] == -(-tiles // 512) * 512 and k["vgpr_spill"] == 0


@pytest.mark.skipif(not TOOLS["cuda"].get("ident"), reason="no nvcc")
def test_cuda_variants_build_with_shared_memory_static_and_allocated():
    for v in _bundled(("attention_cuda_rows", "softmax_cuda_rows")):
        plan = build_plan(ROOT, v, ("kernels/include",), TOOLS["cuda"]["ident"])
        build, _ = build_variant(v, plan.bundle, plan.build_hash, list(plan.include_dirs))
        assert build.ok, build.first_errors
        (k,) = build.analysis["kernels"].values()
        static = 2 * 64 * 64 * 2 if v.op == "attention" else 256 * 4
        assert k["smem_bytes"] == static and k["smem_alloc_bytes"] == -(-(static + 1024) // 128) * 128
        assert k["spill_stores"] == 0


@pytest.mark.slow
@pytest.mark.skipif(not TOOLS["triton"].get("ident"), reason="no Triton")
def test_triton_variants_compile_ahead_of_time_for_both_vendors():
    for v in _bundled(("attention_triton_flash", "attention_causal_triton_flash", "softmax_triton_fused")):
        plan = build_plan(ROOT, v, (), TOOLS["triton"]["ident"])
        build, _ = build_variant(v, plan.bundle, plan.build_hash, [])
        assert build.ok, build.first_errors
        rows = build.analysis["kernels"]
        nv = [r for k, r in rows.items() if k.endswith("@sm_90a")]
        assert nv and all(r.get("registers", 0) > 0 for r in nv), rows
        if v.op.startswith("attention"):
            assert all(r["tensor_insts"] > 0 for r in nv if "tensor_insts" in r)  # tl.dot → tensor cores
