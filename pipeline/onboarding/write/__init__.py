"""The drafts written from decided records, one manifest writer; the files, flopwatch.toml, the workflow, the first build.
May import: pipeline.onboarding.conventions, pipeline.onboarding.decide, pipeline.onboarding.source, pipeline.project,
    pipeline.run, workers."""
