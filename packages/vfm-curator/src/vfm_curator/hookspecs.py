"""Hook specifications of the vfm_curator plugin host: one ``vfm_curator_register_<kind>(register)``
per kind of ``plugins.toml``, its ``hook`` text as docstring. Each hook receives one
:class:`vfm_plugins.Register` callback and calls it once per name it provides."""

from __future__ import annotations

from vfm_plugins import Register, declare_hookspecs  # noqa: F401  (Register: for plugins' annotations)

globals().update(declare_hookspecs("vfm_curator"))
