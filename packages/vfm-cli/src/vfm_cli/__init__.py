"""vfm-cli: the ``vfm`` command. It composes the library packages and holds no logic of its own."""

__version__ = "0.1.0"
