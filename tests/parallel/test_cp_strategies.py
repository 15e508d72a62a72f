"""cp-ring, cp-ulysses and cp-hybrid on a real ST-DiT (``stdit`` with spatial, temporal, full and
cross-attention): loss and every gradient equal the single-process run; the hybrid's bytes follow
seed table 2; bad token counts fail before any collective. Real gloo groups, cp = 2 and 4."""

from __future__ import annotations

import copy

import pytest
import torch

from tests.gloo import spawn

STRATEGIES = ("cp-ring", "cp-ulysses", "cp-hybrid")
B, C, D, HEADS = 2, 4, 32, 4
# latent (T, H, W) with patch (1, 2, 2) -> grid (t, h, w) = (T, H/2, W/2)
LATENT = {2: (3, 4, 6), 4: (4, 4, 6)}  # cp=2: t=3 frames (not divisible: spatial A2A moves data); cp=4: t=4


def _stdit():
    import vfm_models

    torch.manual_seed(0)
    model = vfm_models.get_family("stdit").create(
        "tiny", hidden=D, num_heads=HEADS, depth=2, text_dim=16, in_channels=C, patch=(1, 2, 2),
        pos_embed="rope", full_attention_blocks=(1,),
    )
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():  # zero-initialised AdaLN gates would hide the attention from the gradients
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.2)
    return model


def _batch(latent, seed=2):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, C, *latent, generator=g)
    t = torch.rand(B, generator=g)
    text_mask = torch.ones(B, 5, dtype=torch.bool)
    text_mask[1, 3:] = False
    cond = {"text": torch.randn(B, 5, 16, generator=g), "text_mask": text_mask}
    return x, t, cond, torch.randn(B, C, *latent, generator=g)


def _loss_and_grads(model, run):
    loss = run(model)
    loss.backward()
    return loss.detach(), {n: p.grad for n, p in model.named_parameters()}


def _compare(ref, got):
    (loss_r, grads_r), (loss_g, grads_g) = ref, got
    missing = [n for n, g in grads_g.items() if g is None]
    assert not missing, f"parameters without a gradient under CP: {missing}"
    grad_diff = max((grads_g[n] - grads_r[n]).abs().max().item() for n in grads_r)
    return {"loss": (loss_g - loss_r).abs().item(), "grad": grad_diff}


def _cp_model(name, reference, mesh):
    from vfm_parallel.strategy import get_strategy

    model = copy.deepcopy(reference)
    return get_strategy(name).apply(model, mesh, model.parallel_plan())


def _strategy_runs(rank, world):
    from torch.distributed.device_mesh import init_device_mesh

    from vfm_parallel import comm_stats, grad_sync

    mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("cp",))
    x, t, cond, target = _batch(LATENT[world])

    def dense(m):
        return ((m(x, t, cond) - target) ** 2).mean()

    g = torch.Generator().manual_seed(3)
    latents = [torch.randn(C, 2, 4, 6, generator=g), torch.randn(C, 3, 4, 4, generator=g)]  # 12 + 12 tokens
    packed_cond = {"text": cond["text"], "text_mask": cond["text_mask"]}

    def packed(m):
        outs = m.forward_packed(latents, t, packed_cond)
        return sum(((o - 1.0) ** 2).mean() for o in outs)

    reference = _stdit()
    out = {"diffs": {}, "bytes": {}}
    for run_name, run, strategies in (("dense", dense, STRATEGIES), ("packed", packed, ("cp-ring", "cp-ulysses"))):
        ref = _loss_and_grads(copy.deepcopy(reference), run)
        for name in strategies:
            model = _cp_model(name, reference, mesh)
            comm_stats.reset()
            loss = run(model)
            loss.backward()
            out["bytes"][f"{name}/{run_name}"] = comm_stats.snapshot()
            grad_sync.run(model)
            out["diffs"][f"{name}/{run_name}"] = _compare(ref, (loss.detach(), {n: p.grad for n, p in model.named_parameters()}))

    # A token count that does not divide by cp: a clear error, and no collective was issued.
    model = _cp_model("cp-hybrid", reference, mesh)
    comm_stats.reset()
    odd = torch.randn(B, C, 3, 2, 6)  # grid (3, 1, 3): 9 tokens
    with pytest.raises(ValueError) as err:
        model(odd, t, cond)
    out["error"] = str(err.value)
    out["bytes_before_error"] = comm_stats.snapshot()
    return out


def _expected_hybrid_bytes(world):
    """Seed table 2 for this stdit (block 0: spatial + temporal + cross; block 1: full + temporal +
    cross), forward and backward, 4-byte floats. Every all-to-all carries q, k, v (3 shapes) and the
    output (1 shape) forward, the same back in the backward: 8 shapes per layer. The ring sends K and
    V per hop: cp-1 hops forward, cp-1 hops of K/V and cp hops of dK/dV backward."""
    T, H, W = LATENT[world]
    b, t, hw, d, cp, f32 = B, T, (H // 2) * (W // 2), D, world, 4
    temporal = (b * hw // cp) * t * d * f32  # (b*h*w/cp, t, d)
    spatial = (b * t // cp) * hw * d * f32 if t % cp else 0  # (b*t/cp, h*w, d); t % cp == 0: shards are frames
    full_hop = b * (hw * t // cp) * d * f32  # (b, h*w*t/cp, d)
    expected = {"cp.temporal": 2 * 8 * temporal, "cp.full": (2 * (cp - 1) + 2 * (cp - 1) + 2 * cp) * full_hop}
    if spatial:
        expected["cp.spatial"] = 8 * spatial
    return expected


@pytest.fixture(scope="module", params=[2, 4], ids=lambda cp: f"cp{cp}")
def runs(request):
    return request.param, spawn(_strategy_runs, request.param)


def test_cp_strategies_on_stdit_match_single_process_loss_and_every_gradient(runs):
    cp, results = runs
    worst = {k: max(max(r["diffs"][k].values()) for r in results) for k in results[0]["diffs"]}
    print(f"\ncp={cp} largest |CP - single process| over loss and every gradient:", {k: f"{v:.1e}" for k, v in worst.items()})
    assert set(worst) == {f"{s}/dense" for s in STRATEGIES} | {"cp-ring/packed", "cp-ulysses/packed"}
    bad = {k: v for k, v in worst.items() if not v < 1e-5}
    assert not bad, f"CP on stdit differs from the single-process run at cp={cp}: {bad}"


def test_cp_hybrid_bytes_per_layer_follow_seed_table_2(runs):
    cp, results = runs
    expected = _expected_hybrid_bytes(cp)
    for rank, result in enumerate(results):
        stats = result["bytes"]["cp-hybrid/dense"]
        got = {layer: n for kind in ("all_to_all", "p2p") for layer, n in stats.get(kind, {}).get("by_layer", {}).items()}
        assert got == expected, f"rank {rank} at cp={cp}: bytes per layer {got} != table 2 {expected}"
        assert set(stats["p2p"]["by_layer"]) == {"cp.full"}  # only full attention rides the ring
        assert "cp.cross" not in str(stats)  # cross-attention keeps its replicated text: no traffic


def test_cp_rejects_a_token_count_not_divisible_by_cp_before_any_collective(runs):
    cp, results = runs
    for result in results:
        assert "9 tokens" in result["error"] and f"cp={cp}" in result["error"] and f"9 % {cp}" in result["error"]
        assert result["bytes_before_error"] == {}
