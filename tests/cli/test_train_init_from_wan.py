"""``vfm train`` fine-tunes a converted Wan: ``model.init_from`` names a diffusers
``WanTransformer3DModel`` folder (tiny, random), the run trains on real text-conditional vfm-data
shards with the rectified-flow formulation Wan uses, and its export goes back to a diffusers folder."""

from __future__ import annotations

import pytest
import torch

from tests.cli.one_thread import one_thread_quiet_loader  # noqa: F401 (autouse)
from tests.cli.test_train_shards import TEXT_DIM, run, shard_config, shards

diffusers = pytest.importorskip("diffusers")


def test_vfm_train_fine_tunes_a_converted_wan_and_exports_it_to_diffusers(shards, tmp_path):  # noqa: F811

    from vfm_models.adapters.exports import export_to_external, source_weights
    from vfm_models.checkpoint import load_state_dict

    root, _ = shards  # pixel latents (3 channels), hash text embeddings of width TEXT_DIM
    torch.manual_seed(0)
    hub = diffusers.WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=24,
                                          in_channels=3, out_channels=3, text_dim=TEXT_DIM, freq_dim=32, ffn_dim=64,
                                          num_layers=2, rope_max_seq_len=64)
    hub.save_pretrained(tmp_path / "hub" / "transformer")
    cfg = shard_config(tmp_path / "run", root / "blend.yaml", train={"steps": 2}, checkpoint={"export": True},
                       optim={"lr": 1e-4, "warmup_steps": 1})
    cfg["model"] = {"family": "wan", "formulation": "rectified-flow", "init_from": str(tmp_path / "hub")}
    result = run(cfg)
    start = source_weights(tmp_path / "hub")
    tuned = load_state_dict(result.export / "model.safetensors")
    assert tuned.keys() == start.keys()
    moved = max(float((tuned[k] - start[k]).abs().max()) for k in start)
    assert 0 < moved < 5e-3  # two small steps from the public weights, not a fresh random init
    export_to_external(result.export, tmp_path / "back")
    back = diffusers.WanTransformer3DModel.from_pretrained(tmp_path / "back")
    assert torch.equal(back.state_dict()["proj_out.weight"], tuned["final_layer.linear.weight"])
