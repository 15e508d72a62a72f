"""A training step keeps every tensor on the run's device and never waits for it. The CPU tests run
the trainer on CPU tensors, where a tensor made without ``device=`` or a host sync costs nothing;
on a GPU the first fails and the second stalls every step. Here the real per-step path of ``vfm
train`` (the recipe's parts: a tiny DiT, each formulation with its timestep and noise draws,
condition dropout, gradient accumulation, clipping, the fused optimizer's on-device skip, EMA) runs
on the ``meta`` device for steps that neither log nor save: a CPU-made tensor or a host sync fails
it, and the only host-to-device copies allowed are the batches'."""

from __future__ import annotations

import pytest

from tests.meta_device import in_subprocess

FORMULATIONS = ("edm", "rectified-flow", "ddpm")


def _steps_on_meta(formulation: str, out_dir: str) -> None:
    import warnings

    import torch

    from tests.meta_device import META, HostCopies, MetaGenerator
    from vfm_cli.recipe import parts_builder, validate
    from vfm_parallel import rng
    from vfm_parallel.trainer import from_dict
    from vfm_parallel.trainer import trainer as trainer_mod
    from vfm_parallel.trainer.stopping import StopRequests

    warnings.simplefilter("ignore")  # e.g. MFU without a known peak: not what this test is about
    real_generator = rng.generator

    def generator(stream, mesh=None, seed=0, device="cpu", coords=None):
        if torch.device(device).type != "meta":
            return real_generator(stream, mesh, seed, device, coords)
        gen = MetaGenerator()
        gen.manual_seed(rng.stream_seed(seed, stream, rng.coordinates(mesh) if coords is None else coords))
        return gen

    rng.generator = generator
    trainer_mod.pick_device = lambda: META  # what a CUDA machine's pick_device gives: the run's device
    cfg = from_dict({
        "model": {"family": "dit", "preset": "tiny", "formulation": formulation, "options": {"in_channels": 4}},
        "data": {"source": "synthetic", "micro_batch": 2, "latent_shape": [4, 2, 4, 4], "num_samples": 8, "num_classes": 4},
        "optim": {"lr": 1e-3, "warmup_steps": 2, "grad_clip": 1.0, "grad_accum": 2, "fused": "off"},
        "train": {"steps": 100, "seed": 7, "out_dir": out_dir, "cond_dropout": 0.5},
        "ema": {"enabled": True, "decay": 0.9},
        "checkpoint": {"interval": 0, "export": False},
        "logging": {"tensorboard": False, "loss_curve": False, "peak_tflops": 1.0, "interval": 50},
    })
    run = trainer_mod._Run(cfg, parts_builder(validate(cfg)), (), trainer_mod.parallelize_model, StopRequests())
    # The path a CUDA run takes (fused AdamW, which skips a non-finite step on the device); torch's
    # fused kernel has no meta version, so the plain one steps, after checking the flag it was handed.
    run.health.on_device = True
    optimizer, plain_step = run.optimizer, run.optimizer.step

    def fused_step():
        flag = optimizer.__dict__.pop("found_inf")
        assert flag.device.type == "meta", f"the skip flag was made on {flag.device}"
        return plain_step()

    optimizer.step = fused_step
    batches, drawn = run.batches, []

    def counted():
        for batch in batches:
            drawn.append(sum(isinstance(v, torch.Tensor) for v in [batch["x0"], *batch["cond"].values()]))
            yield batch

    assert run.step(2) is False  # what a run copies to the device once (DDPM's alpha-bar table) is copied
    run.batches, drawn[:] = counted(), []
    with HostCopies() as host:
        for step in (3, 4):  # neither logged (interval 50) nor saved: the steps that must not wait
            assert run.step(step) is False
    assert all(p.device.type == "meta" for p in run.params)
    assert all(t.device.type == "meta" for t in run.ema.shadow.values())
    assert len(host.copies) == sum(drawn), f"host-to-device copies besides the {sum(drawn)} batch tensors: {host.copies}"


@pytest.mark.parametrize("formulation", FORMULATIONS)
def test_a_training_step_keeps_every_tensor_on_the_device_without_host_syncs(formulation, tmp_path):
    in_subprocess("tests.parallel.test_trainer_device_placement", f"_steps_on_meta({formulation!r}, {str(tmp_path)!r})")
