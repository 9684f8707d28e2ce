"""Peak memory over commits: when a growth counts (a threshold in bytes and %), and a series' steps.
May import: nothing.

A result's peak memory is deterministic up to the allocator's rounding (`workers.measure.memory`):
two measurements of one build agree, so a change is decided by a threshold, not by a test on
samples, and one commit on each side of a step is enough. Pure functions over numbers; the
history room turns what they find into compare rows and stored regressions.
"""
