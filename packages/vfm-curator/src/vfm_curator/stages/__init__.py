"""The stages of the curation pipelines; each registers as a plugin in ``builtin.py``."""
