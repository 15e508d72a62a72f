import io
import tarfile

import pytest
import torch

from tests.data.helpers import meta, quiet, write_dataset
from vfm_data import ShardWriter, make_loader, prepare_dataset
from vfm_data.format import encode_array


def _add(tar, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def test_corrupt_member_missing_key_and_wrong_dtype_are_skipped_and_counted(tmp_path):
    good = torch.randn(4, 1, 4, 4)
    with ShardWriter(tmp_path, max_shard_bytes=1 << 20) as w:
        for i in range(6):
            w.write(f"good{i}", good, torch.randn(2, 8), meta("image"))
    text, js = encode_array(torch.randn(2, 8), "npy"), meta("image").to_json()
    import json
    with tarfile.open(tmp_path / "shard-000001.tar", "w") as tar:
        _add(tar, "corrupt.latent.npy", encode_array(good, "npy")[:40])  # truncated
        _add(tar, "corrupt.text.npy", text)
        _add(tar, "corrupt.json", json.dumps(js).encode())
        _add(tar, "nolatent.text.npy", text)
        _add(tar, "nolatent.json", json.dumps(js).encode())
        _add(tar, "intlatent.latent.npy", encode_array(good, "npy").replace(b"<f4", b"<i4"))
        _add(tar, "intlatent.text.npy", text)
        _add(tar, "intlatent.json", json.dumps(js).encode())
        # one good sample: a shard with none decodable is an error (tests/data/test_loader_ends.py)
        _add(tar, "good6.latent.npy", encode_array(good, "npy"))
        _add(tar, "good6.text.npy", text)
        _add(tar, "good6.json", json.dumps(js).encode())
    quiet(prepare_dataset, tmp_path)
    loader = make_loader(tmp_path, patch_size=2, batch_size=2, streams=1, shuffle_buffer=None)
    with pytest.warns(UserWarning) as record:
        keys = [k for _ in range(6) for k in next(loader).keys]
    assert set(keys) == {f"good{i}" for i in range(7)}
    assert loader.counts["corrupt"] >= 1 and loader.counts["missing_key"] >= 1 and loader.counts["dtype"] >= 1
    messages = " ".join(str(r.message) for r in record)
    assert "shard-000001.tar" in messages and "'corrupt'" in messages and "latent.npy" in messages


def test_channel_count_disagreeing_with_the_model_is_an_error_naming_both(tmp_path):
    write_dataset(tmp_path, 6, channels=16)
    loader = make_loader(tmp_path, patch_size=2, batch_size=1, max_seq_len=32, latent_channels=4)
    with pytest.raises(Exception, match="16 channels but the model expects 4"):
        next(loader)


def test_a_latent_the_patch_does_not_divide_is_cropped_counted_and_named(tmp_path):
    # vfm train --validate reads one sample per folder; a later sample of another size must not be
    # cropped silently
    with ShardWriter(tmp_path, max_shard_bytes=1 << 20) as w:
        w.write("even", torch.randn(4, 1, 4, 4), torch.randn(3, 8), meta())
        w.write("odd", torch.randn(4, 1, 5, 4), torch.randn(3, 8), meta())
    quiet(prepare_dataset, tmp_path)
    loader = make_loader(tmp_path, patch_size=2, batch_size=1, streams=1, shuffle_buffer=None)
    with pytest.warns(UserWarning, match=r"sample odd: latent \(H, W\) = \(5, 4\) is not divisible by the patch 2"):
        shapes = {tuple(next(loader).latents.shape[-2:]) for _ in range(4)}
    assert shapes == {(4, 4)}
    assert loader.counts["patch_remainder_crop"] >= 1
