"""History: what the stored results of many commits say.

The rooms of the driver: `pipeline/` runs one commit (checkout, discovery, plan, cluster,
runflow, store); `pipeline/history/` decides over many (compare, paired timing, verdicts,
series and change points, bisect, regressions, the GitHub comment); `pipeline/commands/` wires
both to the CLI. History may use the run room (paired timing re-uses `runflow`); the run room
never imports history.
"""
