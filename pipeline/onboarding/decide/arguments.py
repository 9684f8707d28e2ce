"""The names kernels and entries give each op's arguments (lower case, without `d_` / `p_`
prefixes and `_ptr` suffixes), the words of a name that hint at an op, and a kernel's
parameters read as op arguments. Tables and pure functions."""

from __future__ import annotations

import re

from pipeline.onboarding.source.records import Kernel
from workers.ops import OPS

# The names kernels give an op's arguments (lower case, without d_/p_ prefixes and _ptr suffixes).
ALIASES: dict[str, dict[str, tuple[str, ...]]] = {
    "gemm": {"A": ("a", "mat_a", "input_a", "lhs", "x"), "B": ("b", "mat_b", "input_b", "rhs", "w", "weight"),
             "C": ("c", "d", "out", "output", "mat_c", "result", "y"), "M": ("m",), "N": ("n",), "K": ("k",),
             "alpha": ("alpha",), "beta": ("beta",)},
    "attention": {"Q": ("q", "query"), "K": ("k", "key"), "V": ("v", "value"), "O": ("o", "out", "output"),
                  "B": ("b", "batch", "batch_size", "bs"), "H": ("h", "heads", "num_heads", "nheads", "n_heads"),
                  "S": ("s", "n", "seq", "seqlen", "seq_len", "l", "n_ctx", "len", "n_seq"),
                  "D": ("d", "head_dim", "headdim", "dim", "hd", "d_head"),
                  "scale": ("scale", "softmax_scale", "sm_scale")},
    "softmax": {"X": ("x", "in", "input", "src", "inp", "a"), "Y": ("y", "out", "output", "dst", "b"),
                "M": ("m", "rows", "n_rows", "nrows", "batch"), "N": ("n", "cols", "n_cols", "ncols", "dim", "d")},
    "copy": {"src": ("src", "in", "input", "a", "x"), "dst": ("dst", "out", "output", "b", "y"),
             "n": ("n", "size", "count", "len", "numel", "num")},
}
ALIASES["rms_norm"] = {"X": ("x", "in", "input", "inp", "hidden_states"), "W": ("w", "weight", "gamma", "g"),
                       "Y": ("y", "out", "output", "dst"), "M": ("m", "rows", "n_rows", "nrows", "batch"),
                       "N": ("n", "cols", "n_cols", "ncols", "dim", "hidden", "hidden_size"),
                       "eps": ("eps", "epsilon", "variance_epsilon")}
ALIASES["swiglu"] = {"A": ("a", "gate", "x"), "B": ("b", "up", "y"), "Y": ("c", "out", "output", "y"),
                     "M": ("m", "rows", "n_rows"), "N": ("n", "cols", "n_cols")}
ALIASES["attention_causal"] = ALIASES["attention"]
NAME_HINTS = (("attention_causal", ("causal",)), ("attention", ("attn", "attention", "flash", "sdpa")),
              ("rms_norm", ("rms", "rmsnorm", "rms_norm")), ("swiglu", ("swiglu", "silu_mul", "siluandmul")),
              ("softmax", ("softmax",)), ("copy", ("copy", "memcpy")),
              ("gemm", ("gemm", "matmul", "mm", "sgemm", "hgemm", "dot")))


def norm_name(name: str) -> str:
    """A parameter's name as the tables write it: lower case, without `d_` / `p_` prefixes and
    `_ptr` suffixes."""
    n = name.lower()
    n = re.sub(r"^(d_|p_|g_|dev_|gpu_)", "", n)
    return re.sub(r"(_ptr|_d|_p|_gmem|_global|_dev|ptr)$", "", n) or n


def args_per_param(kernel: Kernel, args) -> list[str | None]:
    """The op argument of each parameter: `args` when it names one per parameter (None for a
    parameter that is none: `Guess.per_param`), else nothing known."""
    if len(args) == len(kernel.params):
        return list(args)
    return [None] * len(kernel.params)


def default_order(op: str, returns: bool) -> list[str]:
    """The positional arguments flopwatch passes without `binding.args`."""
    module = OPS[op]
    return [*module.INPUTS, *(getattr(module, "SCALARS", ()) if returns else (module.OUTPUT,))]


def leading(mapped: list[str]) -> list[str]:
    """The op arguments of the leading parameters that map (optional ones after keep defaults)."""
    out = []
    for m in mapped:
        if not m:
            break
        out.append(m)
    return out
