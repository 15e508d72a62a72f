"""Implements every vfm_parallel hook."""

from vfm_parallel.plugins import hookimpl


@hookimpl
def vfm_parallel_register_strategies(register):
    register("everyhook-strategies", "vfm_plugin_everyhook.parallel:MARKER", description="everyhook test marker")


MARKER = object()
