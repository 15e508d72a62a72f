"""The weights files of a public checkpoint as they lie on disk: a sharded diffusers folder in the
Hugging Face cache layout (every file a link into ``blobs/``), a truncated safetensors file, a ``.pt``
that needs unpickling. Each reads, or fails in one line naming the file."""

from __future__ import annotations

import hashlib
import json
import os

import pytest
import torch

from vfm_models.adapters import AdapterConfigError, load_external

diffusers = pytest.importorskip("diffusers")

TINY = dict(num_attention_heads=2, attention_head_dim=16, in_channels=4, out_channels=8, num_layers=2,
            sample_size=8, patch_size=2, num_embeds_ada_norm=10)


def _dit_folder(path):
    torch.manual_seed(0)
    model = diffusers.DiTTransformer2DModel(**TINY).eval()
    shared = model.transformer_blocks[0].norm1.emb.state_dict()
    for block in model.transformer_blocks[1:]:
        block.norm1.emb.load_state_dict(shared)
    model.save_pretrained(path, max_shard_size="100KB")  # several shards and an index
    return model


def _as_hugging_face_cache(folder, cache):
    """What ``huggingface_hub.snapshot_download`` leaves: snapshots/<rev>/<files> linking to ../blobs/<sha256>."""
    snapshot = cache / "snapshots" / "0123abc" / "transformer"
    snapshot.mkdir(parents=True)
    (cache / "blobs").mkdir()
    for f in sorted(folder.iterdir()):
        digest = hashlib.sha256(f.read_bytes()).hexdigest()
        (cache / "blobs" / digest).write_bytes(f.read_bytes())
        os.symlink(f"../../../blobs/{digest}", snapshot / f.name)
    return snapshot.parent


def test_a_sharded_folder_in_the_hugging_face_cache_layout_reads_through_its_links(tmp_path):
    model = _dit_folder(tmp_path / "plain")
    assert json.loads((tmp_path / "plain" / "diffusion_pytorch_model.safetensors.index.json").read_text())["weight_map"]
    snapshot = _as_hugging_face_cache(tmp_path / "plain", tmp_path / "models--me--dit")
    ckpt = load_external(snapshot)  # a pipeline folder: its transformer/
    for key, value in model.state_dict().items():
        assert torch.equal(ckpt.state_dict[key], value), key


def test_an_index_naming_a_shard_outside_its_folder_is_refused(tmp_path):
    _dit_folder(tmp_path / "m")
    index = tmp_path / "m" / "diffusion_pytorch_model.safetensors.index.json"
    data = json.loads(index.read_text())
    shard = sorted(set(data["weight_map"].values()))[0]
    (tmp_path / "elsewhere.safetensors").write_bytes((tmp_path / "m" / shard).read_bytes())
    data["weight_map"] = {k: ("../elsewhere.safetensors" if v == shard else v) for k, v in data["weight_map"].items()}
    index.write_text(json.dumps(data))
    with pytest.raises(AdapterConfigError, match=r"names '\.\./elsewhere\.safetensors', which is not a file inside"):
        load_external(tmp_path / "m")


@pytest.mark.parametrize("name", ["config.json", "diffusion_pytorch_model.safetensors.index.json"])
@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '["a list"]'])
def test_a_folder_json_nested_too_deep_or_not_an_object_is_one_error_naming_it(tmp_path, name, text):
    _dit_folder(tmp_path / "m")
    (tmp_path / "m" / name).write_text(text)
    with pytest.raises(ValueError) as err:  # AdapterConfigError or json.JSONDecodeError, never a RecursionError
        load_external(tmp_path / "m")
    assert str(tmp_path / "m" / name) in str(err.value)
    assert ("nested 100000 levels deep" if text.startswith("[[") else "is not a JSON object") in str(err.value)


def test_a_truncated_safetensors_file_is_one_error_naming_it(tmp_path):
    _dit_folder(tmp_path / "m")
    whole = tmp_path / "m" / "diffusion_pytorch_model-00001-of-00003.safetensors"
    whole.write_bytes(whole.read_bytes()[:1000])
    with pytest.raises(AdapterConfigError, match=r"diffusion_pytorch_model-00001-of-00003\.safetensors is not a complete "
                                                 r"safetensors file \(.*\): copy it again"):
        load_external(tmp_path / "m")
    single = tmp_path / "single.safetensors"
    single.write_bytes(b"\x10\x00")
    with pytest.raises(AdapterConfigError, match=r"single\.safetensors is not a complete safetensors file"):
        load_external(single, adapter="diffusers-dit")


def _ran_on_unpickling(text):  # a global of this module: its pickled name is stable (Ray replaces builtins.print)
    return text


class _Runs:
    def __reduce__(self):
        return (_ran_on_unpickling, ("unpickled",))


def test_a_pt_file_that_needs_unpickling_is_refused_naming_what_it_holds_not_suggesting_weights_only_false(tmp_path):
    torch.save({"model": {"w": torch.zeros(2)}, "extra": _Runs()}, tmp_path / "obj.pt")
    with pytest.raises(AdapterConfigError) as info:
        load_external(tmp_path / "obj.pt")
    text = str(info.value)
    assert "obj.pt holds Python objects that only unpickling can rebuild (tests.models.test_adapter_weights_files._ran_on_unpickling)" in text, text
    assert "safetensors" in text and "weights_only set to False" not in text, text


def test_a_pickle_dump_of_tensors_is_refused_without_torch_s_advice(tmp_path):
    import pickle

    with open(tmp_path / "pickled.pth", "wb") as f:
        pickle.dump({"w": torch.zeros(2)}, f, protocol=4)
    with pytest.raises(AdapterConfigError) as info:
        load_external(tmp_path / "pickled.pth")
    text = str(info.value)
    assert "pickled.pth is not a torch.save file of plain tensors (" in text, text
    assert "safetensors.torch.save_file" in text and "weights_only` set to `False" not in text, text


def test_a_shard_missing_from_its_folder_is_named_as_missing(tmp_path):
    _dit_folder(tmp_path / "m")
    (tmp_path / "m" / "diffusion_pytorch_model-00002-of-00003.safetensors").unlink()
    with pytest.raises(AdapterConfigError, match=r"names 'diffusion_pytorch_model-00002-of-00003\.safetensors', which is "
                                                 r"missing from .*m \(an incomplete copy or download\?\)"):
        load_external(tmp_path / "m")


def test_a_weights_link_that_leads_nowhere_is_named_with_its_target(tmp_path):
    _dit_folder(tmp_path / "m")
    folder = tmp_path / "m"
    for f in folder.glob("*.safetensors*"):
        f.unlink()
    os.symlink(tmp_path / "blobs" / "gone", folder / "diffusion_pytorch_model.safetensors")  # a cache whose blob was removed
    with pytest.raises(AdapterConfigError, match=r"diffusion_pytorch_model\.safetensors is a link to .*blobs/gone, "
                                                 r"which does not exist"):
        load_external(folder)
