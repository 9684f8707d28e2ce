"""What the stored results of many commits say: compare, paired timing, verdicts, change points, bisect.
May import: pipeline.fleet, pipeline.history.memory, pipeline.project, pipeline.run, pipeline.store, reports,
    workers.

History may use the run room (paired timing re-uses `pipeline.run.runflow`); the run room never
imports history. docs/architecture.md draws every room.
"""
