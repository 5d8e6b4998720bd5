"""Small subcommands of the `diskformer` command line."""
