"""One module per subcommand, each with HELP, add_arguments(parser) and main(args) -> int."""
