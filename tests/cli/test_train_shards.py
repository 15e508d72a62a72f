"""``vfm train`` from real vfm-data shards: bucketed dense and packed batches, exact resume with the
loader state, text-conditional training from the shards' text embeddings, and an export that
``vfm generate`` turns into a video.

The shards are written by vfm-data's own ShardWriter + prepare_dataset, the text embeddings by the
registered ``hash`` text encoder, the latents are ``pixel``-tokenizer videos (the video itself).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys

import pytest
import torch

import vfm_models
from vfm_cli import recipe
from vfm_cli.recipe.loaders import ShardBatches, shard_loader
from vfm_parallel.trainer import ConfigError, from_dict, train
from vfm_parallel.trainer.batches import micro_loss
from vfm_parallel.trainer.synthetic import make_blobs

from tests.cli.one_thread import one_thread_quiet_loader  # noqa: F401 (autouse)

TEXT_DIM = 16
VIDEO, IMAGE = (3, 2, 8, 8), (3, 1, 8, 8)  # (C, T, H, W); patch (1, 2, 2): 32 and 16 tokens
PLACES = ["top", "right", "bottom", "left", "centre"]


def _write_bucket(folder, name, shape, n, seed):
    from vfm_data import SampleMeta, ShardWriter, prepare_dataset

    encoder = vfm_models.get_text_encoder("hash")(dim=TEXT_DIM)
    latents, labels = make_blobs(n, shape, len(PLACES), seed=seed)
    written = {}
    with ShardWriter(folder / name, max_shard_bytes=12_000) as w:  # several shards per bucket
        for i in range(n):
            caption = f"a {'small ' * (i % 3)}blob moving at the {PLACES[int(labels[i])]}"  # lengths differ
            emb, _ = encoder.encode([caption])
            meta = SampleMeta(source="synthetic.mp4", span=(0, 1), fps=8, size=shape[2:], caption=caption,
                              modality="video" if shape[1] > 1 else "image", tokenizer="pixel", text_encoder="hash",
                              extra={"tokenizer_options": {"patch": 1}, "text_encoder_options": {"dim": TEXT_DIM}})
            key = f"{name}{i:03d}"
            w.write(key, latents[i], emb[0], meta)
            written[key] = latents[i]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        prepare_dataset(folder / name)
    return written


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """Two buckets (2-frame videos, images) and a blend file over both, as `vfm shard` writes them."""
    from vfm_data import write_blend

    root = tmp_path_factory.mktemp("shards")
    latents = {**_write_bucket(root, "v", VIDEO, 24, seed=1), **_write_bucket(root, "i", IMAGE, 16, seed=2)}
    write_blend(root / "blend.yaml", [(root / "v", 24), (root / "i", 16)])
    return root, latents


def shard_config(out_dir, blend, **sections) -> dict:
    cfg = {
        "model": {"family": "dit-cross", "preset": "tiny", "options": {"patch": [1, 2, 2]}},
        "data": {"source": "shards", "blend": str(blend), "micro_batch": 2},
        "optim": {"lr": 3e-3, "warmup_steps": 1},
        "train": {"steps": 6, "seed": 3, "out_dir": str(out_dir)},
        "ema": {"decay": 0.9},
        "checkpoint": {"export": False},
        "logging": {"tensorboard": False, "loss_curve": False, "progress": False, "peak_tflops": 1.0},
    }
    for name, values in sections.items():
        cfg.setdefault(name, {}).update(values)
    return cfg


def run(cfg: dict):
    parsed = from_dict(cfg)
    return train(parsed, recipe.parts_builder(recipe.validate(parsed)))


@pytest.mark.parametrize("packing", [False, True], ids=["bucketed", "packed"])
def test_shard_training_stopped_and_resumed_from_the_loader_state_equals_a_straight_run(shards, tmp_path, packing):
    root, _ = shards
    data = {"packing": True, "max_seq_len": 64} if packing else {}
    straight = run(shard_config(tmp_path / "a", root / "blend.yaml", data=data))
    split = shard_config(tmp_path / "b", root / "blend.yaml", data=data, train={"stop_at": 3})
    first = run(split)
    state = json.loads((tmp_path / "b" / "checkpoints" / "step_00000003" / "ranks" / "rank_00000.json").read_text())
    assert state["loader"]["step"] == 3 and state["loader"]["stream_states"]  # vfm-data's loader position
    split["train"]["stop_at"] = 0
    resumed = run(split)
    assert resumed.start_step == 3
    assert {**first.losses, **resumed.losses} == straight.losses  # bitwise
    assert len(straight.losses) == 6 and len(set(straight.losses.values())) == 6


def test_a_packed_step_equals_the_unpacked_step_on_the_same_samples(shards, tmp_path):
    root, written = shards
    cfg = from_dict(shard_config(tmp_path, root / "blend.yaml",
                                 data={"blend": "", "shards": [str(root / "v")], "packing": True, "max_seq_len": 96}))
    r = recipe.resolve(cfg)
    from vfm_parallel.trainer.distributed import Coordinates
    from vfm_parallel.trainer import RunContext

    ctx = RunContext(Coordinates.of(0, {"pp": 1, "dp_replicate": 1, "dp_shard": 1, "cp": 1, "tp": 1}), torch.device("cpu"), cfg)
    loader = shard_loader(cfg, ctx, r)
    raw = next(iter(loader.loader))
    packed = next(iter(ShardBatches([raw], r.mcfg)))
    n = len(packed["x0s"])
    assert n == 6 and packed["num_tokens"] == 6 * 32  # two packs of three 32-token videos
    for key, x0 in zip(raw.keys, packed["x0s"]):  # the adapter gives back exactly the written latents
        assert torch.equal(x0, written[key])
    lengths = packed["cond"]["text_mask"].sum(1)
    assert len(set(lengths.tolist())) > 1  # captions of different lengths: the text mask matters
    dense = {"x0": torch.stack(packed["x0s"]), "cond": packed["cond"]}
    # Precondition: one (N, ...) noise draw equals N sequential (1, ...) draws for this shape, so both
    # paths see the same noise and the same levels.
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    assert torch.equal(torch.randn((n, *VIDEO), generator=g1), torch.cat([torch.randn((1, *VIDEO), generator=g2) for _ in range(n)]))

    torch.manual_seed(0)
    model = vfm_models.get_family("dit-cross").build(r.mcfg)
    formulation = vfm_models.get_formulation("edm")()
    results = []
    for batch in (packed, dense):
        model.zero_grad()
        loss = micro_loss(formulation, model, batch, torch.Generator().manual_seed(1), torch.Generator().manual_seed(2))
        loss.backward()
        results.append((loss.detach(), {k: p.grad.clone() for k, p in model.named_parameters()}))
    (loss_p, grads_p), (loss_d, grads_d) = results
    torch.testing.assert_close(loss_p, loss_d, rtol=1e-5, atol=1e-6)
    for k in grads_d:
        torch.testing.assert_close(grads_p[k], grads_d[k], rtol=1e-4, atol=1e-6, msg=lambda m: f"{k}: {m}")


def test_a_packed_tiny_run_lowers_the_loss(shards, tmp_path):
    root, _ = shards
    cfg = shard_config(tmp_path, root / "blend.yaml", data={"packing": True, "max_seq_len": 96},
                       train={"steps": 40}, optim={"lr": 1e-2, "warmup_steps": 3})
    losses = list(run(cfg).losses.values())
    first, last = sum(losses[:8]) / 8, sum(losses[-8:]) / 8
    assert last < 0.8 * first, f"loss went {first:.4f} -> {last:.4f}"


def test_the_model_text_dim_must_equal_the_shards_text_encoder_dim(shards, tmp_path):
    root, _ = shards
    cfg = from_dict(shard_config(tmp_path, root / "blend.yaml", model={"options": {"text_dim": 32}}))
    with pytest.raises(ConfigError, match=r"text_dim is 32 but the shards' text embeddings \(hash\) are 16 wide") as info:
        recipe.validate(cfg)
    assert info.value.key == "model.options.text_dim"
    cfg = from_dict(shard_config(tmp_path, root / "blend.yaml", model={"text_encoder": "minilm"}))
    with pytest.raises(ConfigError, match="'minilm', but the shards were made with the text encoder 'hash'"):
        recipe.validate(cfg)


def test_an_unconditional_dit_trains_from_shards_and_exports_without_a_text_encoder(shards, tmp_path):
    root, _ = shards
    cfg = shard_config(tmp_path, root / "blend.yaml", model={"family": "dit"}, train={"steps": 2},
                       checkpoint={"export": True})
    result = run(cfg)
    from vfm_models.export import load_export

    _, meta = load_export(result.export)
    assert meta["config"]["num_classes"] == 0 and meta["text_encoder"] == "" and meta["tokenizer"] == "pixel"


def test_a_text_conditional_export_from_shards_generates_a_video(shards, tmp_path):
    root, _ = shards
    cfg = shard_config(tmp_path / "run", root / "blend.yaml", train={"steps": 4}, checkpoint={"export": True})
    result = run(cfg)
    meta = json.loads((result.export / "config.json").read_text())
    assert meta["text_encoder"] == "hash" and meta["text_encoder_options"] == {"dim": TEXT_DIM}
    assert meta["tokenizer"] == "pixel" and meta["tokenizer_options"] == {"patch": 1}
    assert meta["latent_shape"] == list(VIDEO) and meta["config"]["text_dim"] == TEXT_DIM
    out = tmp_path / "videos"
    proc = subprocess.run([sys.executable, "-m", "vfm_cli.main", "generate", "--checkpoint", str(result.export),
                           "--prompt", "a blob moving at the left", "--steps", "2", "-o", str(out)],
                          env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    import av

    with av.open(str(out / "0000.mp4")) as container:
        frames = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    assert len(frames) == VIDEO[1] and frames[0].shape == (VIDEO[2], VIDEO[3], 3)
