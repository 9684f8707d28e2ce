"""The CLI: one module per subcommand, each with HELP, add_arguments(parser) and main(args) -> int.
May import: pipeline.ci, pipeline.fleet, pipeline.history, pipeline.onboarding, pipeline.project,
    pipeline.run, pipeline.store, reports, workers."""
