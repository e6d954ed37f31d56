"""One module per ``loomfuzz`` subcommand: ``configure(parser)`` and ``run(args)``."""
