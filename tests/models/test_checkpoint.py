"""Safetensors checkpoint I/O: round trips, tied weights, no unpickling, named mismatches."""

from __future__ import annotations

import pickle

import pytest
import torch

from vfm_models.checkpoint import CheckpointMismatchError, load_into, load_state_dict, read_metadata, save_state_dict


class Tied(torch.nn.Module):
    def __init__(self, width: int = 4) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(10, width)
        self.out = torch.nn.Linear(width, 10, bias=False)
        self.out.weight = self.emb.weight  # tied: safetensors alone refuses shared memory
        self.norm = torch.nn.LayerNorm(width)


def test_save_and_load_round_trip_with_tied_weights_and_metadata(tmp_path):
    torch.manual_seed(0)
    model = Tied()
    path = save_state_dict(tmp_path / "w.safetensors", model.state_dict(), {"step": "7"})
    assert read_metadata(path) == {"step": "7"}
    fresh = load_into(Tied(), path)
    for name, tensor in model.state_dict().items():
        assert torch.equal(fresh.state_dict()[name], tensor), name
    assert fresh.out.weight is fresh.emb.weight


def test_torch_files_load_only_plain_tensors(tmp_path):
    torch.save({"w": torch.ones(2)}, tmp_path / "ok.pt")
    assert torch.equal(load_state_dict(tmp_path / "ok.pt")["w"], torch.ones(2))

    class Payload:  # a pickled Python object must never be executed on load
        def __reduce__(self):
            return (print, ("unpickled!",))

    with open(tmp_path / "evil.pt", "wb") as f:
        pickle.dump({"w": Payload()}, f, protocol=2)
    with pytest.raises(pickle.UnpicklingError):
        load_state_dict(tmp_path / "evil.pt")
    with pytest.raises(ValueError, match=r"accepted: \.safetensors, \.pt, \.pth, \.bin"):
        (tmp_path / "w.ckpt").write_bytes(b"")
        load_state_dict(tmp_path / "w.ckpt")


def test_mismatch_names_missing_unexpected_and_shapes(tmp_path):
    state = Tied(width=4).state_dict()
    state.pop("norm.bias")
    state["extra"] = torch.zeros(1)
    path = save_state_dict(tmp_path / "w.safetensors", state)
    with pytest.raises(CheckpointMismatchError) as err:
        load_into(Tied(width=8), path)
    message = str(err.value)
    assert "missing from the weights (1): norm.bias" in message
    assert "not in the model (1): extra" in message
    assert "emb.weight: weights (10, 4) vs model (10, 8)" in message
    # non-strict tolerates missing/unexpected keys but never a shape difference
    load_into(Tied(width=4), path, strict=False)
    with pytest.raises(CheckpointMismatchError, match="different shapes"):
        load_into(Tied(width=8), path, strict=False)
