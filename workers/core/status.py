"""The statuses a result can end in, and which of them count as failures."""

OK = "ok"
# Measured, but nothing to check it against (`[reference] check = "none"`): its output's digest
# is kept per commit and compare says when it changed. Not a failure.
UNCHECKED = "unchecked"
INCORRECT = "incorrect"
CRASHED = "crashed"
TIMEOUT = "timeout"
BUILD_FAILED = "build_failed"
INVALID = "invalid"
SKIPPED = "skipped"
# The job's Ray node was lost while it ran (or its build's) and no other node could take it:
# not measured, not the variant's fault; `flopwatch run --resume` measures it.
LOST = "lost"

ALL = (OK, UNCHECKED, INCORRECT, CRASHED, TIMEOUT, BUILD_FAILED, INVALID, SKIPPED, LOST)
# A run exits 1 when any result ends in one of these; `skipped` (nothing here can run the
# variant) is reported but is not the variant's fault.
FAILURES = frozenset({INCORRECT, CRASHED, TIMEOUT, BUILD_FAILED, INVALID})
# Results missing for reasons outside the variant: the run is incomplete and exits 1 as well,
# but comparisons and dashboards do not count them as the variant failing.
INCOMPLETE = frozenset({LOST})
# Results that carry a timing: everything that reads a number (series, compare, dashboards,
# roofline, accounting) counts these, never `== OK` alone.
MEASURED = frozenset({OK, UNCHECKED})


def measured(value: str | None) -> bool:
    return value in MEASURED
