"""From a variant's `[triton]` table to the compilations its build makes: one per arch, input
dtype and (for `@triton.autotune` kernels) configuration.

Pure: the kernel is described by its parameter names, which of them are `tl.constexpr`, and
its autotune configurations as plain dicts, so every rule here is testable without Triton.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# flopwatch dtype → Triton's pointer element type
TRITON_DTYPES = {"fp32": "fp32", "fp16": "fp16", "bf16": "bf16"}
# What `triton.compile` accepts as options; other autotune kwargs that are not kernel
# parameters (AMD's waves_per_eu, matrix_instr_nonkdim, kpack) are passed through as well.
_OPTION_KEYS = ("num_warps", "num_stages", "num_ctas", "maxnreg")
_SM = re.compile(r"^sm_(\d)(\d)(a?)$")
_GFX = re.compile(r"^gfx(9\d\w|1\d{3})$")


class SpecError(ValueError):
    """The `[triton]` table does not describe a compilable kernel; names the key."""


@dataclass(frozen=True)
class Target:
    backend: str  # Triton's backend name: "cuda" or "hip"
    arch: int | str  # compute capability (90) or gfx name
    warp_size: int
    label: str  # the manifest's spelling: sm_90a, gfx942

    @property
    def vendor(self) -> str:
        return "nvidia" if self.backend == "cuda" else "amd"


def parse_arch(arch: str) -> Target:
    """`sm_90a` → Triton's cuda target 90 (Triton itself picks sm_90a for 90 and up);
    `gfx942` → hip target gfx942 with wave64."""
    if m := _SM.match(arch):
        return Target("cuda", int(m.group(1) + m.group(2)), 32, arch)
    if _GFX.match(arch):
        return Target("hip", arch, 32 if arch.startswith("gfx1") else 64, arch)
    raise SpecError(f"arches: {arch!r} is not a Triton target (sm_XX[a] or gfxNNN)")


@dataclass(frozen=True)
class CompileJob:
    """One `triton.compile` call: what to compile and the name its analysis row gets."""

    label: str
    arch: str
    dtype: str
    signature: dict[str, str]
    constexprs: dict[str, object]
    attrs: dict[int, list] = field(default_factory=dict)  # parameter index → [["tt.divisibility", 16]]
    options: dict[str, object] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"label": self.label, "arch": self.arch, "dtype": self.dtype, "signature": self.signature,
                "constexprs": self.constexprs, "attrs": {str(k): v for k, v in self.attrs.items()},
                "options": self.options}


def compile_jobs(table: dict, kernel_name: str, arg_names: list[str], constexpr_names: set[str],
                 configs: list[dict] | None, arches: list[str], dtypes: list[str]) -> list[CompileJob]:
    """Every compilation the build makes. `table` is the manifest's `[triton]` table:
    `signature` (types by parameter, `{dtype}` standing for each of the variant's dtypes;
    unlisted non-constexpr parameters are `i32`), `constexprs`, `num_warps`, `num_stages`,
    `divisible_by_16` (integer parameters Triton's JIT would see as multiples of 16).
    `configs` are the autotune configurations ({"kwargs", "num_warps", ...}), or None."""
    given_sig = dict(table.get("signature") or {})
    unknown = sorted(set(given_sig) - set(arg_names))
    if unknown:
        raise SpecError(f"triton.signature: {unknown} are not parameters of {kernel_name} ({arg_names})")
    aligned = list(table.get("divisible_by_16") or [])
    for name in aligned:
        if name not in arg_names or name in constexpr_names:
            raise SpecError(f"triton.divisible_by_16: {name!r} is not a runtime parameter of {kernel_name}")
    base_const = dict(table.get("constexprs") or {})
    base_opts = {k: table[k] for k in _OPTION_KEYS if k in table}
    # A point of a swept variant (`[params]`): its values for the kernel's constexprs and
    # launch options are what the entry passes at this point.
    point = dict(table.get("params") or {})
    base_const.update({k: v for k, v in point.items() if k in constexpr_names})
    base_opts.update({k: v for k, v in point.items() if k in _OPTION_KEYS})
    variants = configs if configs else [{"kwargs": {}, **base_opts}]
    jobs = []
    for arch in arches:
        parse_arch(arch)  # an unknown arch is a SpecError before anything compiles
        for dtype in dtypes:
            signature = {}
            attrs: dict[int, list] = {}
            for i, name in enumerate(arg_names):
                if name in constexpr_names:
                    signature[name] = "constexpr"
                    continue
                ty = str(given_sig.get(name, "i32")).replace("{dtype}", TRITON_DTYPES[dtype])
                signature[name] = ty
                # torch allocations are 256-byte aligned, so the JIT marks every tensor argument
                # divisible by 16; the ahead-of-time build must do the same to emit the same code.
                if ty.startswith("*") or name in aligned:
                    attrs[i] = [["tt.divisibility", 16]]
            for cfg in variants:
                kwargs = dict(cfg.get("kwargs") or {})
                constexprs = {**base_const, **{k: v for k, v in kwargs.items() if k in constexpr_names}}
                missing = sorted(constexpr_names - set(constexprs))
                if missing:
                    raise SpecError(f"triton.constexprs: {missing} of {kernel_name} have no value "
                                    f"(give them in [triton].constexprs or the autotune configs)")
                options = {**base_opts, **{k: cfg[k] for k in _OPTION_KEYS if cfg.get(k) is not None},
                           **{k: v for k, v in kwargs.items() if k not in arg_names}}
                tag = _config_tag(constexprs, options) if configs else ""
                label = f"{kernel_name}[{dtype}{',' + tag if tag else ''}]@{arch}"
                jobs.append(CompileJob(label, arch, dtype, signature, constexprs, attrs, options))
    return jobs


def _config_tag(constexprs: dict, options: dict) -> str:
    """`BLOCK_M=128,BLOCK_N=64,w4,s3`: tells autotune configurations apart in a table."""
    parts = [f"{k}={v}" for k, v in constexprs.items() if k.isupper()]
    if "num_warps" in options:
        parts.append(f"w{options['num_warps']}")
    if "num_stages" in options:
        parts.append(f"s{options['num_stages']}")
    return ",".join(parts)


def describe_kernel(obj) -> tuple[object, list[dict] | None]:
    """The `@triton.jit` function under any `@triton.autotune` / `@triton.heuristics` wrappers,
    and the autotune configurations as plain dicts (None for a plain kernel)."""
    configs = None
    seen = 0
    # A JITFunction has `params`; the wrappers (Autotuner, Heuristics) have `fn` and no `params`.
    while hasattr(obj, "fn") and not hasattr(obj, "params") and seen < 8:
        if configs is None and getattr(obj, "configs", None):
            configs = [{"kwargs": dict(c.kwargs), **{k: getattr(c, k, None) for k in _OPTION_KEYS}}
                       for c in obj.configs]
        obj, seen = obj.fn, seen + 1
    if not hasattr(obj, "params") or not hasattr(obj, "arg_names"):
        raise SpecError(f"triton.kernel: {obj!r} is not a @triton.jit function")
    return obj, configs


def constexpr_names(fn) -> set[str]:
    return {p.name for p in fn.params if p.is_constexpr}
