"""The EMA's warm-up (``ema.warmup``, diffusers' EMAModel): update t blends with ``min(decay, (1 + t) / (10 + t))``,
t counting the updates applied, so a run far shorter than the EMA's memory exports its trained weights, not its
random start. Off, the EMA is the fixed-decay one bit for bit. The count resumes exactly, skipped steps included."""

from __future__ import annotations

import json

import pytest
import torch
import vfm_models

from tests.parallel.trainer_helpers import EachBatch, build_parts, checkpoint_ema, run_config, tiny_config, tiny_model
from tests.parallel.trainer_helpers import one_thread  # noqa: F401 (autouse: one CPU thread per test)
from vfm_parallel.checkpoint_integrity import write_manifest
from vfm_parallel.trainer import from_dict, train
from vfm_parallel.trainer.ema import EMA, initial_share, warmed_decay
from vfm_parallel.trainer.synthetic import SyntheticLoader, make_blobs


def _measured_initial_share(steps: int, decay: float, warmup: bool) -> tuple[float, dict, dict]:
    """(the initial weights' share in the EMA after ``steps`` AdamW steps of the tiny DiT on EDM, the EMA, the
    trained weights). Measured, not computed: the EMA is linear in its start, so a second EMA started at zero
    and fed the same weights differs from the real one by exactly share x the initial weights."""
    torch.manual_seed(0)
    model = tiny_model()
    initial = {k: v.detach().clone() for k, v in model.named_parameters()}
    ema, from_zero = EMA(model, decay, warmup=warmup), EMA(model, decay, warmup=warmup)
    from_zero.load_state_dict({k: torch.zeros_like(v) for k, v in initial.items()})
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    formulation = vfm_models.get_formulation("edm")()
    latents, labels = make_blobs(16, (3, 2, 4, 4), 4)
    batches = iter(SyntheticLoader(latents, labels, 4, 0, 1))
    generator = torch.Generator().manual_seed(0)
    for _ in range(steps):
        batch = next(batches)
        formulation.loss(model, batch["x0"], batch["cond"], generator, generator).backward()
        optimizer.step()
        optimizer.zero_grad()
        ema.update(model)
        from_zero.update(model)
    left = torch.cat([(ema.shadow[k] - from_zero.shadow[k]).flatten() for k in initial])
    share = (left.norm() / torch.cat([v.flatten() for v in initial.values()]).norm()).item()
    return share, ema.shadow, {k: v.detach() for k, v in model.named_parameters()}


def test_a_40_step_run_at_decay_0999_with_warmup_keeps_under_1_percent_of_its_initial_weights():
    share, exported, trained = _measured_initial_share(40, 0.999, warmup=True)
    assert share < 0.01, share
    assert initial_share(0.999, 40, warmup=True) < 1e-9  # 1 / C(49, 9)
    # without the warm-up: 0.999 ** 40 = 96% of the start, as the shared definition says
    cold, _, _ = _measured_initial_share(40, 0.999, warmup=False)
    assert cold == pytest.approx(initial_share(0.999, 40, warmup=False), rel=1e-4)
    assert cold == pytest.approx(0.999 ** 40, rel=1e-4)


def test_the_initial_share_is_the_product_of_the_decays_with_and_without_warmup():
    for decay, n in [(0.999, 400), (0.98, 1200), (0.9, 100), (0.5, 10), (0.05, 5), (0.9999, 3)]:
        product = 1.0
        for t in range(n):
            product *= warmed_decay(decay, t)
        assert initial_share(decay, n, warmup=True) == pytest.approx(product, rel=1e-9)
        assert initial_share(decay, n, warmup=False) == decay ** n
    assert initial_share(0.999, 400, warmup=False) == pytest.approx(0.670, abs=1e-3)
    assert initial_share(0.999, 0, warmup=True) == 1.0


def _model_and_ema(run_dir, step):
    from safetensors.torch import load_file

    files = sorted((run_dir / "checkpoints" / f"step_{step:08d}" / "tensors").glob("*.safetensors"))
    tensors = {k: v for f in files for k, v in load_file(f).items()}
    return ({k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")},
            {k[len("ema."):]: v for k, v in tensors.items() if k.startswith("ema.")})


#: The skip decided on the host (AdamW's foreach path) and on the device (fused AdamW, ``keep`` a tensor).
PATHS = {"host": {"optim": {"fused": "off"}}, "device": {"optim": {"fused": "on"}, "logging": {"interval": 4}}}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("warmup", [True, False])
def test_the_trainer_s_ema_is_the_warmed_or_fixed_decay_blend_of_its_weights_bit_for_bit(tmp_path, warmup, path):
    """Replayed from the checkpoint of step 2 with the weights of steps 3..6: update t (the step's index,
    no step skipped) blends by 1 - warmed_decay(decay, t), or by 1 - decay as before the warm-up existed.
    Decay 0.3: the ramp (1 + t) / (10 + t) passes it at t = 3, so both sides of the min are replayed."""
    decay = 0.3
    run_config(tiny_config(tmp_path, train={"steps": 6}, ema={"decay": decay, "warmup": warmup},
                           checkpoint={"interval": 1, "keep": 6}, **PATHS[path]))
    _, shadow = _model_and_ema(tmp_path, 2)
    for step in range(3, 7):
        weights, _ = _model_and_ema(tmp_path, step)
        d = warmed_decay(decay, step - 1) if warmup else decay
        for name, tensor in shadow.items():
            tensor.lerp_(weights[name], 1.0 - d)
    _, saved = _model_and_ema(tmp_path, 6)
    assert saved.keys() == shadow.keys() and all(torch.equal(saved[k], shadow[k]) for k in saved)


def _nan_at(bad: int):
    def build(ctx):
        parts = build_parts(ctx)
        parts.loader = EachBatch(parts.loader, lambda n, b: {**b, "x0": torch.full_like(b["x0"], float("nan"))}
                                 if n == bad else b)
        return parts
    return build


def _state(run_dir, step) -> dict:
    return json.loads((run_dir / "checkpoints" / f"step_{step:08d}" / "state.json").read_text())


@pytest.mark.parametrize("path", PATHS)
def test_a_run_with_a_skipped_step_stopped_and_resumed_has_the_straight_run_s_ema_bit_for_bit(tmp_path, path):
    """Step 2 is skipped (NaN): the warm-up's count is one behind the step from then on, which the checkpoint
    keeps (``ema_updates``); a count taken from the step would blend the resumed steps by other decays."""
    sections = {**PATHS[path], "ema": {"decay": 0.99}}
    with pytest.warns(RuntimeWarning, match="step 2 skipped"):
        train(from_dict(tiny_config(tmp_path / "a", train={"steps": 6}, **sections)), _nan_at(2))
    split = tiny_config(tmp_path / "b", train={"steps": 6, "stop_at": 4}, **sections)
    with pytest.warns(RuntimeWarning, match="step 2 skipped"):
        train(from_dict(split), _nan_at(2))
    assert _state(tmp_path / "b", 4)["ema_updates"] == 3
    split["train"]["stop_at"] = 0
    run_config(split)
    assert _state(tmp_path / "a", 6)["ema_updates"] == _state(tmp_path / "b", 6)["ema_updates"] == 5
    a, b = checkpoint_ema(tmp_path / "a", 6), checkpoint_ema(tmp_path / "b", 6)
    assert a and a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_checkpoint_saved_without_the_count_resumes_counting_from_its_step(tmp_path):
    """A checkpoint of a vfm before ``ema_updates`` (state.json without it, its manifest written again): the
    count is its step, exact for a run that skipped no step."""
    run_config(tiny_config(tmp_path / "a", train={"steps": 6}))
    split = tiny_config(tmp_path / "b", train={"steps": 6, "stop_at": 3})
    run_config(split)
    folder = tmp_path / "b" / "checkpoints" / "step_00000003"
    state = _state(tmp_path / "b", 3)
    del state["ema_updates"]
    (folder / "state.json").write_text(json.dumps(state))
    write_manifest(folder, 3)
    split["train"]["stop_at"] = 0
    run_config(split)
    a, b = checkpoint_ema(tmp_path / "a", 6), checkpoint_ema(tmp_path / "b", 6)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_checkpoint_whose_count_is_past_its_step_is_refused_as_damaged_by_the_run_and_by_validate(tmp_path):
    from vfm_parallel import checkpoint as ckpt
    from vfm_parallel.trainer import resume

    split = tiny_config(tmp_path, train={"steps": 6, "stop_at": 3})
    run_config(split)
    folder = tmp_path / "checkpoints" / "step_00000003"
    (folder / "state.json").write_text(json.dumps({**_state(tmp_path, 3), "ema_updates": 4}))
    write_manifest(folder, 3)
    split["train"]["stop_at"] = 0
    damaged = r"state.json has ema_updates 4; expected a whole number from 0 to its step 3"
    with pytest.raises(ckpt.DamagedCheckpointError, match=damaged):
        run_config(split)
    # `vfm train --validate` calls check_resumable (files not hashed): it refuses what the run refuses
    cfg = from_dict(split)
    with pytest.raises(ckpt.DamagedCheckpointError, match=damaged):
        resume.check_resumable(folder, ckpt.read_state(folder), cfg, cfg.parallel.resolved(1), folder.parent)
