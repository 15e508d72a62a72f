"""Inputs (dirs, globs, manifests) expand to sources; derived paths never leave the output folder."""

from __future__ import annotations

import os

import pytest

from vfm_curator.config import CurateConfig
from vfm_curator.io.inputs import expand
from vfm_curator.io.paths import safe_join
from vfm_curator.stages.caption import sidecar_caption


def test_directory_takes_video_files_recursively(tmp_path):
    (tmp_path / "a").mkdir()
    for name in ("a/x.mp4", "y.MOV", "notes.txt", "y.json"):
        (tmp_path / name).write_bytes(b"")
    got = [os.path.relpath(s.path, tmp_path) for s in expand([str(tmp_path)])]
    assert got == ["a/x.mp4", "y.MOV"]


def test_glob_and_duplicates(tmp_path):
    for name in ("a.mp4", "b.mp4"):
        (tmp_path / name).write_bytes(b"")
    got = expand([str(tmp_path / "*.mp4"), str(tmp_path / "a.mp4")])
    assert [os.path.basename(s.path) for s in got] == ["a.mp4", "b.mp4"]
    with pytest.raises(ValueError, match="matches no file"):
        expand([str(tmp_path / "*.mkv")])
    with pytest.raises(ValueError, match="does not exist"):
        expand([str(tmp_path / "missing.mp4")])


def test_manifests_give_paths_relative_to_themselves_and_captions(tmp_path):
    (tmp_path / "m.jsonl").write_text('{"path": "v/a.mp4", "caption": "a cat"}\n\n{"path": "/abs/b.mp4"}\n')
    (tmp_path / "m.csv").write_text("path,caption\nc.mp4,a dog\nd.mp4,\n")
    jsonl = expand([str(tmp_path / "m.jsonl")])
    assert [(s.path, s.caption) for s in jsonl] == [(str(tmp_path / "v/a.mp4"), "a cat"), ("/abs/b.mp4", None)]
    csv = expand([str(tmp_path / "m.csv")])
    assert [(s.path, s.caption) for s in csv] == [(str(tmp_path / "c.mp4"), "a dog"), (str(tmp_path / "d.mp4"), None)]
    (tmp_path / "bad.jsonl").write_text('{"file": "x.mp4"}\n')
    with pytest.raises(ValueError, match="no 'path'"):
        expand([str(tmp_path / "bad.jsonl")])


def test_safe_join_refuses_paths_that_escape(tmp_path):
    assert safe_join(tmp_path, "clips", "a.mp4") == tmp_path.resolve() / "clips" / "a.mp4"
    for bad in ("../x", "/etc/passwd", "clips/../../x"):
        with pytest.raises(ValueError, match="escapes the output folder"):
            safe_join(tmp_path, bad)
    os.symlink("/tmp", tmp_path / "link")
    with pytest.raises(ValueError, match="escapes"):
        safe_join(tmp_path, "link", "x")


def test_sidecar_captions(tmp_path):
    video = tmp_path / "v.mp4"
    assert sidecar_caption(str(video)) is None
    (tmp_path / "v.json").write_text('{"caption": " a red car "}')
    assert sidecar_caption(str(video)) == "a red car"
    (tmp_path / "v.txt").write_text("a blue car\n")
    assert sidecar_caption(str(video)) == "a blue car"


def test_config_rejects_unknown_keys_and_loads_toml(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('stages = ["decode", "split", "write"]\n[run]\nrunner = "serial"\n[options.split]\nthreshold = 20.0\n')
    cfg = CurateConfig.load(path)
    assert (cfg.stages, cfg.runner, cfg.stage_options("split")) == (["decode", "split", "write"], "serial", {"threshold": 20.0})
    with pytest.raises(ValueError, match="unknown key.*accepted"):
        CurateConfig.from_dict({"run": {"runers": "ray"}})
    with pytest.raises(ValueError, match="accepted: .toml, .json"):
        CurateConfig.load(tmp_path / "c.yaml")
