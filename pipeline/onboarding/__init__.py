"""`flopwatch new` and `init`: a repository's kernels read from source, drafts written and built once.
May import: pipeline.onboarding.conventions, pipeline.onboarding.decide, pipeline.onboarding.source,
    pipeline.onboarding.write, workers."""
