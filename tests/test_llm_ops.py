"""The built-in ops of LLM blocks (layer_norm ... modulated_rms_norm): on small CPU shapes in fp32 and bf16,
each fp64 reference agrees with the op's torch peer within the op's tolerance and rejects a
wrong output; shapes, dtypes and work counts are as documented; entries written with
Liger-Kernel's functional signatures, called as flopwatch calls a returning entry (inputs in
order, then the scalars), pass the harness's own check; entry names map to ops."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from workers.bindings import python_entry
from workers.core.records import Binding, Shape, Variant
from workers.job import child
from workers.measure import correctness
from workers.ops import OPS, op_for_entry_name, op_source_digest, torch_dtype
from workers.ops.problem import flatten_outputs

NEW_OPS = ("layer_norm", "group_norm", "gelu", "geglu", "relu_squared", "silu", "dyt", "cross_entropy", "kl_div",
           "jsd", "tvd", "rope", "fused_add_rms_norm", "log_softmax", "sparsemax", "poly_norm",
           "fused_linear_cross_entropy", "fused_linear_jsd", "modulated_rms_norm", "elementwise_add", "elementwise_mul")
LINEAR_OPS = ("fused_linear_cross_entropy", "fused_linear_jsd")  # the loss heads: H is the hidden size
# Small shapes; N = 300 and V = 500 are not powers of two (kernels mask their last block).
SIZES = {"M": 8, "N": 300, "V": 500, "C": 6, "G": 3, "B": 2, "H": 4, "HKV": 2, "S": 12, "D": 16, "T": 5}
DTYPES = ("fp32", "bf16")


def dims_of(name: str) -> dict:
    dims = {d: SIZES[d] for d in OPS[name].DIMS}
    if name == "group_norm":
        dims["N"] = 20
    if name in LINEAR_OPS:
        dims["H"] = 96
    return dims


def draw(name: str, dtype: str, seed: int = 0):
    op = OPS[name]
    return op, op.make_inputs(dims_of(name), torch_dtype(dtype), op.LAYOUTS[0], "cpu", torch.Generator().manual_seed(seed))


def judged(op, out: torch.Tensor, ref: torch.Tensor, dtype: str) -> dict:
    """The harness's verdict on an output the entry returned."""
    return correctness.evaluate(correctness.returned_output(out), ref, *op.TOLERANCE[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", NEW_OPS)
def test_reference_agrees_with_the_peer_and_has_the_declared_shape_and_dtype(name, dtype):
    for seed in range(3):
        op, inputs = draw(name, dtype, seed)
        assert list(inputs) == list(op.INPUTS)  # the order entries are called with
        ref = op.reference(inputs, op.LAYOUTS[0])
        assert ref.dtype == torch.float64 and tuple(ref.shape) == tuple(op.output_shape(dims_of(name)))
        out = flatten_outputs(op.peer_returns(inputs, op.LAYOUTS[0]), name)
        assert out.dtype == torch_dtype(op.output_dtype(dtype)) and out.shape == ref.shape
        figures = judged(op, out, ref, dtype)
        assert figures["passed"], (seed, figures["rel_fro_err"], figures["max_abs_err"] / figures["ref_max_abs"])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", NEW_OPS)
def test_tolerance_catches_a_wrong_output(name, dtype):
    op, inputs = draw(name, dtype)
    ref = op.reference(inputs, op.LAYOUTS[0])
    out = flatten_outputs(op.peer_returns(inputs, op.LAYOUTS[0]), name)
    rtol, atol = op.TOLERANCE[dtype]
    # one element off by three times what the tolerance allows
    one_off = out.clone()
    flat = one_off.view(-1)
    k = int(ref.reshape(-1).abs().argmax())
    flat[k] += 3 * max(rtol, atol) * float(ref.abs().max())
    assert not judged(op, one_off, ref, dtype)["passed"]
    if dtype == "fp32":  # the whole output 1% off (a wrong scale, a mean over the wrong count)
        assert not judged(op, out * 1.01, ref, dtype)["passed"]


def test_references_follow_the_math_at_hand_checked_points():
    # layer_norm of a row [1, 2, 3]: mean 2, variance 2/3
    ref = OPS["layer_norm"].reference({"X": torch.tensor([[1.0, 2.0, 3.0]]), "W": torch.ones(3),
                                       "B": torch.full((3,), 0.5)}, "rows")
    expected = (torch.tensor([-1.0, 0.0, 1.0], dtype=torch.float64) / (2 / 3 + 1e-6) ** 0.5 + 0.5)[None]
    assert torch.allclose(ref, expected)
    # cross entropy of uniform logits is log V whatever the target
    loss = OPS["cross_entropy"].reference({"input": torch.zeros(4, 10), "target": torch.tensor([0, 3, 9, 2])}, "rows")
    assert loss.shape == () and abs(float(loss) - math.log(10)) < 1e-12
    # jsd and kl_div of a distribution with itself are 0; tvd of disjoint one-hots is 1/V per row
    logp = torch.randn(3, 7).log_softmax(-1)
    assert abs(float(OPS["jsd"].reference({"input": logp, "target": logp}, "rows"))) < 1e-12
    assert abs(float(OPS["kl_div"].reference({"input": logp, "target": logp.exp()}, "rows"))) < 1e-7
    eye = torch.eye(4)
    assert float(OPS["tvd"].reference({"input": eye, "target": eye.roll(1, 0)}, "rows")) == pytest.approx(1 / 4)
    # sparsemax: [1, 0.8, -1] → τ = 0.4 → [0.6, 0.4, 0]; a dominant score takes everything
    y = OPS["sparsemax"].reference({"X": torch.tensor([[1.0, 0.8, -1.0], [5.0, 0.0, 0.0]])}, "rows")
    assert torch.allclose(y, torch.tensor([[0.6, 0.4, 0.0], [1.0, 0.0, 0.0]], dtype=torch.float64))
    # rope at position 0 is the identity; relu² and gelu_tanh at known points
    op, inputs = draw("rope", "fp32")
    ref = op.reference(inputs, "bhsd")
    q_rot = ref[:inputs["q"].numel()].view_as(inputs["q"])
    assert torch.allclose(q_rot[:, :, 0], inputs["q"][:, :, 0].double())
    assert torch.equal(OPS["relu_squared"].reference({"X": torch.tensor([[-2.0, 3.0]])}, "rows"),
                       torch.tensor([[0.0, 9.0]], dtype=torch.float64))
    assert float(OPS["gelu"].reference({"X": torch.tensor([[1.0]])}, "rows")) == pytest.approx(0.8411919906, abs=1e-9)
    # the fused heads are cross_entropy and jsd of the logits input @ weight.T
    x, w, t = torch.randn(5, 3), torch.randn(7, 3), torch.tensor([0, 6, 2, 2, 1])
    loss = OPS["fused_linear_cross_entropy"].reference({"input": x, "weight": w, "target": t}, "rows")
    assert float(loss) == pytest.approx(float(F.cross_entropy(x.double() @ w.double().T, t)), abs=1e-12)
    x2, w2 = torch.randn(5, 3), torch.randn(7, 3)
    jsd = OPS["fused_linear_jsd"].reference({"student_input": x, "student_weight": w, "teacher_input": x2,
                                             "teacher_weight": w2}, "rows")
    by_jsd = OPS["jsd"].reference({"input": (x.double() @ w.double().T).log_softmax(-1),
                                   "target": (x2.double() @ w2.double().T).log_softmax(-1)}, "rows")
    assert float(jsd) == pytest.approx(float(by_jsd), abs=1e-12) and float(jsd) > 0
    same = OPS["fused_linear_jsd"].reference({"student_input": x, "student_weight": w, "teacher_input": x,
                                              "teacher_weight": w}, "rows")
    assert abs(float(same)) < 1e-12
    # modulated rms_norm of a row [3, 4] (rms √12.5) with W = 1, scale 1, shift 0.5: 2·x/rms + 0.5
    y = OPS["modulated_rms_norm"].reference({"X": torch.tensor([[[3.0, 4.0]]]), "W": torch.ones(2),
                                             "scale": torch.ones(1, 2), "shift": torch.full((1, 2), 0.5)}, "rows")
    expected = 2 * torch.tensor([3.0, 4.0], dtype=torch.float64) / (12.5 + 1e-6) ** 0.5 + 0.5
    assert torch.allclose(y, expected[None, None])


def test_elementwise_arithmetic_is_exact_in_fp32_and_counts_three_vectors():
    for name, fn in (("elementwise_add", torch.add), ("elementwise_mul", torch.mul)):
        op = OPS[name]
        a, b = torch.tensor([1.5, -2.0, 3.0]), torch.tensor([0.5, 4.0, -1.0])
        assert torch.equal(op.reference({"A": a, "B": b}, "rows"), fn(a, b).double())
        assert op.bytes_moved({"N": 1000}, 2) == 3 * 2 * 1000 and op.flops({"N": 1000}) == 0


def test_work_is_counted_by_hand_for_one_shape():
    m, n = 4, 8
    assert OPS["layer_norm"].bytes_moved({"M": m, "N": n}, 2) == 2 * (m * n + m * n + n + n)  # X, Y, W, B
    assert OPS["group_norm"].bytes_moved({"M": 2, "C": 6, "N": 5, "G": 3}, 4) == 4 * (2 * 2 * 6 * 5 + 2 * 6)
    assert OPS["geglu"].bytes_moved({"M": m, "N": n}, 2) == 2 * 3 * m * n  # A, B read; Y written
    for name in ("gelu", "silu", "relu_squared", "log_softmax", "sparsemax"):
        assert OPS[name].bytes_moved({"M": m, "N": n}, 4) == 4 * 2 * m * n
    assert OPS["dyt"].bytes_moved({"M": m, "N": n}, 2) == 2 * (2 * m * n + 2 * n + 1)  # + Gamma, Beta, Alpha
    # logits read, int64 targets read, one loss written
    assert OPS["cross_entropy"].bytes_moved({"M": m, "V": 100}, 2) == 2 * m * 100 + 8 * m + 2
    assert OPS["kl_div"].bytes_moved({"M": m, "V": 100}, 2) == 2 * 2 * m * 100 + 4  # an fp32 loss
    assert OPS["jsd"].bytes_moved({"M": m, "V": 100}, 2) == 2 * (2 * m * 100 + 1)
    assert OPS["fused_add_rms_norm"].bytes_moved({"M": m, "N": n}, 2) == 2 * (4 * m * n + n)  # X, R in; Y, S out
    assert OPS["poly_norm"].bytes_moved({"M": m, "N": n}, 4) == 4 * (2 * m * n + 4)
    # X read, Y written, W [N], scale and shift [B, N]
    assert OPS["modulated_rms_norm"].bytes_moved({"B": 2, "T": 3, "N": n}, 2) == 2 * (2 * 2 * 3 * n + n + 2 * 2 * n)
    # the heads: one M×H by H×V product each (2·M·H·V), hidden states and weights read once, int64
    # targets read, one fp32 loss written
    head = {"M": m, "H": 16, "V": 100}
    assert OPS["fused_linear_cross_entropy"].flops(head) == 2 * m * 16 * 100
    assert OPS["fused_linear_cross_entropy"].bytes_moved(head, 2) == 2 * (m * 16 + 100 * 16) + 8 * m + 4
    assert OPS["fused_linear_jsd"].flops(head) == 2 * 2 * m * 16 * 100  # student's and teacher's heads
    assert OPS["fused_linear_jsd"].bytes_moved(head, 2) == 2 * 2 * (m * 16 + 100 * 16) + 4
    rope = {"B": 2, "H": 4, "HKV": 2, "S": 3, "D": 8}
    q, k = 2 * 4 * 3 * 8, 2 * 2 * 3 * 8
    assert OPS["rope"].output_shape(rope) == (q + k,)
    assert OPS["rope"].bytes_moved(rope, 2) == 2 * (2 * q + 2 * k + 2 * 3 * 8)  # q, k in and out; cos, sin
    # memory-bound, as rms_norm, but for the loss heads
    assert all(OPS[name].flops(dims_of(name)) == 0 for name in NEW_OPS if name not in LINEAR_OPS)


def test_output_dtypes_and_scalars_follow_liger():
    assert OPS["kl_div"].output_dtype("bf16") == "fp32" and OPS["tvd"].output_dtype("bf16") == "fp32"
    assert OPS["cross_entropy"].output_dtype("bf16") == "bf16" and OPS["jsd"].output_dtype("fp16") == "fp16"
    # the fused heads return the fp32 sum they accumulate, whatever the input dtype
    assert all(OPS[name].output_dtype("bf16") == "fp32" for name in LINEAR_OPS)
    _, inputs = draw("cross_entropy", "bf16")
    assert inputs["target"].dtype == torch.int64 and 0 <= int(inputs["target"].min()) <= int(inputs["target"].max()) < 500
    assert OPS["group_norm"].scalars({"M": 2, "C": 6, "N": 5, "G": 3}) == {"num_channels": 6, "num_groups": 3, "eps": 1e-6}
    assert tuple(OPS["group_norm"].scalars({"M": 2, "C": 6, "N": 5, "G": 3})) == OPS["group_norm"].SCALARS
    for name in ("layer_norm", "fused_add_rms_norm", "poly_norm", "modulated_rms_norm"):
        assert OPS[name].SCALARS == ("eps",)


def test_group_norm_reference_reads_the_groups_from_a_copy_of_the_inputs():
    # the harness judges an entry that wrote into its inputs against a snapshot (clones)
    op, inputs = draw("group_norm", "fp32")
    copies = correctness.snapshot_inputs(inputs)
    assert torch.equal(op.reference(copies, "rows"), op.reference(inputs, "rows"))
    by_hand = F.group_norm(inputs["X"].double(), 3, inputs["W"].double(), inputs["B"].double(), 1e-6)
    assert torch.allclose(op.reference(inputs, "rows"), by_hand)


# -- entries with Liger-Kernel's functional signatures, through the harness ----------------------------
# Torch stand-ins written with the parameters and defaults of liger_kernel.transformers.functional
# (@ead96b6), so flopwatch calls them as it calls Liger's: inputs in order, then the op's scalars.

def liger_layer_norm(X, W, B, eps):
    return F.layer_norm(X, (X.shape[-1],), W, B, eps)


def liger_group_norm(X, affine_scaling_weight, affine_shifting_bias, num_channels, num_groups, eps):
    assert isinstance(num_channels, int) and isinstance(num_groups, int) and num_channels == X.shape[1]
    return F.group_norm(X, num_groups, affine_scaling_weight, affine_shifting_bias, eps)


def liger_dyt(x, alpha, gamma, beta):
    return gamma * torch.tanh(alpha * x) + beta


def liger_cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,  # noqa: A002
                        reduction="mean", label_smoothing=0.0):
    return F.cross_entropy(input, target, ignore_index=ignore_index, reduction=reduction)


def liger_kl_div(input, target, size_average=True, reduce=True, reduction="mean", log_target=False, eps=1e-10):  # noqa: A002
    return (target * (target.float().clamp_min(eps).log() - input.float())).sum().float() / input.numel()


def liger_rope(q, k, cos, sin, position_ids=None, unsqueeze_dim=1):
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)

    def rotate_half(x):
        half = x.shape[-1] // 2
        return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def liger_fused_add_rms_norm(X, R, W, eps, offset=0.0, casting_mode="llama", in_place=True):
    s = X + R
    return F.rms_norm(s, (s.shape[-1],), W, eps), s


def liger_poly_norm(X, W, B, eps=1e-6, in_place=True):
    def norm(u):
        return u * torch.rsqrt(u.pow(2).mean(-1, keepdim=True) + eps)

    return W[0] * norm(X**3) + W[1] * norm(X**2) + W[2] * norm(X) + B


def liger_fused_linear_cross_entropy(input, weight, target, bias=None, ce_weight=None, ignore_index=-100,  # noqa: A002
                                     lse_square_scale=0.0, label_smoothing=0.0, reduction="mean", softcap=None,
                                     return_z_loss=False, accum_dtype=None, use_token_scaling=False,
                                     return_token_accuracy=False, return_predicted_tokens=False):
    return F.cross_entropy((input @ weight.T).float(), target, ignore_index=ignore_index, reduction=reduction)


def liger_fused_linear_jsd(student_input, student_weight, teacher_input, teacher_weight, shift_labels=None,
                           jsd_beta=0.5, ignore_index=-100, temperature=1.0, accum_dtype=None):
    log_q = ((student_input @ student_weight.T).float() / temperature).log_softmax(-1)
    log_p = ((teacher_input @ teacher_weight.T).float() / temperature).log_softmax(-1)
    mix = jsd_beta * log_p.exp() + (1 - jsd_beta) * log_q.exp()
    per_element = jsd_beta * log_p.exp() * log_p + (1 - jsd_beta) * log_q.exp() * log_q - mix * mix.log()
    return per_element.sum() / log_q.shape[0]  # Liger's kernel's form: Σ β·P·log P + (1-β)·Q·log Q - Mx·log Mx


def liger_modulated_rms_norm(X, W, scale, shift=None, eps=1e-6, offset=0.0, casting_mode="llama", in_place=True):
    y = F.rms_norm(X, (X.shape[-1],), W, eps) * (1 + scale[:, None, :])
    return y if shift is None else y + shift[:, None, :]


LIGER = {f.__name__.removeprefix("liger_"): f for f in (liger_layer_norm, liger_group_norm, liger_dyt,
                                                         liger_cross_entropy, liger_kl_div, liger_rope,
                                                         liger_fused_add_rms_norm, liger_poly_norm,
                                                         liger_fused_linear_cross_entropy, liger_fused_linear_jsd,
                                                         liger_modulated_rms_norm)}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(LIGER))
def test_entries_with_ligers_signatures_pass_the_harness_check(name, dtype):
    op, dims = OPS[name], dims_of(name)
    v = Variant(f"liger_{name}", name, "python", "k", ("k.py",), Binding("python", f"k.py:liger_{name}", returns=True),
                (dtype,), (Shape(dims),), layout=op.LAYOUTS[0])
    call = python_entry.wrap(LIGER[name], v, op, dims, True)
    figures = child.check(call, op, v, dims, torch_dtype(dtype), "cpu", seed=4)
    assert figures["passed"], figures
    assert figures["out_shape"] == list(op.output_shape(dims))
    assert figures["repeat_mismatch"] == 0  # the re-run of a tuple-returning entry is compared too


def test_a_tuple_entry_with_one_output_wrong_fails_the_check():
    op, dims = OPS["rope"], dims_of("rope")
    v = Variant("r", "rope", "python", "k", ("k.py",), Binding("python", "k.py:r", returns=True), ("bf16",),
                (Shape(dims),), layout="bhsd")

    def k_not_rotated(q, k, cos, sin):
        return liger_rope(q, k, cos, sin)[0], k

    figures = child.check(python_entry.wrap(k_not_rotated, v, op, dims, True), op, v, dims, torch.bfloat16, "cpu", seed=1)
    assert not figures["passed"] and "returned" not in figures  # values wrong, shape and dtype right


# -- entry names -----------------------------------------------------------------------------------

@pytest.mark.parametrize("entry,op", [
    ("liger_layer_norm", "layer_norm"), ("layernorm_fwd", "layer_norm"), ("_layer_norm_fwd_fused", "layer_norm"),
    ("FusedLayerNorm", "layer_norm"), ("liger_fused_add_rms_norm", "fused_add_rms_norm"),
    ("fused_add_rms_norm", "fused_add_rms_norm"), ("liger_rms_norm", "rms_norm"), ("LigerRMSNormFunction", "rms_norm"),
    ("fast_rms_layernorm", "rms_norm"), ("my_softmax", "softmax"), ("triton_softmax_kernel", "softmax"),
    ("liger_log_softmax", "log_softmax"), ("liger_swiglu", "swiglu"), ("LigerSiLUMulFunction", "swiglu"),
    ("liger_geglu", "geglu"), ("liger_group_norm", "group_norm"), ("liger_cross_entropy", "cross_entropy"),
    ("fast_cross_entropy_loss", "cross_entropy"), ("LigerKLDIVLoss", "kl_div"), ("liger_jsd", "jsd"),
    ("liger_tvd", "tvd"), ("liger_rope", "rope"), ("liger_rotary_pos_emb", "rope"), ("liger_dyt", "dyt"),
    ("liger_relu_squared", "relu_squared"), ("liger_sparsemax", "sparsemax"), ("liger_poly_norm", "poly_norm"),
    ("cuda_gelu", "gelu"), ("silu", "silu"), ("matmul", "gemm"), ("flash_attn_func", "attention"),
    # a weight in the name's op: the fused loss heads, not cross_entropy or jsd
    ("liger_fused_linear_cross_entropy", "fused_linear_cross_entropy"),
    ("LigerFusedLinearCrossEntropyFunction", "fused_linear_cross_entropy"),
    ("fused_linear_cross_entropy", "fused_linear_cross_entropy"), ("linear_cross_entropy", "fused_linear_cross_entropy"),
    ("liger_fused_linear_jsd", "fused_linear_jsd"), ("LigerFusedLinearJSDFunction", "fused_linear_jsd"),
    ("liger_modulated_rms_norm", "modulated_rms_norm"), ("LigerModulatedRMSNormFunction", "modulated_rms_norm"),
    # elementwise arithmetic, as pytorch/extension-cpp's TORCH_LIBRARY operators are named
    ("mymul", "elementwise_mul"), ("my_mul", "elementwise_mul"), ("vector_add", "elementwise_add"), ("add", "elementwise_add"),
])
def test_entry_names_map_to_their_op(entry, op):
    assert op_for_entry_name(entry) == op


@pytest.mark.parametrize("entry", [
    "torch_softmax", "naive_layer_norm", "softmax_ref", "rms_norm_reference",  # references, not entries
    "rms_norm_bwd", "layer_norm_backward",  # not the forward op
    "liger_qwen2vl_mrope", "liger_fused_neighborhood_attention", "geglu_exact", "flash_attn_varlen_func", "helper", "",
])
def test_names_that_are_no_builtin_op(entry):
    assert op_for_entry_name(entry) is None


def test_every_op_has_entry_names_and_a_digest_of_its_own():
    names = {}
    for op, module in OPS.items():
        assert module.ENTRY_NAMES and all(n == n.lower() for n in module.ENTRY_NAMES), op
        assert op_for_entry_name(op) == op  # its own name is one of its entry names
        for n in module.ENTRY_NAMES:
            assert names.setdefault(n, op) == op, f"{n!r} names both {names[n]} and {op}"
    assert len({op_source_digest(op) for op in OPS}) == len(OPS)


def test_drafts_know_every_ops_default_sizes_and_tensor_axes():
    from pipeline.onboarding.decide.sizes import DEFAULT_SHAPES, TENSOR_DIMS

    for op, module in OPS.items():
        assert DEFAULT_SHAPES[op] and all(len(s) == len(module.DIMS) for s in DEFAULT_SHAPES[op]), op
        for tensor, axes in TENSOR_DIMS.get(op, {}).items():
            assert tensor.split(":")[0] in (*module.INPUTS, module.OUTPUT) and set(axes) <= {*module.DIMS, "n"}, op
    # drawn inputs have the axes the table gives them
    for op in ("layer_norm", "group_norm", "cross_entropy", "rope", "dyt", "fused_linear_cross_entropy",
               "fused_linear_jsd", "modulated_rms_norm"):
        _, inputs = draw(op, "fp32")
        for tensor, axes in TENSOR_DIMS[op].items():
            if tensor in inputs:
                assert list(inputs[tensor].shape) == [dims_of(op)[a] for a in axes], (op, tensor)
