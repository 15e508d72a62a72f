"""Built-in strategies; each registers by name in ``vfm_parallel.builtin`` (see ``strategy.py``)."""
