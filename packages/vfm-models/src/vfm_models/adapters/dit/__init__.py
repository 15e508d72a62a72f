"""DiT checkpoints <-> vfm ``dit``: diffusers' ``DiTTransformer2DModel`` and facebookresearch/DiT's
``models.py`` layout.

The blocks are the same computation; what differs is at the edges:

- patch embedding: a Conv2d (D, C, p, p) there, a Linear over (pt=1, ph, pw, C) patches here;
- positions: DiT's fixed 2-D sin-cos table (vfm ``pos_embed="sincos2d"``);
- attention: facebookresearch fuses q, k, v into one ``qkv`` Linear (3D, D) in that order;
- conditioning: one timestep/class embedder; diffusers keeps an identical copy in every block (its
  converter writes the same tensors into each) and its timestep features divide by dim/2 - 1
  (``timestep_freq_shift=1``), and its MLP LayerNorm uses ``norm_eps`` (vfm ``mlp_norm_eps``);
- learned sigma: 2 x in_channels outputs, the noise prediction first, then the variance.
"""

from vfm_models.adapters.dit.common import conv_to_linear, linear_to_conv
from vfm_models.adapters.dit.diffusers_dit import DIFFUSERS_DIT, DiffusersDiT
from vfm_models.adapters.dit.facebookresearch_dit import FACEBOOKRESEARCH_DIT, FacebookResearchDiT

__all__ = ["DIFFUSERS_DIT", "FACEBOOKRESEARCH_DIT", "DiffusersDiT", "FacebookResearchDiT", "conv_to_linear", "linear_to_conv"]
