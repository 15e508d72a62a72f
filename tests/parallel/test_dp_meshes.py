"""The data-parallel strategies take their flattened meshes without slicing a flattened dimension
from the root mesh (torch warns on every rank that this is deprecated and will be refused), over
the process groups ``build_mesh`` made: parallelize makes no new communicator."""

from __future__ import annotations

import warnings

import pytest
import torch.distributed as dist

from tests.gloo import spawn
from tests.parallel.scenarios import make_model, parallel_step
from tests.parallel.toy_model import toy_batch
from vfm_parallel import ParallelDims, parallelize
from vfm_parallel.dims import flat_mesh

DEPRECATION = "Slicing a flattened dim from root mesh"
NO_CP_AVERAGE = {"cp-ring": {"average_gradients": False}}

TWO_RANKS = {
    "fsdp2": (ParallelDims(dp_shard=2), ["fsdp"], None),
    "ddp2": (ParallelDims(dp_shard=2), ["ddp"], None),
    "fsdp-cp2": (ParallelDims(cp=2), ["cp-ring", "fsdp"], NO_CP_AVERAGE),
    "ddp-cp2": (ParallelDims(cp=2), ["cp-ring", "ddp"], NO_CP_AVERAGE),
}
FOUR_RANKS = {
    "hsdp2x2": (ParallelDims(dp_replicate=2, dp_shard=2), ["hsdp"], None),
    "hsdp2xcp2": (ParallelDims(dp_replicate=2, cp=2), ["cp-ring", "hsdp"], NO_CP_AVERAGE),
    "fsdp2xcp2": (ParallelDims(dp_shard=2, cp=2), ["cp-ring", "fsdp"], NO_CP_AVERAGE),
}


def _process_groups() -> int:
    return len(dist.distributed_c10d._world.pg_map)


def _data_parallel_groups(pm) -> list:
    """The process groups the data-parallel wrapper reduces over: DDP's, or the FSDP DTensors'."""
    if "ddp" in pm.strategies:
        return [pm.model.process_group]
    mesh = next(pm.model.parameters()).device_mesh
    return [mesh.get_group(dim) for dim in range(mesh.ndim)]


def _expected_groups(pm) -> list:
    if "ddp" in pm.strategies:
        return [flat_mesh(pm.mesh, "dp_cp").get_group()]
    shard = flat_mesh(pm.mesh, "dp_shard_cp").get_group()
    return [pm.mesh["dp_replicate"].get_group(), shard] if "hsdp" in pm.strategies else [shard]


def _layouts(rank, world, layouts):
    """Per layout: the deprecation warning raised (or None), process groups made by parallelize,
    whether the wrapper reduces over the ranks of the mesh's groups, and the step's loss."""
    out = {}
    for name, (dims, strategies, options) in layouts.items():
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message=DEPRECATION)
            try:
                mesh = dims.build_mesh("cpu")
                before = _process_groups()
                pm = parallelize(make_model(), dims, strategies, mesh=mesh, options=options)
                made = _process_groups() - before
                loss = parallel_step(pm, toy_batch()).item()
            except Warning as exc:  # the filter turned it into an exception
                out[name] = {"warning": f"{type(exc).__name__}: {exc}"}
                continue
        # ranks, not identity: DTensor reuses an earlier layout's equal mesh (same ranks, its groups)
        ranks = [dist.get_process_group_ranks(g) for g in _data_parallel_groups(pm)]
        expected = [dist.get_process_group_ranks(g) for g in _expected_groups(pm)]
        out[name] = {"warning": None, "groups_made": made, "mesh_ranks": ranks == expected, "loss": loss}
        dist.barrier()
    return out


@pytest.fixture(scope="module")
def two_ranks():
    return spawn(_layouts, 2, TWO_RANKS)


@pytest.fixture(scope="module")
def four_ranks():
    return spawn(_layouts, 4, FOUR_RANKS)


def _reports(two_ranks, four_ranks, layout):
    return two_ranks if layout in TWO_RANKS else four_ranks


@pytest.mark.parametrize("layout", [*TWO_RANKS, *FOUR_RANKS])
def test_data_parallel_strategy_slices_no_flattened_dim_from_root_mesh(two_ranks, four_ranks, layout):
    for rank, report in enumerate(_reports(two_ranks, four_ranks, layout)):
        assert report[layout]["warning"] is None, (layout, rank, report[layout]["warning"])


@pytest.mark.parametrize("layout", [*TWO_RANKS, *FOUR_RANKS])
def test_data_parallel_strategy_reduces_over_the_mesh_groups_and_makes_no_new_group(two_ranks, four_ranks, layout):
    for rank, report in enumerate(_reports(two_ranks, four_ranks, layout)):
        r = report[layout]
        assert r["warning"] is None, (layout, rank, r["warning"])
        assert r["groups_made"] == 0, (layout, rank, r["groups_made"])
        assert r["mesh_ranks"], (layout, rank)


def _hsdp_mesh_with_and_without_concatenate(rank, world):
    """(ranks, dim names) of hsdp_mesh's mesh through DeviceMesh._concatenate, and through the slice
    that torch before 2.10 (which has no _concatenate) takes instead."""
    from unittest import mock

    from torch.distributed.device_mesh import DeviceMesh

    from vfm_parallel.dims import hsdp_mesh

    mesh = ParallelDims(dp_replicate=2, dp_shard=2).build_mesh("cpu")
    ours = hsdp_mesh(mesh)
    with mock.patch.object(DeviceMesh, "_concatenate", None), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the slice is deprecated on this torch, not on those
        older = hsdp_mesh(mesh)
    return [(m.mesh.tolist(), m.mesh_dim_names) for m in (ours, older)]


def test_hsdp_mesh_on_a_torch_without_concatenate_is_the_same_mesh_by_the_slice():
    for ours, older in spawn(_hsdp_mesh_with_and_without_concatenate, 4):
        assert ours == older and ours[1] == ("dp_replicate", "dp_shard_cp")
