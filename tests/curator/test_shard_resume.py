"""Resume of the sharding pipeline: an interrupted run leaves only complete shards, a re-run writes
each remaining clip exactly once, and a folder is only resumed with the settings that made it."""

from __future__ import annotations

import tarfile
from pathlib import Path

import numpy as np
import pytest

import vfm_curator
from vfm_curator.synth import make_video
from vfm_data import SampleMeta, ShardWriter

OPTIONS = {"tokenizer": "pixel", "text_encoder": "hash", "resolutions": [[32, 48]], "frames": [9],
           "max_shard_bytes": 60_000}  # one 9x32x48 pixel sample (~166 kB) per shard: many shards


@pytest.fixture(scope="module")
def clips(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("resume")
    make_video(root / "in" / "v.mp4", [12, 12, 12, 12, 12, 12], width=48, height=32, seed=3)
    (root / "in" / "v.txt").write_text("six short shots")
    out = root / "clips"
    summary = vfm_curator.curate(root / "in", out, {"run": {"runner": "serial"},
                                                    "options": {"split": {"min_clip_s": 0.4}, "stitch": {"threshold": 1.0}}})
    assert summary.clips >= 4, summary
    return out


class _StopAfter:
    """A progress display that interrupts the run (like Ctrl-C) after ``n`` samples are written."""

    def __init__(self, n: int) -> None:
        self.n = n

    def start(self, stages, total):
        pass

    def advance(self, stage, n):
        if stage == "write":
            self.n -= n
            if self.n <= 0:
                raise KeyboardInterrupt

    def stop(self):
        pass


def _keys_per_shard(out: Path) -> list[list[str]]:
    result = []
    for shard in sorted(out.glob("*/shard-*.tar")):
        with tarfile.open(shard) as tar:
            names = tar.getnames()
        keys = sorted({n.split(".", 1)[0] for n in names})
        assert all({f"{k}.latent.npy", f"{k}.text.npy", f"{k}.json"} <= set(names) for k in keys), shard
        result.append(keys)
    return result


def test_interrupted_run_leaves_complete_shards_and_rerun_writes_each_clip_once(clips, tmp_path):
    out = tmp_path / "shards"
    config = {"run": {"runner": "serial"}}
    with pytest.raises(KeyboardInterrupt):
        vfm_curator.shard(clips, out, config, progress=_StopAfter(3), **OPTIONS)
    first = [k for keys in _keys_per_shard(out) for k in keys]
    assert len(first) == 2  # the third sample's shard was open when the run stopped: dropped, not half-written
    assert not [p for p in out.rglob("*") if ".tmp" in p.name]
    summary = vfm_curator.shard(clips, out, config, **OPTIONS)
    assert (summary.skipped, summary.written) == (2, summary.clips - 2)
    every = [k for keys in _keys_per_shard(out) for k in keys]
    assert len(every) == len(set(every)) == summary.clips == summary.samples
    again = vfm_curator.shard(clips, out, config, **OPTIONS)
    assert (again.skipped, again.written, again.samples) == (summary.clips, 0, summary.clips)


def test_a_killed_writers_temporary_shard_is_removed_and_its_clips_redone(clips, tmp_path):
    out = tmp_path / "shards"
    # what SIGKILL leaves behind: an open shard under its temporary name, never renamed
    writer = ShardWriter(out / "32x48x9", prefix="shard", max_shard_bytes=1 << 30)
    meta = SampleMeta(source="v.mp4", span=(0, 1), fps=24, size=(32, 48), caption="x", modality="video",
                      tokenizer="pixel", text_encoder="hash")
    writer.write("half_done", np.zeros((3, 9, 32, 48), np.float32), np.zeros((2, 64), np.float32), meta)
    assert len(list(out.rglob(".shard-*.tar.tmp-*"))) == 1
    summary = vfm_curator.shard(clips, out, {"run": {"runner": "serial"}}, **OPTIONS)
    assert not list(out.rglob(".shard-*.tar.tmp-*"))
    assert summary.skipped == 0 and summary.samples == summary.clips
    writer._tar.close()  # the file handle of the "killed" writer


def test_resuming_with_another_tokenizer_setting_is_refused(clips, tmp_path):
    out = tmp_path / "shards"
    vfm_curator.shard(clips, out, {"run": {"runner": "serial"}}, **OPTIONS)
    with pytest.raises(ValueError, match=r"tokenizer_options: \{\} there, \{'patch': 2\} now"):
        vfm_curator.shard(clips, out, {"run": {"runner": "serial"}}, **{**OPTIONS, "tokenizer_options": {"patch": 2}})


def test_a_run_that_wrote_no_shard_does_not_bind_the_folder_to_its_settings(clips, tmp_path):
    """A first `vfm shard` whose text encoder cannot be set up (`t5` without its `path`, as the README's
    command line gives it) writes no sample; the corrected command into the same folder was refused as
    'holds shards made with other settings', though the folder held none."""
    out = tmp_path / "shards"
    with pytest.raises(Exception, match="needs the option path"):
        vfm_curator.shard(clips, out, {"run": {"runner": "serial"}}, **{**OPTIONS, "text_encoder": "t5"})
    assert not list(out.glob("*/shard-*.tar"))
    summary = vfm_curator.shard(clips, out, {"run": {"runner": "serial"}}, **OPTIONS)
    assert summary.samples == summary.clips
    # once a shard is written, the folder is bound to the settings that wrote it
    with pytest.raises(ValueError, match=r"holds shards made with other settings \(text_encoder: 'hash' there, 't5' now\)"):
        vfm_curator.shard(clips, out, {"run": {"runner": "serial"}}, **{**OPTIONS, "text_encoder": "t5"})
