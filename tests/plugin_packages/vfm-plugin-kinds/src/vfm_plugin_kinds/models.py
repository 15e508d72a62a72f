"""The vfm_models hooks: lazy targets, so `vfm plugins` lists them without importing torch."""

from vfm_models.plugins import hookimpl


@hookimpl
def vfm_models_register_tokenizers(register):
    register("kinds-pixel", "vfm_plugin_kinds.model_parts:HalfPixel", description="pixels scaled by 1/2")


@hookimpl
def vfm_models_register_text_encoders(register):
    register("kinds-hash", "vfm_plugin_kinds.model_parts:WordCount", description="hashed words plus a length code")


@hookimpl
def vfm_models_register_formulations(register):
    register("kinds-flow", "vfm_plugin_kinds.model_parts:LateFlow", description="rectified flow, noise levels pushed late")


@hookimpl
def vfm_models_register_adapters(register):
    register("kinds-dit", "vfm_plugin_kinds.model_parts:RENAMED_DIT", description="dit with a 'net.' key prefix")
