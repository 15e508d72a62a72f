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


NUMPY_TEXT_ENCODER = """
    import numpy as np
    from vfm_models.plugins import hookimpl


    class NumpyText:
        dim = 8
        max_length = 4

        def encode(self, texts):
            return np.zeros((len(texts), 4, 8), np.float32), np.ones((len(texts), 4), bool)  # tensors were meant


    @hookimpl
    def vfm_models_register_text_encoders(register):
        register("numpy-text", NumpyText)
"""


def test_a_text_encoder_returning_numpy_is_named_by_vfm_shards_stage_and_by_training_and_generation(plugin):
    # vfm shard failed each clip with "'numpy.ndarray' object has no attribute 'dim'"; training's and
    # generation's null caption with "... has no attribute 'float'"
    plugin("vfm-author-text", {"author_text": NUMPY_TEXT_ENCODER}, {"vfm_models": "author_text"})
    import vfm_models
    from vfm_curator.stages.shard_text import encode_captions
    from vfm_models.conditioning import encode_text

    encoder = vfm_models.host.build("text_encoders", "numpy-text", {})
    expected = ("text encoder 'numpy-text' (from vfm-author-text 0.0.1, class author_text.NumpyText): encode returned "
                "its text as a numpy.ndarray; a text encoder's encode returns (text (B, L, D), mask (B, L) bool), both "
                "torch.Tensor (or the text alone: every token real)")
    for call in (encode_captions, encode_text):
        with pytest.raises(PluginResultError) as error:
            call(encoder, ["a red square", ""])
        assert str(error.value) == expected
