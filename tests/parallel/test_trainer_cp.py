"""Context-parallel training (cp-ring over gloo) against one process drawing the same noise.

CP shards the token sequence after ``model.embed``, so every CP rank must feed the model the same
noisy input; seed table 3 wants each shard's noise from its own CP stream. The trainer draws the
noise in cp token chunks (chunk j from the stream at cp = j) on every rank; one process with
``train.noise_chunks = 2`` draws the same and is the reference.
"""

from __future__ import annotations

import os

import pytest
import torch

from tests.gloo import spawn
from tests.parallel.trainer_helpers import SHAPE, build_parts, tiny_config
from vfm_models.formulations import EDM
from vfm_parallel import rng
from vfm_parallel.trainer import from_dict, train
from vfm_parallel.trainer.saving import full_weights

STEPS = 3
PATCH = (1, 2, 2)  # SHAPE (3, 2, 4, 4) -> grid (2, 2, 2): 8 tokens, cp chunk j = latent frame j
_recorded: list = []  # the noise tensors the formulation was handed, in this process


class RecordingEDM(EDM):
    """EDM that remembers the explicit noise of each call (the trainer's assembled noise)."""

    def loss(self, model, x0, cond, generator=None, noise_generator=None, **kwargs):
        _recorded.append(None if kwargs.get("noise") is None else kwargs["noise"].detach().clone())
        return super().loss(model, x0, cond, generator, noise_generator, **kwargs)


def build_cp_parts(ctx):
    parts = build_parts(ctx)
    parts.formulation, parts.patch = RecordingEDM(), PATCH
    return parts


def _run(data):
    _recorded.clear()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    result = train(from_dict(data, world), build_cp_parts)
    weights = {k: v.numpy() for k, v in full_weights(result.model.named_parameters()).items()}
    return result.losses, weights, [n.numpy() for n in _recorded if n is not None]


def _config(root, **parallel):
    return tiny_config(root, train={"steps": STEPS}, parallel=parallel)


def _cp2(rank, world, root):
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world))
    return _run(_config(root / "cp2", cp=2, dp_shard=1))


def _fsdp2_cp2(rank, world, root):
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world))
    return _run(_config(root, cp=2, dp_shard=2))


@pytest.fixture(scope="module")
def cp_run(tmp_path_factory):
    return spawn(_cp2, 2, tmp_path_factory.mktemp("cp"))


def _reference(root, grad_accum: int):
    torch.set_num_threads(1)
    return _run(tiny_config(root, train={"steps": STEPS, "noise_chunks": 2}, optim={"grad_accum": grad_accum}))


def _assert_same_run(run, reference, rel=1e-5):
    (losses, weights, _), (ref_losses, ref_weights, _) = run, reference
    assert losses.keys() == ref_losses.keys() == set(range(1, STEPS + 1))
    for step in ref_losses:
        assert losses[step] == pytest.approx(ref_losses[step], rel=rel, abs=rel), f"step {step}"
    for name, tensor in ref_weights.items():
        torch.testing.assert_close(torch.from_numpy(weights[name]), torch.from_numpy(tensor), rtol=10 * rel, atol=1e-5, msg=name)


def test_cp2_run_equals_one_process_drawing_the_noise_in_two_chunks(cp_run, tmp_path):
    reference = _reference(tmp_path, grad_accum=1)
    _assert_same_run(cp_run[0], reference)
    _assert_same_run(cp_run[1], reference)
    # the reference really drew chunked noise: the same tensors the CP ranks assembled
    for ours, theirs in zip(reference[2], cp_run[0][2]):
        assert (ours == theirs).all()


def _patchify_frame(noise: torch.Tensor, frame: int) -> torch.Tensor:
    """Latent frame ``frame`` of (B, C, T, H, W) as its (B, H'*W', C*ph*pw) patch tokens (t-major chunk)."""
    b, c, _, h, w = noise.shape
    _, ph, pw = PATCH
    x = noise[:, :, frame].reshape(b, c, h // ph, ph, w // pw, pw).permute(0, 2, 4, 1, 3, 5)  # (B, H', W', C, ph, pw)
    return x.reshape(b, (h // ph) * (w // pw), c * ph * pw)


def test_cp_ranks_assemble_identical_noise_whose_chunk_j_comes_from_the_cp_j_stream(cp_run):
    noise0, noise1 = (torch.from_numpy(n) for n in (cp_run[0][2][0], cp_run[1][2][0]))
    assert noise0.shape == (2, *SHAPE)
    assert torch.equal(noise0, noise1)  # the model's input is identical on both CP ranks
    # step 0, micro-batch 0: the trainer's seeds (train.seed = 7) for stream "noise" at cp = j
    step_seed = 7 * 2**32 + 0
    chunks = [_patchify_frame(noise0, j) for j in range(2)]
    for j, chunk in enumerate(chunks):
        gen = rng.generator("noise", seed=step_seed, coords={"dp_shard": 0, "cp": j})
        assert torch.equal(chunk, torch.randn(chunk.shape, generator=gen)), f"chunk {j}"
    assert not torch.allclose(chunks[0], chunks[1])  # table 3: noise differs across CP


def test_four_process_fsdp2_x_cp2_run_equals_one_process_with_two_chunks(tmp_path):
    run = spawn(_fsdp2_cp2, 4, tmp_path / "four")
    reference = _reference(tmp_path / "ref", grad_accum=2)
    for rank_run in run:
        _assert_same_run(rank_run, reference)
