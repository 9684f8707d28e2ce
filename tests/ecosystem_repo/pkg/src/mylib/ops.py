import torch


@torch.library.custom_op("mylib_test::swiglu", mutates_args=())
def swiglu(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """A torch.library op, called as torch.ops.mylib_test.swiglu(a, b)."""
    return torch.nn.functional.silu(a) * b
