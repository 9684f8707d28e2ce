"""Process boundaries: containment limits, the sandbox, the per-GPU device lock.
May import: nothing."""
