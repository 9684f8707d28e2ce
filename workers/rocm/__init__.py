"""AMD ROCm (gfx942) node-side pieces: HIP builds, their static analysis, rocprofv3 and its metric formulas.
May import: workers.core."""
