"""What a job measures and on what: timing, statistics, correctness, fits, nvidia-smi, devices, profilers.
May import: workers.core, workers.cuda, workers.isolation, workers.rocm."""
