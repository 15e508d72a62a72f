"""What each spawned rank runs: build a layout, take a step, report differences against the
single-process run of the same model and batch (computed on every rank, in fp32)."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F

from tests.parallel.toy_model import ToyDiT, toy_batch
from vfm_parallel import ParallelDims, parallelize
from vfm_parallel.dims import flat_mesh

SEED = 1234


def make_model(factory=ToyDiT, **kwargs):
    torch.manual_seed(SEED)
    return factory(**kwargs)


def reference(factory, batch, **kwargs):
    """Loss and gradients of the single-process model on the whole batch."""
    model = make_model(factory, **kwargs)
    x, t, cond, target = batch
    loss = F.mse_loss(model(x, t, cond), target)
    loss.backward()
    return loss.detach(), {n: p.grad.detach().clone() for n, p in model.named_parameters()}


def dp_slice(pm, tensor):
    """This rank's share of the batch: DP ranks see different samples, others the same."""
    dp_mesh = flat_mesh(pm.mesh, "dp")
    dp, index = dp_mesh.size(), dp_mesh.get_local_rank()
    n = tensor.shape[0] // dp
    return tensor[index * n : (index + 1) * n]


def full(grad):
    return grad.full_tensor() if hasattr(grad, "full_tensor") else grad


def original_name(pm, name):
    """The single-process parameter name (pipeline stages renumber their blocks from 0)."""
    prefix = pm.plan.blocks + "."
    offset = getattr(pm.inner, "_vfm_block_offset", 0)
    if offset and name.startswith(prefix):
        index, _, rest = name[len(prefix):].partition(".")
        return f"{prefix}{int(index) + offset}.{rest}"
    return name


def parallel_step(pm, batch):
    """One forward/backward of the parallel model on this rank's share; the global mean loss."""
    x, t, cond, target = (dp_slice(pm, v) if torch.is_tensor(v) else {k: dp_slice(pm, c) for k, c in v.items()}
                          for v in batch)
    if pm.schedule is not None:
        loss = pm.pipeline_step(x, t, cond, target)
        loss = loss if loss is not None else torch.zeros(())
        dist.all_reduce(loss, group=pm.mesh["pp"].get_group())  # only the last stage holds it
    else:
        loss = F.mse_loss(pm.model(x, t, cond), target)
        loss.backward()
        loss = loss.detach()
    pm.sync_grads()
    loss = loss.clone()
    dp_mesh = flat_mesh(pm.mesh, "dp")
    dist.all_reduce(loss, group=dp_mesh.get_group())
    return loss / dp_mesh.size()


def parity(dims, strategies, options=None, factory=ToyDiT, model_kwargs=None, batch=None, full_grad=None):
    """{"loss": |loss diff|, "grad": max |grad diff|, "names": compared names} for one layout.
    ``full_grad(param)`` gives a parameter's whole gradient (default: DTensor ``full_tensor``)."""
    model_kwargs = model_kwargs or {}
    batch = batch if batch is not None else toy_batch()
    ref_loss, ref_grads = reference(factory, batch, **model_kwargs)
    pm = parallelize(make_model(factory, **model_kwargs), dims, strategies, options=options)
    loss = parallel_step(pm, batch)
    worst, names = 0.0, []
    for name, param in pm.inner.named_parameters():
        if param.grad is None:
            raise AssertionError(f"{name} has no gradient on rank {dist.get_rank()}")
        key = original_name(pm, name).replace("_fsdp_wrapped_module.", "")
        grad = full_grad(param) if full_grad is not None else full(param.grad)
        worst = max(worst, (grad - ref_grads[key]).abs().max().item())
        names.append(key)
    dist.barrier()
    return {"loss": abs(loss.item() - ref_loss.item()), "grad": worst, "names": names, "n_ref": len(ref_grads)}


def two_rank_layouts(rank, world):
    """Every 2-process layout in one process group."""
    pp_opts = lambda s: {"pp": {"schedule": s, "microbatches": 2}}  # noqa: E731
    layouts = {
        "tp2": (ParallelDims(tp=2), ["tp"], None),
        "tp2+sp": (ParallelDims(tp=2), ["sp"], None),
        "fsdp2": (ParallelDims(dp_shard=2), ["fsdp"], None),
        "ddp2": (ParallelDims(dp_shard=2), ["ddp"], None),
        "pp2-gpipe": (ParallelDims(pp=2), ["pp"], pp_opts("gpipe")),
        "pp2-1f1b": (ParallelDims(pp=2), ["pp"], pp_opts("1f1b")),
        "fsdp2+ac-full": (ParallelDims(dp_shard=2), ["fsdp", "ac"], {"ac": {"mode": "full"}}),
        "tp2+sp+ac-selective": (ParallelDims(tp=2), ["sp", "ac"], {"ac": {"mode": "selective"}}),
        "fsdp2+compile": (ParallelDims(dp_shard=2), ["fsdp", "compile"], {"compile": {"backend": "aot_eager"}}),
    }
    out = {name: parity(*layout) for name, layout in layouts.items()}
    out["pp2-embedders"] = pp_embedders_after_steps(steps=5)
    return out


def four_rank_layouts(rank, world):
    pp_opts = {"pp": {"schedule": "1f1b", "microbatches": 2}}
    layouts = {
        "hsdp2x2": (ParallelDims(dp_replicate=2, dp_shard=2), ["hsdp"], None),
        "fsdp2xtp2": (ParallelDims(dp_shard=2, tp=2), ["tp", "fsdp"], None),
        "pp2xtp2": (ParallelDims(pp=2, tp=2), ["pp", "tp"], pp_opts),
        # replicas of a TP model: hsdp sharding over dp_shard = 1 (ddp refuses DTensor parameters)
        "hsdp2x1xtp2": (ParallelDims(dp_replicate=2, tp=2), ["tp", "hsdp"], None),
    }
    return {name: parity(*layout) for name, layout in layouts.items()}


def pp_embedders_after_steps(steps: int):
    """Train PP2 for ``steps`` AdamW steps; the conditioning embedders' bytes on each rank."""
    pm = parallelize(make_model(), ParallelDims(pp=2), ["pp"], options={"pp": {"schedule": "1f1b", "microbatches": 2}})
    opt = torch.optim.AdamW(pm.model.parameters(), lr=1e-2)
    for step in range(steps):
        opt.zero_grad()
        parallel_step(pm, toy_batch(seed=step))
        opt.step()
    flat = torch.cat([p.detach().reshape(-1) for n, p in pm.model.named_parameters()
                      if n.split(".")[0] in pm.plan.conditioning])
    gathered = [torch.empty_like(flat) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, flat)
    initial = torch.cat([p.detach().reshape(-1) for n, p in make_model().named_parameters()
                         if n.split(".")[0] in pm.plan.conditioning])
    return {"bitwise_equal": all(torch.equal(gathered[0], g) for g in gathered),
            "moved": (flat - initial).abs().max().item()}


def rng_table(rank, world):
    """For each stream and each mesh dimension: are draws of ranks that differ only along that
    dimension the same or different? {stream: {dim: "same" | "diff" | "mixed"}}."""
    from vfm_parallel import rng

    table: dict[str, dict[str, str]] = {s: {} for s in rng.STREAMS}
    for dims in (ParallelDims(dp_shard=2, cp=2), ParallelDims(pp=2, tp=2), ParallelDims(dp_replicate=2, tp=2)):
        mesh = dims.build_mesh("cpu")
        coords = [None] * world
        dist.all_gather_object(coords, rng.coordinates(mesh))
        for stream in rng.STREAMS:
            draw = torch.rand(8, generator=rng.generator(stream, mesh, seed=SEED))
            draws = [torch.empty_like(draw) for _ in range(world)]
            dist.all_gather(draws, draw)
            for dim in (d for d in rng.coordinates(mesh) if getattr(dims, d) > 1):
                verdicts = {
                    torch.equal(draws[a], draws[b])
                    for a in range(world) for b in range(world)
                    if coords[a][dim] != coords[b][dim]
                    and all(coords[a][d] == coords[b][d] for d in coords[a] if d != dim)
                }
                verdict = "mixed" if len(verdicts) > 1 else ("same" if verdicts.pop() else "diff")
                previous = table[stream].setdefault(dim, verdict)
                table[stream][dim] = previous if previous == verdict else "mixed"
    return table


def four_rank_all(rank, world):
    from vfm_parallel.plugins import host

    cp = cp_layouts(rank, world) if "cp-ring" in host.names("strategies") else {}
    return {**four_rank_layouts(rank, world), **cp, "rng": rng_table(rank, world)}


FAMILIES = ("dit", "dit-cross", "moviegen", "stdit", "wan")


def family_model(family: str):
    """A tiny real family model whose zero-initialised AdaLN layers carry signal."""
    import vfm_models
    from tests.models.test_families_support import unmodulated

    return unmodulated(vfm_models.get_family(family).create("tiny"))


def family_batch(family: str, batch=4, frames=2, size=4, seed=0):
    from tests.models.test_families_support import cond_for

    model = family_model(family)
    g = torch.Generator().manual_seed(seed)
    channels = model.config.in_channels
    x = torch.randn(batch, channels, frames, size, size, generator=g)
    t = torch.rand(batch, generator=g)
    cond = cond_for(model, batch, generator=g)
    target = torch.randn(batch, model.config.out_channels or channels, frames, size, size, generator=g)
    return x, t, cond, target


def real_families(rank, world):
    """TP2+SP and PP2 (1F1B) of every built-in family against its single-process run."""
    out = {}
    for family in FAMILIES:
        batch = family_batch(family)
        factory = lambda family=family: family_model(family)  # noqa: E731
        for layout, (dims, strategies, options) in {
            "tp2+sp": (ParallelDims(tp=2), ["sp"], None),
            "pp2-1f1b": (ParallelDims(pp=2), ["pp"], {"pp": {"schedule": "1f1b", "microbatches": 2}}),
        }.items():
            out[f"{family}/{layout}"] = parity(dims, strategies, options, factory=factory, batch=batch)
    return out


def cp_layouts(rank, world):
    """Combinations with the context-parallel strategies (when they are registered)."""
    return {
        # FSDP over dp_shard x cp (here: the cp ranks) averages the 2-D DTensor gradients over cp.
        "tp2xcp2": parity(ParallelDims(cp=2, tp=2), ["tp", "cp-ring", "fsdp"], {"cp-ring": {"average_gradients": False}}),
        "fsdp2xcp2": parity(ParallelDims(dp_shard=2, cp=2), ["fsdp", "cp-ring"],
                            {"cp-ring": {"average_gradients": False}}),
        # no data parallelism: cp-ring itself averages the TP DTensor gradients over cp
        "tp2xcp2-no-fsdp": parity(ParallelDims(cp=2, tp=2), ["tp", "cp-ring"]),
    }


def assert_parity(results, key: str, tol: float = 1e-5) -> None:
    """Every rank's loss and gradient differences for ``key`` are within ``tol``, and every
    single-process parameter was compared on some rank."""
    for rank, rank_result in enumerate(results):
        r = rank_result[key]
        assert r["loss"] < tol and r["grad"] < tol, (key, rank, r["loss"], r["grad"])
    compared = set().union(*(set(rank_result[key]["names"]) for rank_result in results))
    assert len(compared) == results[0][key]["n_ref"], f"{key}: some parameters were never compared"
