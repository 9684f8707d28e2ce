"""NVIDIA's node-side pieces: nvcc command lines, build-time resources, SASS, Nsight Compute and its metrics.
May import: workers.core."""
