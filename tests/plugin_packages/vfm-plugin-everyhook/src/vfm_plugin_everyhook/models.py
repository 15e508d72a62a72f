"""Implements every vfm_models hook."""

from vfm_models.plugins import hookimpl


@hookimpl
def vfm_models_register_families(register):
    register("everyhook-families", "vfm_plugin_everyhook.models:MARKER", description="everyhook test marker")


@hookimpl
def vfm_models_register_tokenizers(register):
    register("everyhook-tokenizers", "vfm_plugin_everyhook.models:MARKER", description="everyhook test marker")


@hookimpl
def vfm_models_register_text_encoders(register):
    register("everyhook-text_encoders", "vfm_plugin_everyhook.models:MARKER", description="everyhook test marker")


@hookimpl
def vfm_models_register_formulations(register):
    register("everyhook-formulations", "vfm_plugin_everyhook.models:MARKER", description="everyhook test marker")


@hookimpl
def vfm_models_register_adapters(register):
    register("everyhook-adapters", "vfm_plugin_everyhook.models:MARKER", description="everyhook test marker")


MARKER = object()
