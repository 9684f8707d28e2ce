"""torch's own copy as the peer of the copy kernels."""

import torch


def copy(src: torch.Tensor, dst: torch.Tensor) -> None:
    dst.copy_(src)
