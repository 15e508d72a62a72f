"""vfm-plugins: the plugin-host kit every vfm library package is built on.

Each package (vfm_models, vfm_parallel, vfm_data, vfm_curator, vfm_infer) makes one
:class:`PluginHost` with its own project name and declares its kinds and built-ins as data (its
``plugins.toml``, :mod:`vfm_plugins.declaration`); this package holds the code they share and the
one set of errors they raise. It needs only pluggy, so vfm-models and vfm-parallel can both depend
on it without depending on each other. It also holds the process plumbing every package shares (stdlib
only): one owner per output folder (:class:`FolderLock`) and children that end with their parent
(:func:`exit_with_parent`).
"""

from vfm_plugins.declaration import (
    DECLARATION_FILE,
    BuiltinEntry,
    Declaration,
    declare_hookspecs,
    parse_declaration,
    read_declaration,
)
from vfm_plugins.errors import (DuplicateNameError, Notice, PluginError, PluginLoadError, PluginOptionError, PluginResultError,
                                PluginWarning, UnknownNameError)
from vfm_plugins.folder_lock import (LOCK_NAME, FolderLock, FolderLockedError, HeldOnAnotherHostError, LockHolder, LockLinkError,
                                     LockNotAFileError, StaleLockWarning)
from vfm_plugins.host import (
    DISABLE_ENV,
    Entry,
    FailedPlugin,
    PluginHost,
    Register,
    autoload_disabled,
    misplaced_entry_points,
    unknown_options,
)
from vfm_plugins.parent_watch import exit_with_parent
from vfm_plugins.signatures import refused_signature
from vfm_plugins.text import printable

__all__ = [
    "DECLARATION_FILE",
    "DISABLE_ENV",
    "BuiltinEntry",
    "Declaration",
    "DuplicateNameError",
    "Entry",
    "FailedPlugin",
    "FolderLock",
    "FolderLockedError",
    "HeldOnAnotherHostError",
    "LockLinkError",
    "LockNotAFileError",
    "LOCK_NAME",
    "LockHolder",
    "PluginError",
    "PluginLoadError",
    "PluginOptionError",
    "PluginWarning",
    "PluginResultError",
    "Notice",
    "PluginHost",
    "Register",
    "StaleLockWarning",
    "UnknownNameError",
    "autoload_disabled",
    "declare_hookspecs",
    "exit_with_parent",
    "misplaced_entry_points",
    "parse_declaration",
    "printable",
    "read_declaration",
    "refused_signature",
    "unknown_options",
]
__version__ = "0.1.0"
