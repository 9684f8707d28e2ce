"""rmsnorm: Y = X / sqrt(mean(X², last dim) + eps) · W — an op this repository declares itself.

flopwatch reads the constants below without running this file; the functions run only inside
the job's sandboxed child. The contract is the built-in ops' (docs/ops.md).
"""

import torch

INPUTS = ("X", "W")
OUTPUT = "Y"
DIMS = ("M", "N")
SCALARS = ("eps",)
TOLERANCE = {"fp32": (1e-5, 1e-4), "fp16": (2e-3, 1e-2)}
PEER_NAME = "torch.nn.functional.rms_norm"
EPS = 1e-6


def scalars(dims):
    return {"eps": EPS}


def flops(dims):
    """Per element: square, add (the mean), multiply by the inverse root, multiply by W."""
    return 4.0 * dims["M"] * dims["N"]


def bytes_moved(dims, itemsize):
    return float(itemsize * (2 * dims["M"] * dims["N"] + dims["N"]))


def output_shape(dims):
    return (dims["M"], dims["N"])


def make_inputs(dims, dtype, layout, device, generator):
    x = torch.randn((dims["M"], dims["N"]), generator=generator, device=generator.device)
    w = torch.rand((dims["N"],), generator=generator, device=generator.device) + 0.5
    return {"X": x.to(dtype=dtype, device=device), "W": w.to(dtype=dtype, device=device)}


def reference(inputs, layout, alpha=1.0, beta=0.0, c_init=None):
    x, w = inputs["X"].double(), inputs["W"].double()
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + EPS) * w


def peer(inputs, out, layout, alpha=1.0, beta=0.0):
    x = inputs["X"]
    out.copy_(torch.nn.functional.rms_norm(x, (x.shape[-1],), inputs["W"], eps=EPS))
