"""Triton kernels compiled ahead of time for an explicit target (no GPU needed) and analysed
with the same parsers as nvcc and hipcc output."""
