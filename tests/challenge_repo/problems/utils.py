"""Helpers the problems of this folder share, as the challenge format keeps them one folder up
from each problem (task.yml lists this file as `utils.py`)."""

import torch


def default_device() -> torch.device:
    """Where inputs are made: torch's default device when a caller set one, else the GPU when
    there is one."""
    here = torch.empty(0).device
    if here.type != "cpu" or not torch.cuda.is_available():
        return here
    return torch.device("cuda")


def mismatches(received: torch.Tensor, expected: torch.Tensor, rtol: float, atol: float, shown: int = 4) -> list[str]:
    """What differs between two tensors, elementwise, as |received - expected| > atol + rtol * |expected|."""
    if received.shape != expected.shape:
        return [f"shape {list(received.shape)} instead of {list(expected.shape)}"]
    got, want = received.double(), expected.double()
    bad = ((got - want).abs() > atol + rtol * want.abs()) | (got.isnan() != want.isnan())
    count = int(bad.sum())
    if not count:
        return []
    where = bad.nonzero()[:shown].tolist()
    listed = "; ".join(f"at {tuple(i)}: {got[tuple(i)].item():.6g} instead of {want[tuple(i)].item():.6g}"
                       for i in where)
    return [f"{count} of {bad.numel()} elements differ", listed]


def make_match_reference(reference, rtol: float = 1e-5, atol: float = 1e-8):
    """check_implementation(data, output) -> "" when the output matches reference(data), else why not."""
    def check(data, output) -> str:
        found = mismatches(output, reference(data), rtol, atol)
        return "output differs from the reference: " + "; ".join(found) if found else ""
    return check
