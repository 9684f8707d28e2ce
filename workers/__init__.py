"""flopwatch node side: toolchains, builds, the job sandbox, correctness, timing, profilers."""
