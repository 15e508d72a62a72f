"""Fails on import, as a plugin with a missing dependency would."""

import vfm_plugin_broken_missing_dependency  # noqa: F401  (does not exist on purpose)
