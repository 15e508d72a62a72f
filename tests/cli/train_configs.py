"""A one-step ``vfm train`` config for a tiny dit-cross on shards (the blend and the output folder
are given with --set), shared by the CLI tests that train on shards they write."""

TINY_SHARDS_TRAIN = """
[model]
family = "dit-cross"
preset = "tiny"
options = {{ hidden = 32, depth = 1, num_heads = 2, patch = [1, 2, 2]{extra} }}
formulation = "rectified-flow"
[data]
source = "shards"
micro_batch = 1
[optim]
warmup_steps = 0
[train]
steps = 1
[checkpoint]
interval = 1
export = false
[logging]
progress = false
tensorboard = false
loss_curve = false
"""


def tiny_shards_train(extra_options: str = "") -> str:
    """The config; ``extra_options`` adds model options, e.g. ", text_dim = 64"."""
    return TINY_SHARDS_TRAIN.format(extra=extra_options)
