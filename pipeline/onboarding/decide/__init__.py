"""Decisions on the readers' records: op, dtype, sizes, launch geometry, evidence, devices, reference and inputs.
May import: pipeline.onboarding.conventions, pipeline.onboarding.source, pipeline.project, workers."""
