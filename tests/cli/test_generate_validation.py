"""``vfm generate`` checks every option before the work it would waste: options that need no model
before the export loads, sizes (against tokenizer, patch and memory) before sampling; an export with
inf/nan weights and a sampler that produces inf/nan are errors, never a black MP4."""

from __future__ import annotations

import pytest
import torch
from typer.testing import CliRunner

from tests.cli.test_generate import make_export
from vfm_cli.main import app
from vfm_infer.pipeline import VideoPipeline


@pytest.fixture
def calls(monkeypatch):
    """Counts of export loads and samplings in this test (the real methods still run)."""
    counts = {"load": 0, "sample": 0}
    load, sample = VideoPipeline.from_export.__func__, VideoPipeline.sample_latent

    def counted_load(cls, *args, **kwargs):
        counts["load"] += 1
        return load(cls, *args, **kwargs)

    def counted_sample(self, *args, **kwargs):
        counts["sample"] += 1
        return sample(self, *args, **kwargs)

    monkeypatch.setattr(VideoPipeline, "from_export", classmethod(counted_load))
    monkeypatch.setattr(VideoPipeline, "sample_latent", counted_sample)
    return counts


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    return make_export(tmp_path_factory.mktemp("gen") / "export")


def _generate(export, out, *args):
    return CliRunner().invoke(app, ["generate", "--checkpoint", str(export), "--prompt", "1", "--steps", "2", "-o", str(out),
                                    *map(str, args)])


def _one_line_error(result, message: str) -> None:
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 1, result.output
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], result.output


@pytest.mark.parametrize(
    "args, message",
    [
        (("--fps", "0"), "--fps must be a finite number >= 0.001 frames per second, got 0.0"),
        (("--fps", "nan"), "--fps must be a finite number >= 0.001 frames per second, got nan"),
        (("--fps", "inf"), "--fps must be a finite number"),
        (("--guidance", "nan"), "guidance must be a finite number (1 = off), got nan"),
        (("--guidance", "-inf"), "guidance must be a finite number (1 = off), got -inf"),
        (("--seed", "-1"), "seed must be in [0, 18446744073709551615] for 1 prompt(s)"),
        (("--seed", str(2**64)), "seed must be in [0, 18446744073709551615]"),
        (("--decode-tile", "0"), "decode tile must be >= 1 latent pixels, got 0"),
        (("--decode-chunk", "-2"), "decode chunk must be >= 1 latent frames, got -2"),
    ],
)
def test_an_option_that_needs_no_model_fails_before_the_export_loads(export, tmp_path, calls, args, message):
    result = _generate(export, tmp_path / "out", *args)
    _one_line_error(result, message)
    assert calls == {"load": 0, "sample": 0}


def test_an_output_path_that_is_a_file_fails_before_the_export_loads(export, tmp_path, calls):
    (tmp_path / "file").write_text("x")
    _one_line_error(_generate(export, tmp_path / "file"), f"--out {tmp_path / 'file'} is a file; name a folder")
    _one_line_error(_generate(export, tmp_path / "file" / "videos"), f"cannot be made: {tmp_path / 'file'} is a file")
    assert calls == {"load": 0, "sample": 0}


@pytest.mark.parametrize(
    "args, message",
    [
        (("--size", "18x16"), "size 18x16 is not accepted: this model takes height and width multiples of 4 (its "
                              "tokenizer's spatial compression 2 x its patch 2x2); the nearest accepted sizes are 16x16 or 20x16"),
        (("--frames", "100000", "--size", "4096x4096"), "100000 frames at 4096x4096 (latent 12x100000x2048x2048) need about"),
    ],
)
def test_a_size_the_model_or_the_memory_cannot_take_fails_before_sampling(export, tmp_path, calls, args, message):
    result = _generate(export, tmp_path / "out", *args)
    _one_line_error(result, message)
    assert calls == {"load": 1, "sample": 0}


def test_an_absurd_size_shows_the_estimate_against_the_free_memory(export, tmp_path):
    result = _generate(export, tmp_path / "out", "--frames", "100000", "--size", "4096x4096")
    assert "GiB (sampler latents" in result.output and "GiB available; ask for fewer frames or a smaller size" in result.output


def _rewrite_weights(export, change) -> None:
    """Replace the export's weights file with changed weights (as a diverged run would have written them)."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    path = export / "model.safetensors"
    with safe_open(str(path), "pt") as f:
        metadata, state = f.metadata(), {k: f.get_tensor(k) for k in f.keys()}
    change(state)
    save_file(state, str(path), metadata=metadata)


def test_an_export_with_nan_weights_is_refused_naming_them(tmp_path, calls):
    export = make_export(tmp_path / "export")
    _rewrite_weights(export, lambda state: state["final_layer.linear.weight"].view(-1)[0].fill_(float("nan")))
    result = _generate(export, tmp_path / "out")
    _one_line_error(result, "1 of 39 weight tensors hold inf or nan values (final_layer.linear.weight)")
    assert calls["sample"] == 0 and not (tmp_path / "out" / "0000.mp4").exists()


def test_a_sampler_output_with_inf_or_nan_is_an_error_not_a_black_video(tmp_path, calls):
    # Finite weights at the edge of float32: the first model output overflows to inf.
    export = make_export(tmp_path / "export")
    _rewrite_weights(export, lambda state: state["final_layer.linear.weight"].fill_(3e38))
    result = _generate(export, tmp_path / "out")
    assert result.exit_code == 1, result.output
    assert "error: the sampler's latent for prompt 0 ('1') has" in result.output and "values inf or nan; no video written" in result.output
    assert calls["sample"] == 1 and not (tmp_path / "out" / "0000.mp4").exists()
    assert torch.finfo(torch.float32).max > 3e38  # the weights themselves were finite
