"""Defaults that both the project configuration (config.py) and the declared formats
(schema.py) read: a module of its own, so that neither imports the other for them."""

# Seconds of sampling per job without --budget or [defaults] timing_budget_s (config.py).
DEFAULT_BUDGET_S = 2.0
# Per-job timeout (seconds) unless the manifest or --timeout says otherwise.
DEFAULT_TIMEOUT_S = 120.0
