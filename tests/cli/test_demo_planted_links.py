"""The demo's inputs replace a symbolic link planted at a name they write (a demo folder from
elsewhere holding ``input/manifest.jsonl -> ~/.bashrc``), never write through it."""

from __future__ import annotations

import json

import av

from vfm_cli.demo.inputs import make_inputs


def test_make_inputs_replaces_links_at_the_manifest_and_a_video_and_leaves_their_targets_alone(tmp_path):
    outside = tmp_path / "home"
    outside.mkdir()
    folder = tmp_path / "demo" / "input"
    folder.mkdir(parents=True)
    for name in ("manifest.jsonl", "video_00.mp4"):
        (outside / name).write_text("precious")
        (folder / name).symlink_to(outside / name)
    manifest = make_inputs(folder, 1, shots=1, frames_per_shot=4)
    assert [(p.name, p.read_text()) for p in sorted(outside.iterdir())] == [("manifest.jsonl", "precious"), ("video_00.mp4", "precious")]
    assert not any(p.is_symlink() for p in folder.iterdir())
    assert [json.loads(line)["path"] for line in manifest.read_text().splitlines()] == ["video_00.mp4"]
    with av.open(str(folder / "video_00.mp4")) as container:
        assert sum(1 for _ in container.decode(video=0)) == 4
    assert sorted(p.name for p in folder.iterdir()) == ["manifest.jsonl", "video_00.mp4"]  # no temporary file left


def test_the_demo_replaces_links_at_its_configs_and_prompts_and_leaves_their_targets_alone(tmp_path):
    """The files run_demo writes before its first stage; the stage then fails at once (its -o is a file)."""
    import pytest

    from vfm_cli.demo.run import DemoError, DemoSettings, run_demo

    outside = tmp_path / "home"
    outside.mkdir()
    out = tmp_path / "demo"
    (out / "configs").mkdir(parents=True)
    (out / "curated").write_text("a file: vfm curate refuses it as -o")
    planted = {"train.toml": out / "configs" / "train.toml", "prompts.txt": out / "prompts.txt"}
    for name, link in planted.items():
        (outside / name).write_text("precious")
        link.symlink_to(outside / name)
    with pytest.raises(DemoError, match="the curate step failed"):
        run_demo(DemoSettings(out=out, videos=1, ray=False), say=lambda _: None)
    assert {p.name: p.read_text() for p in outside.iterdir()} == {"train.toml": "precious", "prompts.txt": "precious"}
    assert not any(link.is_symlink() for link in planted.values())
    assert "[train]" in planted["train.toml"].read_text() and planted["prompts.txt"].read_text().startswith("a ")
