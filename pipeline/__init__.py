"""The driver: `cli.py` (the `flopwatch` program) and the rooms below, one job each.
May import: pipeline.commands, pipeline.fleet, pipeline.project, pipeline.store."""
