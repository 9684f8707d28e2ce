"""Triton kernels compiled ahead of time for an explicit target (no GPU needed).
May import: workers.bindings."""
