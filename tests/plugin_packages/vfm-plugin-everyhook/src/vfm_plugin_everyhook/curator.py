"""Implements every vfm_curator hook."""

from vfm_curator.plugins import hookimpl


@hookimpl
def vfm_curator_register_stages(register):
    register("everyhook-stages", "vfm_plugin_everyhook.curator:MARKER", description="everyhook test marker")


MARKER = object()


@hookimpl
def vfm_curator_register_embedders(register):
    register("everyhook-embedders", "vfm_plugin_everyhook.curator:MARKER", description="everyhook test marker")


@hookimpl
def vfm_curator_register_captioners(register):
    register("everyhook-captioners", "vfm_plugin_everyhook.curator:MARKER", description="everyhook test marker")


@hookimpl
def vfm_curator_register_scorers(register):
    register("everyhook-scorers", "vfm_plugin_everyhook.curator:MARKER", description="everyhook test marker")


@hookimpl
def vfm_curator_register_shot_detectors(register):
    register("everyhook-shot_detectors", "vfm_plugin_everyhook.curator:MARKER", description="everyhook test marker")


@hookimpl
def vfm_curator_register_decoders(register):
    register("everyhook-decoders", "vfm_plugin_everyhook.curator:MARKER", description="everyhook test marker")
