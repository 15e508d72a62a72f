"""The training recipe: what the trainer is given (model, formulation, loader, FLOPs per token,
export) built from a training config by calling vfm-models and vfm-data. vfm-parallel imports
neither; this package is the one place that knows all three.

Read in this order (each module one purpose):

- :mod:`~vfm_cli.recipe.names`: the config's names checked against the plugin registries.
- :mod:`~vfm_cli.recipe.shards`: what the shards hold (trust check, the blend's dataset folders,
  each dataset's first sample), read through vfm-data.
- :mod:`~vfm_cli.recipe.resolution`: :func:`resolve` turns the config into a :class:`Resolved`
  (the family's config with what the shards decide filled in).
- :mod:`~vfm_cli.recipe.data_shapes`: every dataset's latent shape against the model's shape rules
  (patch, 2-D sin-cos, pack length, durations), one line naming the folder.
- :mod:`~vfm_cli.recipe.validation`: :func:`validate` resolves once and checks names, patch and
  mesh before any process group starts; it returns the :class:`Resolved` the run is built from.
- :mod:`~vfm_cli.recipe.loaders`: the synthetic loader and vfm-data's loader as trainer batches.
- :mod:`~vfm_cli.recipe.export`: the inference export's ``config.json``, its writer, and condition
  dropout's null condition.
- :mod:`~vfm_cli.recipe.parts`: :func:`parts_builder` gives the trainer its per-rank parts from
  the :class:`Resolved` that :func:`validate` returned (the config is resolved once per run).

With ``data.source = "shards"`` the shards decide what the config leaves open: the model's
``in_channels`` and ``text_dim`` follow the latents and text embeddings, and the tokenizer and text
encoder recorded in the samples' metadata go into the inference export, so that ``vfm generate``
encodes prompts with the encoder the shards were made with.
"""

from vfm_cli.recipe.parts import build_parts, parts_builder
from vfm_cli.recipe.resolution import Resolved, resolve, seq_len
from vfm_cli.recipe.shards import data_available
from vfm_cli.recipe.validation import validate

__all__ = ["Resolved", "build_parts", "data_available", "parts_builder", "resolve", "seq_len", "validate"]
