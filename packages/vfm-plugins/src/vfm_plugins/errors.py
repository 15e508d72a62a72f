"""The registry errors every vfm plugin host raises: one hierarchy, shared by all hosts."""

from __future__ import annotations


class PluginError(Exception):
    """Base class of every plugin-registry error."""


class DuplicateNameError(PluginError, ValueError):
    """A name was registered twice for the same kind."""


class UnknownNameError(PluginError, KeyError):
    """A name was looked up that no plugin registered."""

    def __str__(self) -> str:  # KeyError quotes its message; show it plainly instead
        return str(self.args[0]) if self.args else ""


class PluginLoadError(PluginError, ImportError):
    """A registered name whose target cannot be imported, or lacks what its kind requires."""


class PluginOptionError(PluginError, TypeError):
    """An option that a registered name's class or factory does not take (:meth:`PluginHost.build`)."""


class PluginResultError(PluginError, TypeError):
    """A plugin's code returned what its kind does not allow (a strategy's ``apply`` returning None, a
    metric's ``evaluate`` returning a dict): one line naming it and its provider, not a traceback."""


class Notice(UserWarning):
    """A warning meant for the person running vfm: the ``vfm`` command shows it as one ``warning: ...``
    line, without Python's file, line and source. Each vfm package's own warnings derive from it."""


class PluginWarning(Notice):
    """A plugin was skipped (it failed to import, or implements its hooks wrongly); the rest works."""
