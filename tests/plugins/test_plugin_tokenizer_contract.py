"""A plugin tokenizer whose encode or decode returns no torch.Tensor is named, with its registered name
and distribution, where vfm calls it: `vfm shard`'s tokenize stage (each clip failed with
`'numpy.ndarray' object has no attribute 'dim'`) and `vfm generate`'s decoding (a traceback)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from vfm_plugins import PluginResultError

NUMPY_TOKENIZER = """
    from vfm_models.plugins import hookimpl


    class NumpyPixels:
        temporal_compression = 1
        spatial_compression = 1
        latent_channels = 3

        def latent_shape(self, shape):
            return shape

        def encode(self, x):
            return x.numpy()  # a tensor was meant

        def decode(self, z):
            return z.numpy()


    @hookimpl
    def vfm_models_register_tokenizers(register):
        register("numpy-pixels", NumpyPixels)
"""


def test_a_tokenizer_returning_numpy_is_named_by_vfm_shards_stage_and_by_decoding(plugin):
    plugin("vfm-author-tokenizer", {"author_tokenizer": NUMPY_TOKENIZER}, {"vfm_models": "author_tokenizer"})
    import vfm_models
    from vfm_curator.stages.shard_tokenize import ShardTokenizeStage
    from vfm_infer.decode import decode

    stage = ShardTokenizeStage(tokenizer="numpy-pixels")
    stage.ensure_setup()
    with pytest.raises(PluginResultError) as error:
        stage.encode(np.zeros((1, 2, 8, 8, 3), np.uint8))
    assert str(error.value) == (
        "tokenizer 'numpy-pixels' (from vfm-author-tokenizer 0.0.1, class author_tokenizer.NumpyPixels): encode "
        "returned a numpy.ndarray; a tokenizer's encode returns a torch.Tensor of latents (B, C', T', H', W')")
    tokenizer = vfm_models.host.build("tokenizers", "numpy-pixels", {})
    for tile in (None, 4):  # one pass, and tile by tile
        with pytest.raises(PluginResultError) as error:
            decode(tokenizer, torch.zeros(1, 3, 2, 8, 8), tile=tile)
        assert str(error.value) == (
            "tokenizer 'numpy-pixels' (from vfm-author-tokenizer 0.0.1, class author_tokenizer.NumpyPixels): decode "
            "returned a numpy.ndarray; a tokenizer's decode returns a torch.Tensor of pixels (B, C, T, H, W) in [-1, 1]")
