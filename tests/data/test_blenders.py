import pytest

from tests.data.helpers import write_dataset
from vfm_data import host, make_loader, write_blend
from vfm_data.blenders.scheduled import weights_at


@pytest.fixture(scope="module")
def three_datasets(tmp_path_factory):
    root = tmp_path_factory.mktemp("blend")
    return [write_dataset(root / name, 40, prefix=name, seed=i, max_shard_bytes=60_000) for i, name in enumerate("abc")]


def test_builtin_blenders_are_registered_plugins():
    assert {"weighted", "scheduled", "bucketed"} <= set(host.names("blenders"))


def _shares(loader, samples):
    counts, total = {}, 0
    while total < samples:
        for key in next(loader).keys:
            counts[key[0]] = counts.get(key[0], 0) + 1
            total += 1
    return {k: v / total for k, v in counts.items()}, total


def test_weighted_blend_shares_are_within_two_points_of_the_weights(three_datasets, tmp_path):
    weights = [0.5, 0.3, 0.2]
    blend = write_blend(tmp_path / "blend.yaml", list(zip(three_datasets, weights)))
    loader = make_loader(blend, patch_size=2, batch_size=8, max_seq_len=64, packing_buffer=128, shuffle_buffer=None)
    shares, total = _shares(loader, 10_000)
    assert total >= 10_000
    for name, w in zip("abc", weights):
        assert abs(shares[name] - w) < 0.02, (name, shares)


def test_scheduled_blend_moves_from_the_first_to_the_second_dataset(three_datasets, tmp_path):
    blend = write_blend(tmp_path / "blend.yaml", [(three_datasets[0], 1.0), (three_datasets[1], 1.0)])
    # 4 streams: each stream's 25th sample is sample 100 of the job
    schedule = [(0, [1.0, 0.0]), (100, [1.0, 0.0]), (101, [0.0, 1.0])]
    loader = make_loader(blend, patch_size=2, batch_size=1, max_seq_len=16, packing_buffer=8, blender="scheduled",
                         blender_options={"schedule": schedule}, shuffle_buffer=None)
    keys = []
    while len(keys) < 300:
        keys += next(loader).keys
    # a stream packs from a buffer of 8 drawn samples, so emission lags drawing by at most 8 per stream
    assert {k[0] for k in keys[:40]} == {"a"}
    assert {k[0] for k in keys[200:]} == {"b"}
    assert weights_at(schedule, 50) == [1.0, 0.0] and weights_at([(0, [1, 0]), (10, [0, 1])], 5) == [0.5, 0.5]


def test_bucketed_blend_batches_hold_one_resolution_and_duration(three_datasets):
    loader = make_loader(three_datasets[0], patch_size=2, batch_size=1, blender="bucketed",
                         blender_options={"durations": [1, 2, 4], "tokens_per_batch": 32}, shuffle_buffer=None)
    seen = set()
    for _ in range(12):
        batch = next(loader)
        _, _, t, h, w = batch.latents.shape
        assert t in (1, 2, 4)
        assert batch.latents.shape[0] == 32 // (t * (h // 2) * (w // 2))
        seen.add(t)
    assert len(seen) >= 2


def test_a_blend_folder_still_loads_after_it_is_moved(tmp_path):
    import shutil

    root = tmp_path / "shards"
    datasets = [write_dataset(root / name, 6, prefix=name, seed=i) for i, name in enumerate("ab")]
    write_blend(root / "blend.yaml", [(d, 1.0) for d in datasets])
    moved = shutil.move(str(root), str(tmp_path / "moved"))
    loader = make_loader(f"{moved}/blend.yaml", patch_size=2, batch_size=4, max_seq_len=64, packing_buffer=8,
                         shuffle_buffer=None)
    assert {key[0] for _ in range(6) for key in next(loader).keys} == {"a", "b"}
