"""A checkpoint folder from someone else (copied between clusters, downloaded) is read as data and
never reaches outside itself: a symbolic link in it (to a file elsewhere whose checksum the crafted
manifest knows) is refused naming it, as vfm writes none; manifest names with ``..`` or absolute
paths read nothing outside."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from tests.parallel.test_checkpoint_integrity import _error_of, _linear, _reseal, _tensor_files
from tests.parallel.trainer_helpers import one_thread  # noqa: F401 (autouse: one CPU thread per test)
from vfm_parallel import checkpoint as ckpt


@pytest.fixture
def saved(tmp_path):
    return ckpt.save(tmp_path / "run", 1, model=_linear(2.0), rank_state={"pos": 1})


def test_a_tensor_file_linking_outside_the_checkpoint_is_refused(saved, tmp_path):
    # the link's target has the same bytes, so sizes and checksums agree: only the link gives it away
    tensors = _tensor_files(saved)[0]
    outside = tmp_path / "elsewhere" / tensors.name
    outside.parent.mkdir()
    shutil.copy(tensors, outside)
    tensors.unlink()
    tensors.symlink_to(outside)
    _reseal(saved)
    message = _error_of(ckpt.load, saved, model=_linear(0.0))
    assert f"checkpoint {saved} is damaged: tensors/{tensors.name} is a symbolic link to {outside}" in message
    assert "vfm writes none" in message


def test_a_linked_folder_inside_the_checkpoint_is_refused(saved, tmp_path):
    ranks = saved / "ranks"
    outside = shutil.copytree(ranks, tmp_path / "ranks-elsewhere")
    shutil.rmtree(ranks)
    ranks.symlink_to(outside, target_is_directory=True)
    _reseal(saved)
    message = _error_of(ckpt.verify, saved)
    assert f"ranks is a symbolic link to {outside}" in message


def test_manifest_names_outside_the_folder_read_nothing_there(saved, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("x")
    manifest = json.loads((saved / "manifest.json").read_text())
    manifest["files"][f"../../{secret.name}"] = {"size": 1, "sha256": "0" * 64}
    manifest["files"][str(secret)] = {"size": 1, "sha256": "0" * 64}
    (saved / "manifest.json").write_text(json.dumps(manifest))
    message = _error_of(ckpt.verify, saved)
    assert "is missing" in message and "(and 1 more)" in message
    model = _linear(0.0)
    with pytest.raises(ckpt.CheckpointError):
        ckpt.load(saved, model=model)
    assert torch.equal(model.weight, torch.zeros(2, 3))  # refused whole: nothing was loaded


# --- tensor chunks: coverage by element ranges ----------------------------------------------------------

def _save_fsdp_linear(rank, world, root):
    from torch.distributed.fsdp import fully_shard

    model = torch.nn.Linear(3, 4)
    with torch.no_grad():
        model.weight.copy_(torch.arange(12.0).reshape(4, 3))
        model.bias.copy_(torch.arange(4.0))
    fully_shard(model)  # each rank saves its own rows: shard-00001 rows 0:2, shard-00002 rows 2:4
    return str(ckpt.save(root, 1, model=model))


@pytest.fixture(scope="module")
def two_rank_saved(tmp_path_factory):
    from tests.gloo import spawn

    return Path(spawn(_save_fsdp_linear, 2, tmp_path_factory.mktemp("fsdp") / "run")[0])


def _copy(folder: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(folder, tmp_path / "run" / folder.name))


def test_the_real_two_rank_checkpoint_loads_whole_in_one_process(two_rank_saved, tmp_path):
    model = torch.nn.Linear(3, 4)
    ckpt.load(_copy(two_rank_saved, tmp_path), model=model)
    assert torch.equal(model.weight, torch.arange(12.0).reshape(4, 3)) and torch.equal(model.bias, torch.arange(4.0))


def test_a_chunk_repeated_in_place_of_another_is_refused_naming_the_tensor_and_the_overlap(two_rank_saved, tmp_path):
    # rank 0's header moved onto rank 1's rows: the chunk sizes still add up to the whole tensor and
    # the shape still reads (4, 3), but rows 0:2 are in no file
    folder = _copy(two_rank_saved, tmp_path)
    first = folder / "tensors" / "shard-00001-model-00001-of-00001.safetensors"
    data = first.read_bytes()
    crafted = data.replace(b'\\"saved_offsets\\": [0, 0]', b'\\"saved_offsets\\": [2, 0]', 1)
    crafted = crafted.replace(b'\\"saved_offsets\\": [0]', b'\\"saved_offsets\\": [2]', 1)
    assert crafted != data and len(crafted) == len(data)
    first.write_bytes(crafted)
    _reseal(folder)
    model = torch.nn.Linear(3, 4)
    with torch.no_grad():
        model.weight.fill_(-1.0)
        model.bias.fill_(-1.0)
    message = _error_of(ckpt.load, folder, model=model)
    assert f"checkpoint {folder} is damaged: tensor model.bias is not saved whole: chunks [2:4] and [2:4] overlap" in message
    assert "(and 1 more tensors: model.weight)" in message
    assert torch.equal(model.weight, torch.full((4, 3), -1.0))  # refused whole: nothing was loaded
    with pytest.raises(ckpt.DamagedCheckpointError):
        ckpt.verify(folder)


def test_a_duplicated_tensor_file_is_refused_as_overlapping(two_rank_saved, tmp_path):
    # a third file repeating rank 1's chunks: more than the whole, every element still there once
    folder = _copy(two_rank_saved, tmp_path)
    second = folder / "tensors" / "shard-00002-model-00001-of-00001.safetensors"
    shutil.copy(second, folder / "tensors" / "shard-00003-model-00001-of-00001.safetensors")
    _reseal(folder)
    message = _error_of(ckpt.load, folder, model=torch.nn.Linear(3, 4))
    assert "tensor model.bias is not saved whole: chunks [2:4] and [2:4] overlap" in message


def test_chunk_coverage_is_by_element_ranges():
    from vfm_parallel.checkpoint_integrity import chunk_problem

    grid = [((r, c), (2, 3)) for r in (0, 2) for c in (0, 3)]  # FSDP 2 x TP 2 of a (4, 6) tensor
    assert chunk_problem((4, 6), grid) is None
    assert chunk_problem((4, 6), grid + [((1, 0), (0, 6))]) is None  # an empty chunk covers nothing
    assert chunk_problem((), [((), ())]) is None  # a scalar
    assert chunk_problem((), [((), ()), ((), ())]) == "chunks [] and [] overlap"
    assert chunk_problem((4, 6), grid[:3]) == "6 of its 24 elements are in no saved chunk"
    # sizes adding up to the whole, one overlap and one hole, the overlapping pair not adjacent in order
    shifted = [((0, 0), (2, 3)), ((0, 3), (3, 3)), ((2, 0), (2, 3)), ((3, 3), (1, 3))]
    assert chunk_problem((4, 6), shifted) is None
    bad = [((0, 0), (2, 3)), ((0, 3), (3, 3)), ((2, 0), (2, 3)), ((2, 3), (1, 3))]
    assert chunk_problem((4, 6), bad) == "chunks [0:3, 3:6] and [2:3, 3:6] overlap"
    assert chunk_problem((4, 6), [((-1, 0), (4, 6))]) == "chunk [-1:3, 0:6] lies outside its shape [4, 6]"
    columns = [((0, 0), (4, 3)), ((0, 2), (4, 3)), ((0, 5), (4, 1))]  # a column split, one column shared
    assert chunk_problem((4, 6), columns) == "chunks [0:4, 0:3] and [0:4, 2:5] overlap"


@pytest.mark.parametrize("name", ["manifest.json", "state.json", "ranks/rank_00000.json"])
def test_a_json_file_nested_too_deep_is_refused_as_damaged_naming_it_not_a_recursion_traceback(saved, name):
    (saved / name).write_text("[" * 100_000 + "]" * 100_000)
    if name != "manifest.json":
        _reseal(saved)  # its checksum agrees: the file itself is what is read
    message = _error_of(ckpt.load, saved, model=_linear(0.0))
    assert f"checkpoint {saved} is damaged: {name}" in message and "nested 100000 levels deep" in message
