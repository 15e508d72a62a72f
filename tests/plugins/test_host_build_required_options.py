"""``PluginHost.build`` names a required option left out, with the plugin and its provider, before the
target is called (was Python's ``__init__() missing 1 required positional argument``)."""

from __future__ import annotations

import pytest

from vfm_plugins import PluginOptionError


def test_build_names_a_missing_required_option_and_the_plugin():
    from vfm_data.plugins import host

    with pytest.raises(PluginOptionError) as error:
        host.build("blenders", "scheduled", {})  # its schedule has no default
    assert str(error.value).startswith("blender 'scheduled' (from vfm-data ")
    assert str(error.value).endswith(") needs the option schedule, not given")
    assert host.build("blenders", "scheduled", {"schedule": [[0, [1.0]]]}) is not None
