"""The built-in sharding stages, registered through the same hook as any third-party plugin.

Targets are lazy ``"module:attr"`` strings, so listing plugins imports neither torch nor vfm-models.
"""

from __future__ import annotations

from vfm_curator.hookspecs import Register
from vfm_curator.plugins import hookimpl

_STAGES = {
    "shard_decode": ("vfm_curator.stages.shard_decode:ShardDecodeStage",
                     "decode a clip/image, pick its (H, W, frames) bucket, resize to cover + centre crop"),
    "shard_tokenize": ("vfm_curator.stages.shard_tokenize:ShardTokenizeStage",
                       "latents with a registered vfm-models tokenizer, batched per bucket"),
    "shard_text": ("vfm_curator.stages.shard_text:ShardTextStage",
                   "caption embeddings with a registered vfm-models text encoder, batched"),
}


@hookimpl
def vfm_curator_register_stages(register: Register) -> None:
    """Stages of the sharding pipeline (the driver writes their output into vfm-data shards)."""
    for name, (target, description) in _STAGES.items():
        register(name, target, description=description)
