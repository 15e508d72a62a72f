"""``vfm --help`` is fast because it imports neither torch nor ray."""

from __future__ import annotations

import subprocess
import sys


def _heavy_modules_imported_by(args: list[str]) -> str:
    code = (
        "import sys\n"
        "from vfm_cli.main import app\n"
        "from typer.testing import CliRunner\n"
        f"result = CliRunner().invoke(app, {args!r})\n"
        "assert result.exit_code == 0, result.output\n"
        "heavy = sorted(m for m in ('torch', 'ray', 'av', 'megatron.energon', 'transformers') if m in sys.modules)\n"
        "print(','.join(heavy))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return result.stdout.strip()


def test_help_imports_neither_torch_nor_ray():
    assert _heavy_modules_imported_by(["--help"]) == "", "vfm --help imported heavy modules"


def test_listing_every_plugin_imports_neither_torch_nor_ray():
    """Built-ins register lazy "module:attr" targets, and no package a built-in lives in imports torch."""
    assert _heavy_modules_imported_by(["plugins", "--json"]) == "", "vfm plugins imported heavy modules"


def test_help_lists_the_plugins_command():
    result = subprocess.run([sys.executable, "-m", "vfm_cli.main", "--help"], capture_output=True, text=True)
    assert result.returncode == 0
    assert "plugins" in result.stdout
