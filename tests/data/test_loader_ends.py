"""A loader always ends: damaged shards (written by vfm's writer, then broken) give counted skips or an
error naming the shard, within a bounded time, in the main process and in worker processes."""

import json
import shutil
import tarfile
import warnings

import pytest
from tests.data.helpers import quiet, rewrite_shard, write_dataset
from vfm_data import make_loader, prepare_dataset

OPTIONS = dict(patch_size=2, batch_size=2, max_seq_len=64, shuffle_buffer=None)


def _shards(folder):
    return sorted(folder.glob("*.tar"))


def _reprepare(folder):
    shutil.rmtree(folder / ".nv-meta")
    quiet(prepare_dataset, folder)


def _no_json(name, data):
    return None if name.endswith(".json") else data


def _text_length_abc(name, data):
    return json.dumps({**json.loads(data), "text_length": "abc"}).encode() if name.endswith(".json") else data


def _batches(loader, n):
    keys = []
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for _ in range(n):
                keys += next(loader).keys
    finally:
        loader.close()
    return keys


# --- a shard or stream with nothing decodable stops the loader, naming the shard ----------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("workers", [0, 1])
@pytest.mark.parametrize("damage", [_no_json, _text_length_abc], ids=["no-json-members", "text_length-abc"])
def test_a_shard_with_no_decodable_sample_ends_the_loader_with_an_error_naming_it(tmp_path, damage, workers):
    write_dataset(tmp_path, 12, max_shard_bytes=1 << 20)
    (shard,) = _shards(tmp_path)
    rewrite_shard(shard, damage)
    _reprepare(tmp_path)
    loader = make_loader(tmp_path, num_workers=workers, **OPTIONS)
    with pytest.raises(ValueError, match=rf"shard {tmp_path}/shard-000000.tar has no decodable sample") as err:
        _batches(loader, 5)
    assert "\n" not in str(err.value)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("workers", [0, 2])
def test_a_bad_shard_among_good_ones_is_named_alone(tmp_path, workers):
    write_dataset(tmp_path, 24, max_shard_bytes=40_000)
    shards = _shards(tmp_path)
    assert len(shards) >= 2
    rewrite_shard(shards[1], _text_length_abc)
    _reprepare(tmp_path)
    loader = make_loader(tmp_path, num_workers=workers, **OPTIONS)
    with pytest.raises(ValueError, match=rf"shard {tmp_path}/{shards[1].name} has no decodable sample.*text_length") as err:
        _batches(loader, 200)
    assert shards[0].name not in str(err.value)


@pytest.mark.timeout(60)
def test_every_sample_over_max_seq_len_ends_the_loader_after_one_pass(tmp_path):
    write_dataset(tmp_path, 12, max_shard_bytes=1 << 20, hw=8)  # 16..64 tokens per sample at patch 2
    loader = make_loader(tmp_path, **{**OPTIONS, "max_seq_len": 8}, streams=1)
    with pytest.raises(ValueError, match=r"no usable sample: all 12 samples .*overlong_drop 12 .*shard-000000.tar"):
        _batches(loader, 3)


# --- damaged tars ----------------------------------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("workers", [0, 1])
def test_a_garbage_tar_ends_the_loader_with_an_error_naming_it(tmp_path, workers):
    write_dataset(tmp_path, 12, max_shard_bytes=1 << 20)
    (shard,) = _shards(tmp_path)
    shard.write_bytes(bytes(range(256)) * (shard.stat().st_size // 256))  # same size, no tar header
    loader = make_loader(tmp_path, num_workers=workers, **OPTIONS)
    with pytest.raises(ValueError, match=rf"shard {tmp_path}/shard-000000.tar does not start with a tar header"):
        _batches(loader, 3)


def _cut_in_half(shard):
    """Truncate ``shard`` to half its bytes; returns the keys that lost a member."""
    data = shard.read_bytes()
    cut = len(data) // 2
    with tarfile.open(shard) as tar:
        lost = {m.name.split(".")[0] for m in tar.getmembers() if m.offset_data + m.size > cut}
    shard.write_bytes(data[:cut])
    return lost


@pytest.mark.timeout(60)
@pytest.mark.parametrize("workers", [0, 1])
def test_a_truncated_tail_is_skipped_and_counted_per_shard(tmp_path, workers):
    write_dataset(tmp_path, 48, max_shard_bytes=30_000)  # ~10 shards; 4 streams read 12 samples each
    shard = _shards(tmp_path)[1]
    lost = _cut_in_half(shard)
    loader = make_loader(tmp_path, num_workers=workers, streams=4, **OPTIONS)
    keys = set(_batches(loader, 40))
    assert lost and not keys & lost
    label = f"{tmp_path}/{shard.name}"
    assert loader.counts["truncated"] > 0 and loader.shard_counts[label]["truncated"] == loader.counts["truncated"]
    assert "truncated" in loader.skip_summary() and label in loader.skip_summary()
    truncated = loader.affected.labels[f"truncated@{label}"]  # the distinct samples; counts are events
    assert loader.metrics()["data_truncated"] == len(truncated) == len(lost) < loader.counts["truncated"]


@pytest.mark.timeout(60)
def test_a_stream_whose_whole_part_is_truncated_stops_naming_the_shard(tmp_path):
    # one shard, 4 streams of 3 samples: the last streams read only the lost half and can never
    # give a batch, which is an error (the loader's order needs every stream), not an endless skip
    write_dataset(tmp_path, 12, max_shard_bytes=1 << 20)
    (shard,) = _shards(tmp_path)
    _cut_in_half(shard)
    loader = make_loader(tmp_path, streams=4, **OPTIONS)
    with pytest.raises(ValueError, match=rf"a loader stream has no usable sample: all 3 samples .*{shard.name} .*truncated 3"):
        _batches(loader, 8)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("workers", [0, 1])
def test_a_bad_first_sample_is_skipped_and_counted(tmp_path, workers):
    write_dataset(tmp_path, 12, max_shard_bytes=1 << 20)
    (shard,) = _shards(tmp_path)
    rewrite_shard(shard, lambda name, data: b"{not json" if name == "k00000.json" else data)
    _reprepare(tmp_path)
    loader = make_loader(tmp_path, num_workers=workers, streams=1, **OPTIONS)
    keys = _batches(loader, 6)
    assert "k00000" not in keys and set(keys) >= {"k00001", "k00002"}
    assert loader.counts["corrupt"] >= 1
    assert loader.shard_counts[f"{tmp_path}/shard-000000.tar"]["corrupt"] == loader.counts["corrupt"]


# --- warnings --------------------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_skip_warnings_are_one_line_per_reason_however_many_skips(tmp_path):
    write_dataset(tmp_path, 12, max_shard_bytes=1 << 20)
    (shard,) = _shards(tmp_path)
    bad = {f"k{i:05d}.json" for i in range(0, 12, 2)}  # every other sample
    rewrite_shard(shard, lambda name, data: _text_length_abc(name, data) if name in bad else data)
    _reprepare(tmp_path)
    loader = make_loader(tmp_path, streams=1, **OPTIONS)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for _ in range(30):
            next(loader)
    ours = [str(w.message) for w in record if "vfm_data" in str(w.message)]
    assert loader.counts["corrupt"] >= 30  # the 6 bad samples, over several passes
    assert len(ours) == 1 and "text_length" in ours[0] and "shard-000000.tar" in ours[0]
    assert loader.state_dict()["shard_counts"] == {f"corrupt@{tmp_path}/shard-000000.tar": loader.counts["corrupt"]}


# --- the probe that reads the first sample before the model is built ----------------------------------


def test_first_sample_skips_a_bad_first_sample_and_names_a_garbage_shard(tmp_path):
    from vfm_data.sample import first_sample

    write_dataset(tmp_path, 6, max_shard_bytes=1 << 20)
    (shard,) = _shards(tmp_path)
    rewrite_shard(shard, lambda name, data: b"\x00garbage" if name == "k00000.latent.npy" else data)
    with pytest.warns(UserWarning, match=r"skipped sample 'k00000' of shard .*shard-000000.tar: corrupt"):
        sample = first_sample(tmp_path)
    assert sample.__key__ == "k00001" and sample.latent.shape[0] == 4
    shard.write_bytes(b"\x17" * 4096)
    with pytest.raises(ValueError, match=rf"shard {tmp_path}/shard-000000.tar does not start with a tar header"):
        first_sample(tmp_path)


def test_first_sample_of_a_folder_with_no_decodable_sample_names_it(tmp_path):
    from vfm_data.sample import first_sample

    write_dataset(tmp_path, 4, max_shard_bytes=1 << 20)
    rewrite_shard(_shards(tmp_path)[0], _no_json)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match=rf"no decodable sample in {tmp_path} \(missing_key 4 \(.*shard-000000.tar 4\)"):
            first_sample(tmp_path)


# --- energon's own error handling ---------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_a_sample_failing_after_decoding_stops_with_one_line_not_a_traceback_per_sample(tmp_path, capfd):
    write_dataset(tmp_path, 12, max_shard_bytes=1 << 20, hw=1)  # 1x1 latents: smaller than a 2x2 patch
    loader = make_loader(tmp_path, streams=1, **OPTIONS)
    with pytest.raises(ValueError, match=rf"sample 'k00000' of shard {tmp_path}/shard-000000.tar failed: .*smaller than one patch"):
        _batches(loader, 1)
    out, err = capfd.readouterr()
    assert "Traceback" not in out + err and len(out + err) < 2000  # energon's default: a traceback per sample, 100 times
    # energon prints "Except <error> in <step>" for an error it may hand to its handler, before the
    # handler's own line: vfm's steps raise the fatal kind, so only vfm's line shows
    assert "Except" not in out + err, out + err


@pytest.mark.timeout(120)
@pytest.mark.parametrize("workers", [0, 1])
def test_unpacked_samples_of_mixed_shapes_stop_with_only_vfms_line_not_energons_except_line_too(tmp_path, capfd, workers):
    from vfm_data.errors import DataError

    write_dataset(tmp_path, 12, max_shard_bytes=1 << 20)  # images (T=1) and videos of 2-4 latent frames
    loader = make_loader(tmp_path, patch_size=2, batch_size=4, streams=1, num_workers=workers)
    with pytest.raises(DataError) as info:
        _batches(loader, 1)
    message = str(info.value)
    assert message.startswith("vfm_data: cannot stack latents of shapes [(4, 1, 4, 4), "), message
    assert f"of shard {tmp_path}/shard-000000.tar" in message and "samples 'k000" in message, message
    assert "accepted: packing (max_seq_len + packing_buffer), a bucketed blend or batch_size=1" in message, message
    out, err = capfd.readouterr()
    # energon prints "Except <error> in BatchDataset.<bound method ...>" for any exception but its
    # fatal ones, before (and whatever) its error handler does
    assert "Except" not in out + err, out + err
