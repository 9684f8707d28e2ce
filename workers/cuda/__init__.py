"""The NVIDIA (CUDA) backend's node-side pieces: toolchain discovery and nvcc command lines,
build-time resource usage, SASS histograms, Nsight Compute output and its metric table, and the
launchers for raw kernels and pybind11 modules."""
