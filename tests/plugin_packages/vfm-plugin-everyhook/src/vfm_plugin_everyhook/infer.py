"""Implements every vfm_infer hook."""

from vfm_infer.plugins import hookimpl


@hookimpl
def vfm_infer_register_samplers(register):
    register("everyhook-samplers", "vfm_plugin_everyhook.infer:MARKER", description="everyhook test marker")


MARKER = object()


@hookimpl
def vfm_infer_register_metrics(register):
    register("everyhook-metrics", "vfm_plugin_everyhook.infer:MARKER", description="everyhook test marker")
