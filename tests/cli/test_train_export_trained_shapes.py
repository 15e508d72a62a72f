"""The export records every latent shape the run trained on, as the loader cut them: a blend of two
resolution buckets trains on both, so ``vfm generate`` at the second bucket's size warns of no
"shape it never saw" (the export named the first bucket alone); with ``data.durations`` the
frames are the bucket's, not the shards' (the export named the uncut 2-frame latents)."""

from __future__ import annotations

import warnings

import pytest

from tests.cli.test_train_shards import VIDEO, _write_bucket, run, shard_config
from vfm_infer.pipeline import GenerationSpec, VideoPipeline
from vfm_models.export import load_export

WIDE = (3, 2, 8, 12)  # another resolution bucket (pixel patch 1: latents are the 8x12 video)


@pytest.fixture(scope="module")
def two_buckets(tmp_path_factory):
    from vfm_data import write_blend

    root = tmp_path_factory.mktemp("two_buckets")
    _write_bucket(root, "square", VIDEO, 8, seed=1)
    _write_bucket(root, "wide", WIDE, 8, seed=2)
    write_blend(root / "blend.yaml", [(root / "square", 3.0), (root / "wide", 1.0)])
    return root / "blend.yaml"


def _export(tmp_path, blend, **data):
    cfg = shard_config(tmp_path, blend, data=data, train={"steps": 1}, checkpoint={"export": True})
    run(cfg)
    return load_export(tmp_path / "export")


def test_an_export_of_two_resolution_buckets_generates_either_without_an_untrained_shape_warning(tmp_path, two_buckets):
    model, meta = _export(tmp_path, two_buckets)
    assert meta["latent_shape"] == list(VIDEO)
    assert meta["latent_shapes"] == [list(VIDEO), list(WIDE)]
    pipe = VideoPipeline(model, meta)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert pipe.prepare(GenerationSpec(steps=1, size=(8, 12)), ["a blob"]).warnings == ()
        assert pipe.prepare(GenerationSpec(steps=1), ["a blob"]).warnings == ()
    other = pipe.prepare(GenerationSpec(steps=1, size=(12, 12)), ["a blob"]).warnings
    assert other and "trained on 2 frames at 8x8 (latent 3x2x8x8) and 2 frames at 8x12 (latent 3x2x8x12); " \
                     "2 frames at 12x12 is a shape it never saw" in other[0]


def test_an_export_trained_on_a_frames_bucket_records_the_bucket_frames(tmp_path, two_buckets):
    _, meta = _export(tmp_path, two_buckets, durations=[1])  # 2-frame latents cut to 1 frame by the loader
    assert meta["latent_shape"] == [3, 1, 8, 8]
    assert meta["latent_shapes"] == [[3, 1, 8, 8], [3, 1, 8, 12]]
