"""vfm-plugins: the plugin-host kit every vfm library package is built on.

Each package (vfm_models, vfm_parallel, vfm_data, vfm_curator, vfm_infer) makes one
:class:`PluginHost` with its own project name; this package holds the code they share and the one
set of errors they raise. It needs only pluggy, so vfm-models and vfm-parallel can both depend on
it without depending on each other.
"""

from vfm_plugins.errors import DuplicateNameError, PluginError, UnknownNameError
from vfm_plugins.host import DISABLE_ENV, Entry, FailedPlugin, PluginHost, Register, autoload_disabled

__all__ = [
    "DISABLE_ENV",
    "DuplicateNameError",
    "Entry",
    "FailedPlugin",
    "PluginError",
    "PluginHost",
    "Register",
    "UnknownNameError",
    "autoload_disabled",
]
__version__ = "0.1.0"
