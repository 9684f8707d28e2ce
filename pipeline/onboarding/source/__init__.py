"""The repository as onboarding reads it: one listing, each file read and parsed once, the records every stage passes.
May import: pipeline.project."""
