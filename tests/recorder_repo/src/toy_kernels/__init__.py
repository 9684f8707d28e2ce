"""toy_kernels: plain-torch stand-ins for a kernel package."""

from toy_kernels.ops import scaled_add  # noqa: F401 - re-exported, bound before anyone patches ops
