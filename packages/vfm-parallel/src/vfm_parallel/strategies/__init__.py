"""Built-in strategies; each registers by name in ``vfm_parallel/plugins.toml`` (see ``strategy.py``)."""
