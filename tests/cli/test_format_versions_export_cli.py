"""``vfm export`` of an export another vfm version wrote: a key this vfm does not know is named once
(the command reads config.json twice: to load the model and to copy its meta)."""

from __future__ import annotations

import json
import subprocess
import sys

import vfm_models
from vfm_models.export import CONFIG, save_export


def test_vfm_export_names_an_unknown_key_of_the_export_once(tmp_path):
    model = vfm_models.get_family("dit").create("tiny")
    export = save_export(tmp_path / "export", model, {"family": "dit", "config": model.config, "formulation": "edm"},
                         for_generation=False)  # a weights-only export, re-exported as one
    meta = json.loads((export / CONFIG).read_text())
    (export / CONFIG).write_text(json.dumps({**meta, "guidance_schedule": {"kind": "linear"}}))
    result = subprocess.run([sys.executable, "-m", "vfm_cli.main", "export", str(export), "--format", "vfm",
                             "-o", str(tmp_path / "out")], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    notices = [line for line in result.stderr.splitlines() if "ignoring 'guidance_schedule'" in line]
    assert len(notices) == 1, result.stderr
