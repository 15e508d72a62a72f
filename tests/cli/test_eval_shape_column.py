"""``vfm eval``'s shapes table shows whether each video's shape matches its prompt (``shape_ok``), as it shows
``colour_ok`` and ``direction_ok``: the summary counted shape_correct, but a row showed only the shape seen,
so "a green square moving right" drawn as a circle read as passing every check shown."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from vfm_cli.main import app


def test_the_per_video_table_shows_shape_ok_beside_colour_ok_and_direction_ok(tmp_path):
    import numpy as np

    from vfm_curator.synth import shape_frames
    from vfm_infer.video.mp4 import write_mp4

    frames = shape_frames(32, shape="circle", colour="red", direction="right", background=(120, 40, 160),
                          width=32, height=32, size=12)
    write_mp4(tmp_path / "0000.mp4", np.stack(frames[::4]))
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("a red square moving right\n")  # a circle was drawn
    result = CliRunner().invoke(app, ["eval", str(tmp_path), "--prompts", str(prompts), "--option", "shapes.flat_rms=12"],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    row = json.loads((tmp_path / "scores.json").read_text())["shapes"]["per_video"][0]
    assert row["shape"] == "circle" and row["shape_ok"] is False and row["colour_ok"] is True
    lines = result.output.splitlines()
    header = next(line for line in lines if "background_rms" in line)
    cells = [c.strip() for c in header.strip("┃│ ").replace("┃", "│").split("│")]
    assert cells[-3:] == ["shape", "shape_ok", "single_shape"], header
    line = next(line for line in lines if "a red square moving right" in line)
    assert [c.strip() for c in line.strip("│ ").split("│")][-2] == "NO", line
