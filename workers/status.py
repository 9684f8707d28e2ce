"""The statuses a result can end in, and which of them count as failures."""

OK = "ok"
INCORRECT = "incorrect"
CRASHED = "crashed"
TIMEOUT = "timeout"
BUILD_FAILED = "build_failed"
INVALID = "invalid"
SKIPPED = "skipped"

ALL = (OK, INCORRECT, CRASHED, TIMEOUT, BUILD_FAILED, INVALID, SKIPPED)
# A run exits 1 when any result ends in one of these; `skipped` (nothing here can run the
# variant) is reported but is not the variant's fault.
FAILURES = frozenset({INCORRECT, CRASHED, TIMEOUT, BUILD_FAILED, INVALID})
