"""docs/plugins.md's example plugin: a model family, a sampler and a curation stage."""
