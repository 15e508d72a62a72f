"""vfm_curator.pipelines.shard_files: a killed run's temporary shards are swept by the writer's own
naming rule, and a link planted at such a name is neither followed nor removed."""

from __future__ import annotations

from vfm_curator.pipelines.shard_files import remove_leftovers


def test_leftover_temporary_shards_are_removed_and_a_planted_link_is_left_alone(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    bucket = tmp_path / "shards" / "32x48x9"
    bucket.mkdir(parents=True)
    (bucket / ".shard-000002.tar.tmp-k2x9q7ab").write_bytes(b"half a tar")  # what a killed writer leaves
    (bucket / ".shard-000001.tar.tmp-4242").write_bytes(b"half a tar")  # and what earlier versions left
    (bucket / ".shard-000003.tar.tmp-x").symlink_to(victim)
    assert remove_leftovers(tmp_path / "shards") == 2
    assert [p.name for p in bucket.iterdir()] == [".shard-000003.tar.tmp-x"]
    assert victim.read_text() == "precious"
