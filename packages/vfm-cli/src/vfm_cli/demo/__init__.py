"""The end-to-end demo: sample videos -> vfm curate -> vfm shard -> vfm train -> vfm generate."""
