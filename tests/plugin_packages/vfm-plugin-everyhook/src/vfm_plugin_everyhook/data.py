"""Implements every vfm_data hook."""

from vfm_data.plugins import hookimpl


@hookimpl
def vfm_data_register_blenders(register):
    register("everyhook-blenders", "vfm_plugin_everyhook.data:MARKER", description="everyhook test marker")


MARKER = object()
