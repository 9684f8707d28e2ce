"""What Triton's JIT compiled and chose while a job's entry ran: every `@triton.jit` kernel the
call launched (registers, spills, shared memory, warps, stages, as Triton loaded it on this
GPU) and, for an autotuned kernel, the configuration its autotuner picked for this shape.

A Triton module as repositories write it (Liger-Kernel's `liger_rms_norm` launching
`_rms_norm_forward_kernel` with a block size it computes) needs no `[triton]` table: this is its
analysis. Recorded during the job's first check only (the first call compiles and autotunes),
by wrapping Triton's `JITFunction.run` and `Autotuner.run` for that call; the timing loop runs
unwrapped. The figures become rows of the result's `resources`, in the shape of the
ahead-of-time rows (`kernel[config]@arch`), plus `autotune`: kernel → the chosen config.
"""

from __future__ import annotations

import contextlib


def _config_text(config) -> str:
    """`BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=3` for a triton.Config."""
    parts = [f"{k}={v}" for k, v in sorted((getattr(config, "kwargs", None) or {}).items())]
    for key in ("num_warps", "num_stages", "num_ctas", "maxnreg"):
        value = getattr(config, key, None)
        if value is not None and not (key == "num_ctas" and value == 1):
            parts.append(f"{key}={value}")
    return ", ".join(parts)


def kernel_row(kernel, constexprs: dict) -> tuple[str, dict]:
    """(label, row) of one compiled kernel, as the analysis of a build shows Triton kernels."""
    meta = kernel.metadata
    target = getattr(meta, "target", None)
    arch = getattr(target, "arch", "")
    arch = f"sm_{arch}" if isinstance(arch, int) else str(arch)
    config = ",".join(f"{k}={v}" for k, v in sorted(constexprs.items()) if isinstance(v, (int, float, bool, str)))
    label = f"{getattr(meta, 'name', '?')}[{config}]@{arch}" if config else f"{getattr(meta, 'name', '?')}@{arch}"
    row = {"arch": arch, "registers": getattr(kernel, "n_regs", None), "spill_stores": getattr(kernel, "n_spills", None),
           "smem_bytes": getattr(meta, "shared", None), "num_warps": getattr(meta, "num_warps", None),
           "num_stages": getattr(meta, "num_stages", None), "jit": True}
    return label, {k: v for k, v in row.items() if v is not None}


@contextlib.contextmanager
def recording():
    """Within the block, note what Triton compiles and chooses; yields the dict it fills
    (`{"vendor": "triton", "kernels": {...}, "autotune": {...}}`, empty without Triton)."""
    found: dict = {"vendor": "triton", "kernels": {}, "autotune": {}}
    try:
        from triton.runtime.autotuner import Autotuner
        from triton.runtime.jit import JITFunction
    except ImportError:
        yield found
        return
    jit_run, tune_run = JITFunction.run, Autotuner.run

    def run(self, *args, **kwargs):
        kernel = jit_run(self, *args, **kwargs)
        if kernel is not None and not kwargs.get("warmup"):
            names = {self.arg_names[i] for i in getattr(self, "constexprs", ()) if i < len(self.arg_names)}
            constexprs = {k: v for k, v in kwargs.items() if k in names}
            try:
                label, row = kernel_row(kernel, constexprs)
                found["kernels"][label] = row
            except Exception:  # noqa: BLE001, S110 - a Triton without these attributes: the run matters, not the note
                pass
        return kernel

    def tune(self, *args, **kwargs):
        out = tune_run(self, *args, **kwargs)
        best = getattr(self, "best_config", None)
        if best is not None:
            name = getattr(getattr(self, "base_fn", None), "__name__", None) or getattr(self.fn, "__name__", "?")
            found["autotune"][name] = _config_text(best)
        return out

    JITFunction.run, Autotuner.run = run, tune
    try:
        yield found
    finally:
        JITFunction.run, Autotuner.run = jit_run, tune_run


def merge(resources: dict, jit: dict) -> dict:
    """A build's analysis with the run's JIT rows added (the AOT rows, where present, stay)."""
    if not jit or not (jit.get("kernels") or jit.get("autotune")):
        return resources
    merged = dict(resources or {})
    merged.setdefault("vendor", "triton")
    merged["kernels"] = {**(merged.get("kernels") or {}), **jit.get("kernels", {})}
    if jit.get("autotune"):
        merged["autotune"] = {**(merged.get("autotune") or {}), **jit["autotune"]}
    return merged
