"""Process boundaries: containment limits, the sandbox, the per-GPU device lock, the CPUs a GPU's jobs run on.
May import: nothing."""
