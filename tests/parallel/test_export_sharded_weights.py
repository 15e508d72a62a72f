"""Weights sharded by FSDP (DTensors) given to ``save_export`` or ``save_state_dict`` are refused at once,
on the calling rank alone, with an error that names them and says how to gather the whole weights;
before, the export failed deep in the writer with "Attempted to access the data pointer on an invalid
python storage". Gathered as the error says, on every rank, the export is the unsharded model's.
A model wrapped by DDP or torch.compile is exported under the model's own names, so load_export loads it."""

from __future__ import annotations

import pytest
import torch

from tests.gloo import spawn
from tests.infer.tiny import tiny_dit, tiny_meta


def _export_on_rank0_alone(rank, world, folder):
    from vfm_models.checkpoint import ShardedWeightsError, save_state_dict
    from vfm_models.export import save_export
    from vfm_parallel import ParallelDims, parallelize

    torch.manual_seed(0)
    model = tiny_dit()
    pm = parallelize(model, ParallelDims(dp_shard=world), ["fsdp"])
    messages = []
    if rank == 0:  # alone: a check that needed the other rank would wait for it until the test's timeout
        for write in (lambda: save_export(f"{folder}/export", pm.model, {**tiny_meta(), "config": model.config}),
                      lambda: save_state_dict(f"{folder}/weights.safetensors", pm.model.state_dict())):
            with pytest.raises(ShardedWeightsError) as refused:
                write()
            messages.append(str(refused.value))
    return messages


def test_sharded_weights_are_refused_by_name_on_one_rank_with_how_to_gather_them(tmp_path):
    messages = spawn(_export_on_rank0_alone, 2, str(tmp_path), timeout=120)[0]
    for message in messages:
        assert "DTensor" in message and "x_embedder" in message, message
        assert "get_model_state_dict" in message and "full_state_dict=True" in message, message
    assert messages[0].startswith(f"refusing to export to {tmp_path}/export"), messages[0]
    assert not (tmp_path / "export").exists() and not (tmp_path / "weights.safetensors").exists()


def _export_gathered(rank, world, folder):
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
    from vfm_models.export import load_export, save_export
    from vfm_parallel import ParallelDims, parallelize

    torch.manual_seed(0)
    model = tiny_dit()
    whole = {k: v.clone() for k, v in model.state_dict().items()}
    pm = parallelize(model, ParallelDims(dp_shard=world), ["fsdp"])
    state = get_model_state_dict(pm.model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    if rank == 0:
        save_export(f"{folder}/export", state, {**tiny_meta(), "config": model.config})
        exported, _ = load_export(f"{folder}/export")
        return all(torch.equal(exported.state_dict()[k], v) for k, v in whole.items())
    return True


def test_weights_gathered_as_the_error_says_export_the_unsharded_model(tmp_path):
    assert spawn(_export_gathered, 2, str(tmp_path), timeout=120) == [True, True]


def _export_ddp(rank, world, folder):
    from torch.nn.parallel import DistributedDataParallel
    from vfm_models.export import load_export, save_export

    model = tiny_dit()
    save_export(f"{folder}/export", DistributedDataParallel(model), {**tiny_meta(), "config": model.config})
    exported, _ = load_export(f"{folder}/export")
    return all(torch.equal(exported.state_dict()[k], v) for k, v in model.state_dict().items())


def test_an_export_of_a_ddp_wrapped_model_holds_the_model_s_own_names_and_loads(tmp_path):
    """DDP's wrapper names every weight ``module.<name>``: the export was written and then refused by
    load_export (66 missing, 66 unexpected)."""
    assert spawn(_export_ddp, 1, str(tmp_path), timeout=120) == [True]


def test_an_export_of_a_torch_compiled_model_holds_the_model_s_own_names_and_loads(tmp_path):
    """torch.compile's wrapper names every weight ``_orig_mod.<name>``: the same unloadable export."""
    from vfm_models.export import load_export, save_export

    model = tiny_dit()
    save_export(tmp_path / "export", torch.compile(model), {**tiny_meta(), "config": model.config})
    exported, _ = load_export(tmp_path / "export")
    assert all(torch.equal(exported.state_dict()[k], v) for k, v in model.state_dict().items())
