"""``[validation]``: a held-out loss at fixed noise levels and fixed noise draws, the same twice, the same
after a resume (logged once per step), the same in 1 and 2 gloo processes (FSDP, DDP, TP), and without any
effect on the training; ``[preview]`` failures are warnings. The tiny run of ``trainer_helpers``."""

from __future__ import annotations

import json
import os
import time
import warnings

import pytest
import torch
import vfm_models

from tests.gloo import spawn
from tests.parallel.trainer_helpers import build_parts, checkpoint_ema, run_config, tiny_config
from tests.parallel.trainer_helpers import one_thread  # noqa: F401 (autouse: one CPU thread per test)
from vfm_parallel.trainer import ConfigError, from_dict
from vfm_parallel.trainer.held_out import fixed_levels
from vfm_parallel.trainer.metrics import read_history
from vfm_parallel.trainer.synthetic import make_blobs
from vfm_parallel.trainer.watching import PreviewWarning

CLIPS = 5  # odd: two data-parallel ranks run 3 forwards each, one of them a repeat that is not counted


def with_held_out(ctx):
    """The tiny run's parts with held-out blobs (another seed than the training blobs)."""
    parts = build_parts(ctx)
    parts.patch = (1, 2, 2)  # context parallelism draws the noise per sequence shard
    d = ctx.config.data
    latents, labels = make_blobs(ctx.config.validation.samples, tuple(d.latent_shape), d.num_classes, seed=99)
    parts.held_out = lambda: [{"x0": latents[i], "cond": {"y": labels[i : i + 1]}} for i in range(len(latents))]
    return parts


def validated(out_dir, **sections):
    sections = {"validation": {"interval": 2, "samples": CLIPS, "levels": 4}, **sections}
    return tiny_config(out_dir, **sections)


def val_losses(out_dir) -> dict[int, float]:
    steps, values = read_history(out_dir / "metrics.jsonl", "val_loss")
    return dict(zip(steps, values))


def test_the_held_out_loss_is_the_same_twice_and_after_a_resume_with_one_row_per_step(tmp_path):
    from vfm_parallel.trainer import train

    # logged every 3 steps: the held-out figures add their steps' rows (2, 4), not a second row of any step
    logging = {"interval": 3, "tensorboard": False, "loss_curve": False, "peak_tflops": 1.0}
    train(from_dict(validated(tmp_path / "a", logging=logging)), with_held_out)
    train(from_dict(validated(tmp_path / "b", logging=logging)), with_held_out)
    split = validated(tmp_path / "c", checkpoint={"interval": 2}, logging=logging)
    split["train"]["stop_at"] = 4
    train(from_dict(split), with_held_out)
    split["train"]["stop_at"] = 0
    resumed = train(from_dict(split), with_held_out)
    assert resumed.start_step == 4
    a, b, c = (val_losses(tmp_path / x) for x in "abc")
    assert sorted(a) == [2, 4, 6]
    assert a == b  # fixed levels and noise: the same weights give the same figure, exactly
    assert c == pytest.approx(a, rel=1e-6, abs=1e-7)
    rows = [json.loads(line) for line in (tmp_path / "c" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [2, 3, 4, 6]  # the resumed run goes on after step 4: no step twice
    assert [r["step"] for r in rows if "val_loss" in r] == [2, 4, 6]
    assert all(len([k for k in r if k.startswith("val_loss_level_")]) == 4 for r in rows if "val_loss" in r)
    record = json.loads((tmp_path / "a" / "validation.json").read_text())
    assert record["clips"] == CLIPS and len(record["levels"]) == 4


def test_validation_changes_neither_the_training_losses_nor_the_weights(tmp_path):
    from vfm_parallel.trainer import train

    plain = train(from_dict(tiny_config(tmp_path / "plain")), with_held_out)
    watched = train(from_dict(validated(tmp_path / "watched", validation={"interval": 1, "samples": CLIPS,
                                                                         "weights": "both"})), with_held_out)
    assert watched.losses == plain.losses  # the EMA swap restores each weight exactly; no random draw is taken
    for (name, p), (_, q) in zip(plain.model.named_parameters(), watched.model.named_parameters()):
        assert torch.equal(p, q), name
    row = json.loads((tmp_path / "watched" / "metrics.jsonl").read_text().splitlines()[-1])
    assert row["val_loss"] != row["val_loss_model"]  # "both": the EMA weights' and the model's own


def test_the_ema_swap_of_a_held_out_loss_leaves_the_ema_weights_exactly_as_they_were(tmp_path):
    from vfm_parallel.trainer import train

    train(from_dict(tiny_config(tmp_path / "plain")), with_held_out)
    train(from_dict(validated(tmp_path / "watched", validation={"interval": 1, "samples": CLIPS, "weights": "ema"})),
          with_held_out)
    plain, watched = checkpoint_ema(tmp_path / "plain", 6), checkpoint_ema(tmp_path / "watched", 6)
    assert plain and plain.keys() == watched.keys()
    assert all(torch.equal(plain[k], watched[k]) for k in plain)  # the shadow held the model's weights meanwhile


def test_the_fixed_levels_are_increasing_quantiles_of_the_formulations_training_levels():
    edm = fixed_levels(vfm_models.get_formulation("edm")(), 8)
    assert torch.all(edm[1:] > edm[:-1]) and edm[0] > 0.002 and edm[-1] < 80
    assert torch.equal(edm, fixed_levels(vfm_models.get_formulation("edm")(), 8))
    flow = fixed_levels(vfm_models.get_formulation("rectified-flow")(), 8)
    assert torch.all((flow > 0) & (flow < 1)) and torch.all(flow[1:] > flow[:-1])
    ddpm = fixed_levels(vfm_models.get_formulation("ddpm")(), 8)
    assert torch.equal(ddpm, ddpm.round())  # a discrete schedule gets levels it trains on


def _two_process_val_losses(rank, world, root):
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world))
    from vfm_parallel.trainer import train

    out = {}
    for name, parallel in (("fsdp", {"dp_shard": 2}), ("ddp", {"dp_replicate": 2, "dp_shard": 1}),
                           ("tp", {"tp": 2, "dp_shard": 1}), ("cp", {"cp": 2, "dp_shard": 1})):
        cfg = validated(root / name, parallel=parallel, train={"steps": 2})
        train(from_dict(cfg, world), with_held_out)
        out[name] = val_losses(root / name) if rank == 0 else None
    return out


@pytest.fixture(scope="module")
def two_process(tmp_path_factory):
    return spawn(_two_process_val_losses, 2, tmp_path_factory.mktemp("two"))[0]


@pytest.mark.parametrize("layout", ["fsdp", "ddp", "tp", "cp"])
def test_the_held_out_loss_of_a_2_rank_run_equals_the_single_process_one(two_process, layout, tmp_path):
    from vfm_parallel.trainer import train

    # the same training: 2 data-parallel ranks = 2 micro-batches in one process; TP and CP ranks share
    # theirs (CP: the noise drawn in 2 chunks, as the CP ranks draw it)
    accum = 2 if layout in ("fsdp", "ddp") else 1
    chunks = 2 if layout == "cp" else 0
    train(from_dict(validated(tmp_path, optim={"grad_accum": accum}, train={"steps": 2, "noise_chunks": chunks})),
          with_held_out)
    single = val_losses(tmp_path)
    assert sorted(two_process[layout]) == [2]
    assert two_process[layout][2] == pytest.approx(single[2], rel=1e-5, abs=1e-6)


@pytest.mark.parametrize(
    "section, values, key, message",
    [
        ("validation", {"interval": -1}, "validation.interval", "must be >= 0"),
        ("validation", {"interval": 2, "samples": 0}, "validation.samples", "must be >= 1"),
        ("validation", {"levels": 0}, "validation.levels", "must be >= 1"),
        ("validation", {"weights": "shadow"}, "validation.weights", "must be one of auto, ema, model, both"),
        ("validation", {"intervall": 2}, "validation.intervall", "did you mean interval?"),
        ("preview", {"steps": 0}, "preview.steps", "must be >= 1"),
        ("preview", {"size": [64]}, "preview.size", "must be [] (the training data's) or [H, W]"),
        ("preview", {"guidance": -2.0}, "preview.guidance", "or -1 (the export's default)"),
        ("preview", {"prompts": [3]}, "preview.prompts", "must be a list of prompts"),
    ],
)
def test_a_wrong_validation_or_preview_setting_is_refused_naming_the_key(tmp_path, section, values, key, message):
    with pytest.raises(ConfigError) as info:
        from_dict(tiny_config(tmp_path, **{section: values}))
    assert info.value.key == key and message in str(info.value)


def test_validation_with_ema_weights_needs_ema_and_pipeline_runs_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="needs the EMA weights, but ema.enabled is false"):
        from_dict(tiny_config(tmp_path, ema={"enabled": False}, validation={"weights": "ema"}))
    with pytest.raises(ConfigError, match=r"does not run under pipeline parallelism yet \(parallel.pp = 2\)"):
        from_dict(tiny_config(tmp_path, parallel={"pp": 2}, data={"micro_batch": 2}, validation={"interval": 5}))


def test_validation_without_held_out_clips_in_the_parts_is_refused_before_the_first_step(tmp_path):
    with pytest.raises(ConfigError, match="parts have no held-out clips"):
        run_config(validated(tmp_path))
    assert read_history(tmp_path / "metrics.jsonl") == ([], [])


def test_a_failing_preview_is_a_warning_and_the_run_goes_on(tmp_path):
    from vfm_parallel.trainer import train

    calls = []

    def with_broken_preview(ctx):
        parts = build_parts(ctx)

        def preview(folder, weights, step):
            calls.append(folder.name)
            raise RuntimeError("the sampler ran out of memory")

        parts.preview = preview
        return parts

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = train(from_dict(tiny_config(tmp_path, preview={"interval": 3})), with_broken_preview)
    assert result.final_step == 6 and calls == ["step_00000003", "step_00000006"]
    said = [str(w.message) for w in caught if issubclass(w.category, PreviewWarning)]
    assert said == [f"step {s}: the preview failed (RuntimeError: the sampler ran out of memory); training goes on"
                    for s in (3, 6)]
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "preview_s" in r] == [3, 6]


def test_the_held_out_loss_is_the_same_whatever_the_forwards_the_levels_are_cut_into():
    from tests.parallel.trainer_helpers import SHAPE, tiny_model
    from vfm_parallel.trainer.held_out import held_out_loss

    torch.manual_seed(0)
    model = tiny_model().eval()
    formulation = vfm_models.get_formulation("edm")()
    latents, labels = make_blobs(3, SHAPE, 4, seed=99)
    clips = [{"x0": latents[i], "cond": {"y": labels[i : i + 1]}} for i in range(3)]
    levels = fixed_levels(formulation, 6)
    with torch.no_grad():
        whole = held_out_loss(formulation, model, clips, levels, 0, 0, 1, torch.device("cpu"))
        in_pieces = held_out_loss(formulation, model, clips, levels, 0, 0, 1, torch.device("cpu"), batch=4)
    assert in_pieces[0] == pytest.approx(whole[0], rel=1e-6)
    assert in_pieces[1] == pytest.approx(whole[1], rel=1e-6)


def _fsdp_losses_with_and_without_validation(rank, world, root):
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world))
    from vfm_parallel.trainer import train

    fsdp = {"dp_shard": 2}
    plain = train(from_dict(tiny_config(root / "plain", parallel=fsdp, train={"steps": 4}), world), with_held_out)
    watched = train(from_dict(validated(root / "watched", parallel=fsdp, train={"steps": 4},
                                        validation={"interval": 1, "samples": CLIPS, "weights": "ema"}), world),
                    with_held_out)
    return plain.losses, watched.losses


def test_an_fsdp_run_trains_the_same_after_a_held_out_loss_of_the_ema_weights(tmp_path):
    # FSDP keeps the root's and the last block's gathered weights after a forward without backward: the
    # EMA weights of the held-out forward, which the next training step would have used
    plain, watched = spawn(_fsdp_losses_with_and_without_validation, 2, tmp_path)[0]
    assert watched == plain


def _run_with_a_preview_longer_than_the_group_timeout(rank, world, root):
    from datetime import timedelta

    import torch.distributed as dist
    from torch.distributed.distributed_c10d import _set_pg_timeout

    from vfm_parallel.trainer import train

    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world))
    _set_pg_timeout(timedelta(seconds=2), dist.group.WORLD)  # a training collective's timeout, made short

    def with_slow_preview(ctx):
        parts = build_parts(ctx)
        parts.preview = lambda folder, weights, step: time.sleep(5)  # longer than a collective waits
        return parts

    cfg = tiny_config(root, parallel={"dp_replicate": 2, "dp_shard": 1}, train={"steps": 3}, preview={"interval": 2})
    return train(from_dict(cfg, world), with_slow_preview).final_step


def test_the_other_ranks_wait_for_rank_0s_preview_however_long_the_training_collectives_timeout(tmp_path):
    assert spawn(_run_with_a_preview_longer_than_the_group_timeout, 2, tmp_path) == [3, 3]
