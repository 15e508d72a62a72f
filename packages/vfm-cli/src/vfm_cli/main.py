"""Entry point of ``vfm``: a Typer app whose subcommands are discovered from ``vfm_cli.commands``.

A command module adds itself by defining ``register(app: typer.Typer) -> None``. Command modules
import only typer at module level (heavy imports such as torch or ray go inside the command), so
``vfm --help`` stays fast.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import typer
from typer.core import TyperCommand, TyperGroup

from vfm_cli import __version__, commands
from vfm_cli.failing import wait_for_local_rank_0

try:  # recent typer releases parse with their own copy of click, whose errors are not click's
    from typer._click.exceptions import UsageError
except ImportError:
    from click.exceptions import UsageError


class _FlagsTakeNoValue:
    """``--help`` lists a flag (``--no-progress``, ``--help``) without a value type: Typer's rich help shows
    ``<bool>`` after it, as if it took one. A flag's metavar is never used to parse, and an empty one is
    Typer's (and click's) way to show none."""

    def get_params(self, ctx):
        params = super().get_params(ctx)
        for param in params:
            if getattr(param, "is_flag", False) and param.metavar is None:
                param.metavar = ""
        return params


class _Command(_FlagsTakeNoValue, TyperCommand):
    """Every ``vfm`` command (``cls`` of each registered command)."""


class _UsageErrorOncePerNode(_FlagsTakeNoValue, TyperGroup):
    """A usage error (an unknown flag, a bad option value: click's own or a command's
    ``typer.BadParameter``) is the same on every rank of a torchrun job: local rank 0 prints it, the
    others wait to be ended by torchrun (printing it only if they are not: no error is lost).
    Every rank still exits non-zero."""

    def make_context(self, *args, **kwargs):  # the group's own options (``vfm --bogus``)
        try:
            return super().make_context(*args, **kwargs)
        except UsageError:
            wait_for_local_rank_0()
            raise

    def invoke(self, ctx):  # the command's options, parsed here, and its BadParameter
        try:
            return super().invoke(ctx)
        except UsageError:
            wait_for_local_rank_0()
            raise


app = typer.Typer(
    cls=_UsageErrorOncePerNode,
    name="vfm",
    help="vfm: curate raw video, shard it, train video diffusion transformers with 4D parallelism, generate videos.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"vfm {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
) -> None:
    """vfm: the toolkit for video foundation models."""
    _notices_as_lines(ctx)


def _notices_as_lines(ctx: typer.Context) -> None:
    """For this command, vfm's own warnings (:class:`vfm_plugins.Notice`: a skipped plugin or sample,
    a non-finite step, ...) as one ``warning:`` line each, not Python's file, line and source; other
    warnings without terminal controls (they may quote a file name or a plugin's text)."""
    import warnings

    from vfm_plugins import Notice, printable

    show = warnings.showwarning

    def show_warning(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, Notice):
            typer.echo(f"warning: {printable(message)}", err=True)
        else:
            show(printable(message), category, filename, lineno, file, line)

    warnings.showwarning = show_warning
    ctx.call_on_close(lambda: setattr(warnings, "showwarning", show))


def _discover_commands() -> None:
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        module.register(app)
    for command in app.registered_commands:
        if command.cls in (None, TyperCommand):  # Typer's default (a command's own class is left as it is)
            command.cls = _Command
        # a docstring's line breaks are kept (rows broken at the source's margin at 80 columns): each
        # paragraph one line, wrapped by rich to the terminal; `vfm --help` lists each command by the first
        doc = inspect.getdoc(command.callback) if command.short_help is None and command.help is None else None
        if doc:
            command.help = "\n\n".join(" ".join(paragraph.split()) for paragraph in doc.split("\n\n"))
            command.short_help = command.help.split("\n\n", 1)[0]


_discover_commands()


def main() -> None:
    from vfm_plugins import PluginError

    from vfm_cli.failing import error_line

    try:
        app()
    except PluginError as exc:  # a name clash, a plugin target that cannot load: one line, not a traceback
        error_line(exc)  # (a torchrun rank whose group started says it in vfm_cli.torchrun_exit)
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
