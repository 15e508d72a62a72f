"""One module per ``vfm`` subcommand; each defines ``register(app)``. Keep imports light here."""
