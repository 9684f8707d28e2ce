"""`flopwatch new` and `init`: a repository's kernels read from source, drafts written and built once.
May import: pipeline.onboarding.source, pipeline.project, pipeline.run, workers."""
