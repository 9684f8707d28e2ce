"""One commit end to end: plan, build cache, identities, peers, the jobs' stream and schedule, accounting.
May import: pipeline.fleet, pipeline.project, pipeline.store, reports, workers."""
