"""An export whose tokenizer gives other latent channels than its model takes (tokenizer_options
that are not those of the training data: pixel patch 1 for a model of patch-2 latents) is refused
when the request is checked, naming both; it sampled the whole video and failed in the decoder."""

from __future__ import annotations

import pytest

from tests.infer.tiny import tiny_dit, tiny_meta
from vfm_infer.pipeline import GenerationSpec, VideoPipeline


def test_an_export_whose_tokenizer_channels_differ_from_the_model_is_refused_before_sampling():
    pipe = VideoPipeline(tiny_dit(), tiny_meta(tokenizer_options={"patch": 1}))  # 3 channels; the model takes 12
    with pytest.raises(ValueError, match=r"the export's tokenizer 'pixel' \{'patch': 1\} gives 3 latent channels but "
                                         r"the model takes 12"):
        pipe.prepare(GenerationSpec(steps=1), ["0"])
    VideoPipeline(tiny_dit(), tiny_meta()).prepare(GenerationSpec(steps=1), ["0"])  # patch 2: 12 channels
