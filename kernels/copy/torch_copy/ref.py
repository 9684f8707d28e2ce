"""torch's own copy as the peer of the copy kernels, done by an SM kernel.

`dst.copy_(src)` of two contiguous tensors of one dtype on one GPU is not a kernel: torch turns
it into cudaMemcpyAsync / hipMemcpyAsync (aten/src/ATen/native/cuda/Copy.cu, `memcpy_eligible`),
which the copy engine carries out, so Nsight Compute and rocprofv3 see no kernel inside the timed
range and the peer row had no counters. torch's elementwise copy kernel only runs for copies
that are not contiguous after dimension coalescing, which a plain n-element copy never is. So
the peer multiplies by one into dst: torch's vectorised elementwise kernel with exactly a copy's
traffic (one read and one write of each word, 16-byte accesses), bit-identical to the source
for every non-NaN value (x·1 = x in IEEE 754, −0 and ±inf included). It is also the fairer
yardstick: the copy variants it is compared with are SM kernels too. See docs/nvidia.md.
"""

import torch


def copy(src: torch.Tensor, dst: torch.Tensor) -> None:
    torch.mul(src, 1, out=dst)
