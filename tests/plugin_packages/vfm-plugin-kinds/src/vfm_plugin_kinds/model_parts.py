"""The vfm_models pieces, each built on the built-in it extends."""

from vfm_models.adapters.base import StateDictAdapter
from vfm_models.formulations import RectifiedFlow
from vfm_models.text_encoders.hashing import HashTextEncoder
from vfm_models.tokenizers.pixel import PixelTokenizer


class HalfPixel(PixelTokenizer):
    """The pixel tokenizer with latents at half the pixel scale (decode undoes it exactly)."""

    def encode(self, video):
        return super().encode(video) * 0.5

    def decode(self, latent):
        return super().decode(latent * 2.0)


class WordCount(HashTextEncoder):
    """The hash encoder; its last channel also counts the words of the text."""

    def encode(self, texts):
        emb, mask = super().encode(texts)
        emb[..., -1] = mask.sum(1, keepdim=True).to(emb.dtype)
        return emb, mask


class LateFlow(RectifiedFlow):
    """Rectified flow (its name stays "rectified-flow": the denoiser returns the velocity, so the
    flow samplers sample it) with a larger default shift."""

    def __init__(self, logit_mean: float = 0.0, logit_std: float = 1.0, shift: float = 3.0) -> None:
        super().__init__(logit_mean, logit_std, shift)


class RenamedDiT(StateDictAdapter):
    """An external layout that is vfm's dit with every key under ``net.``."""

    name = "kinds-dit"
    family = "dit"

    def options_from_external(self, external_config):
        return dict(external_config)

    def options_to_external(self, options):
        return dict(options)

    def from_external(self, state_dict, options):
        return {k.removeprefix("net."): v for k, v in state_dict.items()}

    def to_external(self, state_dict, options):
        return {f"net.{k}": v for k, v in state_dict.items()}


RENAMED_DIT = RenamedDiT()
