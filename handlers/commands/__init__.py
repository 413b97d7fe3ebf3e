"""One module per feature; each registers its /gemma subcommands and actions with handlers.registry."""
