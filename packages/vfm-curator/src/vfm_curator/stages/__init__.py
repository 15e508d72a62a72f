"""The stages of the curation pipelines; each registers as a plugin in ``plugins.toml``."""
