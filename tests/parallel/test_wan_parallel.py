"""A tiny Wan converted from a diffusers ``WanTransformer3DModel`` folder trains under FSDP2, TP2
(its q/k RMSNorm spans the heads TP splits), TP2+SP, PP2 and CP2 on real gloo groups with the loss
and gradients of one process, and the FSDP2-trained weights export to a diffusers folder that
``WanTransformer3DModel.from_pretrained`` loads and runs with vfm's output."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F

from tests.gloo import spawn

STEPS = 3
LR = 1e-3
TINY = dict(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=24, in_channels=4, out_channels=4,
            text_dim=16, freq_dim=32, ffn_dim=64, num_layers=2, rope_max_seq_len=64)


def batch(step: int, size: int = 4):
    g = torch.Generator().manual_seed(100 + step)
    x = torch.randn(size, 4, 2, 4, 4, generator=g)
    t = torch.rand(size, generator=g)
    cond = {"text": torch.randn(size, 6, 16, generator=g)}
    target = torch.randn(size, 4, 2, 4, 4, generator=g)
    return x, t, cond, target


def converted_wan(folder):
    import vfm_models
    from vfm_models.adapters import load_external

    options, state = load_external(folder).to_vfm()
    model = vfm_models.get_family("wan").create(**options)
    model.load_state_dict(state, strict=True)
    return model


def _layouts():
    from vfm_parallel import ParallelDims

    return {
        "fsdp2": (ParallelDims(dp_shard=2), ["fsdp"], None),
        "tp2": (ParallelDims(tp=2), ["tp"], None),
        "tp2+sp": (ParallelDims(tp=2), ["sp"], None),
        "pp2-1f1b": (ParallelDims(pp=2), ["pp"], {"pp": {"schedule": "1f1b", "microbatches": 2}}),
        "cp2-ring": (ParallelDims(cp=2), ["cp-ring"], None),
    }


def train_layouts(rank, world, folder):
    """Per layout: step-1 loss/gradient parity, then the losses of STEPS AdamW steps against one process."""
    from tests.parallel.scenarios import full, original_name, parallel_step, parity
    from vfm_parallel import parallelize

    single = converted_wan(folder)
    opt = torch.optim.AdamW(single.parameters(), lr=LR)
    ref_losses = []
    for step in range(STEPS):
        x, t, cond, target = batch(step)
        loss = F.mse_loss(single(x, t, cond), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        ref_losses.append(loss.item())
    out = {}
    for name, (dims, strategies, options) in _layouts().items():
        first = parity(dims, strategies, options, factory=lambda: converted_wan(folder), batch=batch(0))
        pm = parallelize(converted_wan(folder), dims, strategies, options=options)
        opt = torch.optim.AdamW(pm.model.parameters(), lr=LR)
        losses = []
        for step in range(STEPS):
            opt.zero_grad()
            losses.append(parallel_step(pm, batch(step)).item())
            opt.step()
        trained = {}
        if name in ("fsdp2", "tp2"):  # whole parameters on every rank
            trained = {original_name(pm, n).replace("_fsdp_wrapped_module.", ""): full(p.detach()).clone()
                       for n, p in pm.inner.named_parameters()}
        out[name] = {"first": first, "losses": losses, "trained": trained}
        dist.barrier()
    return {"ref_losses": ref_losses, "ref_trained": {n: p.detach().clone() for n, p in single.named_parameters()},
            "layouts": out}


@pytest.fixture(scope="module")
def wan_folder(tmp_path_factory):
    """A diffusers WanTransformer3DModel folder with random weights (every layer carries signal)."""
    # here, not at import: the spawned ranks import this module and need no diffusers
    WanTransformer3DModel = pytest.importorskip("diffusers").WanTransformer3DModel

    torch.manual_seed(0)
    model = WanTransformer3DModel(**TINY)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * 0.2)
    folder = tmp_path_factory.mktemp("wan") / "transformer"
    model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def results(wan_folder):
    return spawn(train_layouts, 2, str(wan_folder))


@pytest.mark.parametrize("layout", list(("fsdp2", "tp2", "tp2+sp", "pp2-1f1b", "cp2-ring")))
def test_converted_wan_trains_with_the_loss_and_gradients_of_one_process(results, layout):
    for rank, result in enumerate(results):
        first = result["layouts"][layout]["first"]
        assert first["loss"] < 1e-5 and first["grad"] < 1e-5, (layout, rank, first)
        losses, ref = result["layouts"][layout]["losses"], result["ref_losses"]
        assert ref[-1] < ref[0]  # it trains
        assert max(abs(a - b) for a, b in zip(losses, ref)) < 1e-5, (layout, rank, losses, ref)
    compared = set().union(*(set(r["layouts"][layout]["first"]["names"]) for r in results))
    assert len(compared) == results[0]["layouts"][layout]["first"]["n_ref"]


@pytest.mark.parametrize("layout", ["fsdp2", "tp2"])
def test_trained_weights_equal_one_process_and_export_to_a_diffusers_folder_that_runs(results, layout, tmp_path):
    import vfm_models
    from diffusers import WanTransformer3DModel
    from vfm_models.adapters import get_adapter, save_diffusers_folder

    trained, ref = results[0]["layouts"][layout]["trained"], results[0]["ref_trained"]
    # AdamW divides by sqrt(v): fp32 rounding in near-zero gradients moves a weight by up to ~2% of a
    # step (measured 5.5e-5); a lost or doubled gradient would move it by a whole step (~LR)
    assert max((trained[n] - ref[n]).abs().max().item() for n in ref) < 0.05 * LR * STEPS
    adapter = get_adapter("diffusers-wan")
    options = adapter.options_from_external(TINY)
    folder = save_diffusers_folder(tmp_path / "export", adapter.to_external(trained, options),
                                   adapter.options_to_external(options), adapter.diffusers_class)
    exported = WanTransformer3DModel.from_pretrained(folder).eval()
    ours = vfm_models.get_family("wan").create(**options).eval()
    ours.load_state_dict(trained)
    x, t, cond, _ = batch(STEPS)
    with torch.no_grad():
        theirs = exported(x, t * 1000, cond["text"], return_dict=False)[0]
        diff = (ours(x, t, cond) - theirs).abs().max().item()
    assert diff < 1e-4
