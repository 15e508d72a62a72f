"""Implements every vfm_curator hook."""

from vfm_curator.plugins import hookimpl


@hookimpl
def vfm_curator_register_stages(register):
    register("everyhook-stages", "vfm_plugin_everyhook.curator:MARKER", description="everyhook test marker")


MARKER = object()
