"""The node side: builds, a job's process, checks, timing, profilers, and the plain records between them.
May import: nothing."""
