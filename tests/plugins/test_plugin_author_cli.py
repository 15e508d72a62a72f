"""From the command line a plugin author's mistake is one ``warning:`` or ``error:`` line naming the
plugin, never a Python traceback (real ``vfm`` process, real entry points)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import plugin_env
from tests.plugins.conftest import write_plugin


def test_a_skipped_plugin_warns_in_one_line_and_a_target_that_cannot_load_is_one_error_line(tmp_path):
    broken = write_plugin(tmp_path / "broken", "vfm-author-broken", {"author_broken": "import author_gone\n"},
                          {"vfm_infer": "author_broken"})
    lazy = write_plugin(tmp_path / "lazy", "vfm-author-metric", {
        "author_metric": (
            "from vfm_infer.plugins import hookimpl\n\n"
            "@hookimpl\n"
            "def vfm_infer_register_metrics(register):\n"
            "    register('fancy', 'author_metric_impl:Fancy')\n"),
        "author_metric_impl": "import author_metric_needs_this\n",
    }, {"vfm_infer": "author_metric"})
    (tmp_path / "videos").mkdir()
    (tmp_path / "prompts.txt").write_text("a red circle moving right\n")
    result = subprocess.run(
        [sys.executable, "-m", "vfm_cli.main", "eval", str(tmp_path / "videos"), "--prompts", str(tmp_path / "prompts.txt"),
         "--metric", "fancy"],
        capture_output=True, text=True, env=plugin_env([broken, lazy]), timeout=120,
    )
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert result.stderr.splitlines() == [
        "warning: vfm_infer: plugin 'vfm-author-broken:vfm-author-broken' (vfm-author-broken 0.0.1) is skipped: "
        "failed to import 'author_broken': ModuleNotFoundError: No module named 'author_gone'",
        "error: metric 'fancy' (from vfm-author-metric 0.0.1) cannot be loaded: importing author_metric_impl (its "
        "target 'author_metric_impl:Fancy') failed: ModuleNotFoundError: No module named 'author_metric_needs_this'",
    ]


def test_vfm_plugins_shows_a_plugin_in_a_misspelt_group_as_failed(tmp_path):
    misplaced = write_plugin(tmp_path / "group", "vfm-author-group", {"author_group": ""}, {"vfm_infers": "author_group"})
    result = subprocess.run([sys.executable, "-m", "vfm_cli.main", "plugins", "--json"], capture_output=True, text=True,
                            env=plugin_env([misplaced]), timeout=120)
    assert result.returncode == 0, result.stderr
    import json

    failed = [r for r in json.loads(result.stdout) if r["status"] == "failed"]
    assert [(r["host"], r["name"]) for r in failed] == [("vfm_infers", "vfm-author-group:vfm-author-group")]
    assert "did you mean vfm_infer?" in failed[0]["description"]
