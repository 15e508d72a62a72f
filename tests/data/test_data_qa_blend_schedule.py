"""A scheduled blend follows its milestones with the loader's default shuffle buffer too."""

from tests.data.helpers import write_dataset
from vfm_data import make_loader, write_blend


def test_scheduled_blend_switches_at_its_milestone_with_the_default_shuffle_buffer(tmp_path):
    a, b = (write_dataset(tmp_path / name, 40, prefix=name, seed=i, max_shard_bytes=60_000) for i, name in enumerate("ab"))
    blend = write_blend(tmp_path / "blend.yaml", [(a, 1.0), (b, 1.0)])
    # 4 streams: each stream's 100th draw is sample 400 of the job; shuffle_buffer is left at its default (100)
    schedule = [(0, [1.0, 0.0]), (400, [1.0, 0.0]), (401, [0.0, 1.0])]
    loader = make_loader(blend, patch_size=2, batch_size=1, max_seq_len=16, packing_buffer=8, blender="scheduled",
                         blender_options={"schedule": schedule})
    assert loader.spec.shuffle_buffer == 100
    keys = []
    while len(keys) < 700:
        keys += next(loader).keys
    # emission lags drawing by the packing buffer only (8 per stream): before, a shuffle after the
    # blend held draws back ~100 per stream, so 'b' came at the start and 'a' long after the switch
    assert {k[0] for k in keys[:360]} == {"a"}
    assert {k[0] for k in keys[440:700]} == {"b"}
