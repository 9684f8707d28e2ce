"""Op contracts: what a variant computes, how much work it is, and the torch reference.
May import: workers.core.

Each op is a module exposing the same functions (see `gemm.py`); the table below is the
whole registry of built-in ops, written out so a newcomer sees every op in one place. A
benchmarked repository may declare more ops of its own (`workers/ops/repo.py`): those travel
with their variants (`Variant.repo_op`) and are loaded only inside the job's child.
"""

from __future__ import annotations

import ast
import hashlib
import re
from pathlib import Path
from types import ModuleType

from workers.ops import (attention, attention_causal, copy, cross_entropy, dyt, elementwise_add, elementwise_mul,
                         fused_add_rms_norm, fused_linear_cross_entropy, fused_linear_jsd, gelu, geglu, gemm,
                         group_norm, jsd, kl_div, layer_norm, log_softmax, modulated_rms_norm, poly_norm, relu_squared,
                         rms_norm, rope, silu, softmax, sparsemax, swiglu, tvd)
from workers.ops.repo import RepoOp

OPS: dict[str, ModuleType] = {
    "gemm": gemm,
    "copy": copy,
    "attention": attention,
    "attention_causal": attention_causal,
    "softmax": softmax,
    "rms_norm": rms_norm,
    "swiglu": swiglu,
    # Elementwise arithmetic (FlagGems' add and mul; the first kernel of every extension tutorial).
    "elementwise_add": elementwise_add,
    "elementwise_mul": elementwise_mul,
    # The ops of LLM blocks that Liger-Kernel, Unsloth, FlagGems and KernelBench cover; inputs in
    # the order of Liger's functional entries (`liger_<op>(*inputs, *scalars)`).
    "layer_norm": layer_norm,
    "group_norm": group_norm,
    "fused_add_rms_norm": fused_add_rms_norm,
    "modulated_rms_norm": modulated_rms_norm,
    "poly_norm": poly_norm,
    "dyt": dyt,
    "gelu": gelu,
    "geglu": geglu,
    "silu": silu,
    "relu_squared": relu_squared,
    "log_softmax": log_softmax,
    "sparsemax": sparsemax,
    "cross_entropy": cross_entropy,
    "fused_linear_cross_entropy": fused_linear_cross_entropy,
    "kl_div": kl_div,
    "jsd": jsd,
    "fused_linear_jsd": fused_linear_jsd,
    "tvd": tvd,
    "rope": rope,
}

DTYPES = ("fp32", "fp16", "bf16")


def get_op(name: str) -> ModuleType:
    try:
        return OPS[name]
    except KeyError:
        raise KeyError(f"unknown op {name!r}; known ops: {sorted(OPS)}") from None


def for_variant(variant, resolve=None):
    """The op a variant computes: the built-in module, or the repository's op loaded from the
    source the variant carries. The latter runs the repository's code: call it in the job's
    child only (the driver reads repository ops with `repo.parse_op`, never runs them).
    `resolve(call, key, folder)`: imports a `[reference]` callable from the job's build (the
    job hands in `workers.bindings.python_entry.resolve` for its artifact)."""
    if variant.repo_op:
        from workers.ops import challenge, problem, reference, repo

        if challenge.is_challenge(variant.repo_op):
            return challenge.load(challenge.ChallengeOp.from_dict(variant.repo_op))
        if problem.is_problem(variant.repo_op):
            return problem.load(problem.ProblemOp.from_dict(variant.repo_op))
        if reference.is_reference(variant.repo_op):
            spec = reference.ReferenceOp.from_dict(variant.repo_op)
            return reference.load(spec, resolve, OPS.get(spec.peer_op) if spec.peer_op else None)
        return repo.load(RepoOp.from_dict(variant.repo_op))
    return get_op(variant.op)


# Words around an op's name in entry names that say nothing about what it computes (as whole
# words: `liger_layer_norm`, `layernorm_fwd`, `LigerRMSNormFunction`, `_layer_norm_fwd_fused`).
# `fused` is one too (apex's `FusedLayerNorm`), tried both ways so that `fused_add_rms_norm`
# keeps it. `torch_` / `naive_` / `ref_` and `_ref` mark a repository's reference, not an entry.
_ENTRY_PREFIXES = ("liger", "fast", "triton", "cuda", "my", "fused", "flag", "gems", "apex", "custom")
_ENTRY_SUFFIXES = ("fwd", "forward", "kernel", "fn", "func", "function", "op", "impl", "fused", "triton", "cuda",
                   "module")
_REFERENCE_WORDS = ("torch", "naive", "ref", "reference")
_BACKWARD_WORDS = ("bwd", "backward", "grad", "vjp")


def op_for_entry_name(name: str) -> str | None:
    """The built-in op a repository's entry computes, judged by its name: the op with an
    `ENTRY_NAMES` member equal to the name once the words above are stripped (as words, in any
    number from either end; CamelCase read as words; `layer_norm` and `layernorm` alike). The
    longest match wins (`liger_fused_add_rms_norm` is fused_add_rms_norm, not rms_norm;
    `liger_fused_linear_cross_entropy`, which takes the head's weight, is
    fused_linear_cross_entropy, not cross_entropy). None for a reference (`torch_softmax`,
    `naive_gelu`, `softmax_ref`), a backward kernel (`rms_norm_bwd`) or a name that is no op's
    (`liger_qwen2vl_mrope`)."""
    snake = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name))
    words = [w for w in snake.lower().split("_") if w]
    if words and len(words[0]) > 2 and words[0].startswith("my"):
        # PyTorch's extension tutorials name operators mymul, myadd_out: "my" glued on
        words = ["my", words[0][2:], *words[1:]]
    if not words or words[0] in _REFERENCE_WORDS or words[-1] in _REFERENCE_WORDS[2:] \
            or any(w in _BACKWARD_WORDS for w in words):
        return None
    forms = set()
    for start in range(len(words)):
        for end in range(len(words), start, -1):
            forms.add("".join(words[start:end]))
            if end - 1 <= start or words[end - 1] not in _ENTRY_SUFFIXES:
                break
        if words[start] not in _ENTRY_PREFIXES:
            break
    best = max(((len(entry), op) for op, module in OPS.items() for entry in getattr(module, "ENTRY_NAMES", ())
                if entry.replace("_", "") in forms), default=None)
    return best[1] if best else None


BUILTIN_PEER_BACKEND = "builtin"  # the backend of the peer flopwatch adds (`pipeline.run.peers`)


def returns_peer(op) -> bool:
    """Whether the op's peer returns its output (`peer_returns(inputs, layout)`, as torch's
    functional calls and a problem's Model do) rather than writing into one (`peer(...)`)."""
    return hasattr(op, "peer_returns") and not hasattr(op, "peer")


def peer_label(row: dict) -> str:
    """How a peer row (a result or variant as a dict) is labelled on pages and in the terminal:
    "peer", or for the one flopwatch added, "built-in peer: <what it runs>"."""
    if row.get("backend") != BUILTIN_PEER_BACKEND:
        return "peer"
    module = OPS.get(row.get("op") or "")
    return "built-in peer: " + (module.PEER_NAME if module else "the op's peer()")


def torch_dtype(name: str):
    import torch

    return {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[name]


# Bytes per element of each data type name: what a job's byte counts need, known without
# importing torch (a slot's actor never does: its start is on a fresh node's path to the first
# job, beside its warm runner's own `import torch`).
DTYPE_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2}


def dtype_bytes(name: str) -> int:
    return DTYPE_BYTES[name]


def scalars(op, dims: dict) -> dict:
    """The op's named scalar arguments for this shape (attention's `scale`), or none."""
    fn = getattr(op, "scalars", None)
    return dict(fn(dims)) if fn else {}


def static_work(variant, dims: dict) -> tuple[float, float]:
    """(FLOPs, bytes at 4 bytes per element) the driver may know without running anything: a
    built-in op's count; (0, 0) for a repository op, whose count comes back from the child."""
    if variant.repo_op:
        return 0.0, 0.0
    op = get_op(variant.op)
    return float(op.flops(dims)), float(op.bytes_moved(dims, 4))


def op_source_digest(op: str | RepoOp | dict) -> str:
    """A digest of everything that defines an op's harness: inputs, reference, work counts,
    tolerances, peer. For a built-in op, the text of its module and of the op modules it
    imports (`attention_causal` is `attention` with a mask); for a repository op (a `RepoOp`,
    or its dict as a variant carries it), the text of its `op.py`; for a problem, its file; for
    a `[reference]`, the table and its file's text (`ReferenceOp.digest`); for a challenge
    problem, task.yml and the files it lists (`ChallengeOp.digest`) — computable on the driver
    from the checkout, since parsing never runs it."""
    if isinstance(op, dict):
        from workers.ops import challenge, problem, reference

        op = (challenge.ChallengeOp.from_dict(op) if challenge.is_challenge(op)
              else problem.ProblemOp.from_dict(op) if problem.is_problem(op)
              else reference.ReferenceOp.from_dict(op) if reference.is_reference(op) else RepoOp.from_dict(op))
    if isinstance(op, RepoOp):
        return "repo:" + op.digest
    if not isinstance(op, str):  # a problem file, a [reference] table, a challenge folder
        return f"{op.kind}:" + op.digest
    module = get_op(op)
    h = hashlib.sha256()
    for path in _op_files(Path(module.__file__)):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return "builtin:" + h.hexdigest()


def _op_files(path: Path) -> list[Path]:
    """The op module and the sibling op modules it imports (read, not run)."""
    files = [path]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module == "workers.ops":
            files += [path.parent / f"{alias.name}.py" for alias in node.names
                      if (path.parent / f"{alias.name}.py").is_file()]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("workers.ops."):
            # `from workers.ops.rows import ...`: the contract an op shares with its kind
            shared = path.parent / f"{node.module.split('.')[2]}.py"
            files += [shared] if shared.is_file() else []
    return sorted(set(files))
