"""Registers the tokenizer name ``pixel``, which vfm-models' built-in plugin already registers."""

from vfm_models import hookimpl


@hookimpl
def vfm_models_register_tokenizers(register) -> None:
    register("pixel", object(), description="a clashing tokenizer")
