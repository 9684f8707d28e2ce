"""AMD ROCm (gfx942: MI300X/MI325X) backend, node-side pieces: toolchain discovery, HIP builds
and their static analysis (compiler remarks, code-object notes, disassembly, occupancy), and
rocprofv3 command lines, output parsing and metric formulas."""
