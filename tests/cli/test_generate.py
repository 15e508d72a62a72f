"""``vfm generate``: a tiny export to a playable MP4, and clear errors before any work."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from vfm_cli.main import app


def make_export(folder, **meta_overrides):
    # The export module (docs/contracts.md section 3) is vfm-models'; skip until it exists.
    save_export = pytest.importorskip("vfm_models.export").save_export

    from tests.infer.tiny import tiny_dit, tiny_meta

    model = tiny_dit()
    save_export(folder, model, {**tiny_meta(), "config": model.config, **meta_overrides})
    return folder


def invoke(*args):
    return CliRunner().invoke(app, ["generate", *map(str, args)])


def test_generate_writes_a_playable_mp4_and_contact_sheet(tmp_path):
    from vfm_infer.video.contact_sheet import read_png
    from vfm_infer.video.mp4 import read_mp4

    export = make_export(tmp_path / "export")
    result = invoke("--checkpoint", export, "--prompt", "2", "--steps", "3", "--frames", "5", "--size", "16x24",
                    "--seed", "3", "-o", tmp_path / "out")
    assert result.exit_code == 0, result.output
    frames = read_mp4(tmp_path / "out" / "0000.mp4")
    assert frames.shape == (5, 16, 24, 3)
    assert read_png(tmp_path / "out" / "0000.png").shape[2] == 3
    assert "0000.mp4" in result.output and "seconds per step:" in result.output


def test_a_size_other_than_the_trained_one_is_generated_with_a_warning_naming_the_trained_size(tmp_path):
    export = make_export(tmp_path / "export")  # trained on 4 frames at 16x16
    other = invoke("--checkpoint", export, "--prompt", "2", "--steps", "1", "--frames", "6", "-o", tmp_path / "other")
    assert other.exit_code == 0, other.output
    assert "warning: this model was trained on 4 frames at 16x16 (latent 12x4x8x8); 6 frames at 16x16" in other.output
    same = invoke("--checkpoint", export, "--prompt", "2", "--steps", "1", "-o", tmp_path / "same")
    assert same.exit_code == 0 and "warning" not in same.output


def test_same_seed_gives_the_same_video_from_the_cli(tmp_path):
    from vfm_infer.video.mp4 import read_mp4

    export = make_export(tmp_path / "export")
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("1\n# a comment\n3\n")
    for out in ("a", "b"):
        result = invoke("--checkpoint", export, "--prompts", prompts, "--steps", "2", "--sampler", "dpm-solver++",
                        "--seed", "5", "-o", tmp_path / out)
        assert result.exit_code == 0, result.output
    for name in ("0000.mp4", "0001.mp4"):
        assert (read_mp4(tmp_path / "a" / name) == read_mp4(tmp_path / "b" / name)).all()


def test_prompt_given_twice_generates_one_video_each_in_order_as_a_prompts_file_does(tmp_path):
    from vfm_infer.video.mp4 import read_mp4

    export = make_export(tmp_path / "export")
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("1\n3\n")
    flags = invoke("--checkpoint", export, "--prompt", "1", "--prompt", "3", "--steps", "2", "-o", tmp_path / "flags")
    listed = invoke("--checkpoint", export, "--prompts", prompts, "--steps", "2", "-o", tmp_path / "file")
    assert flags.exit_code == 0 and listed.exit_code == 0, flags.output + listed.output
    assert sorted(p.name for p in (tmp_path / "flags").glob("*.mp4")) == ["0000.mp4", "0001.mp4"]
    for name in ("0000.mp4", "0001.mp4"):
        assert (read_mp4(tmp_path / "flags" / name) == read_mp4(tmp_path / "file" / name)).all()


def test_an_empty_prompts_device_says_it_holds_no_prompts_not_that_it_is_missing(tmp_path):
    result = invoke("--checkpoint", make_export(tmp_path / "export"), "--prompts", "/dev/null", "-o", tmp_path / "out")
    assert result.exit_code != 0 and "has no prompts" in result.output and "does not exist" not in result.output


def test_a_checkpoint_that_does_not_match_its_config_is_a_clear_error(tmp_path):
    export = make_export(tmp_path / "export")
    config = json.loads((export / "config.json").read_text())
    config["config"]["depth"] = 3
    (export / "config.json").write_text(json.dumps(config))
    result = invoke("--checkpoint", export, "--prompt", "1", "-o", tmp_path / "out")
    assert result.exit_code == 1
    assert "does not match its model config" in result.output
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--sampler", "nope"), "unknown sampler 'nope'; available:"),
        (("--size", "15x16"), "size 15x16 is not accepted: this model takes height and width multiples of 4"),
        (("--size", "big"), "expected HxW"),
        (("--prompt", "x", "--prompts", "p.txt"), "--prompts FILE, not both"),
        (("--device", "tpu"), "unknown device 'tpu'; accepted: auto, cuda, cuda:N, cpu"),
        (("--dtype", "fp16"), "expected one of fp32, bf16"),
    ],
)
def test_bad_input_fails_before_any_work(tmp_path, args, message):
    export = make_export(tmp_path / "export")
    base = ["--checkpoint", export] + ([] if "--prompt" in args else ["--prompt", "1"])
    result = invoke(*base, *args, "-o", tmp_path / "out")
    assert result.exit_code != 0
    assert message in result.output
    assert not (tmp_path / "out").exists()


def test_a_tokenizer_decoding_four_channels_is_refused_before_sampling_naming_what_mp4_takes(tmp_path):
    save_export = pytest.importorskip("vfm_models.export").save_export
    from tests.infer.tiny import tiny_dit, tiny_meta

    model = tiny_dit(in_channels=16)  # pixel tokenizer, 4 channels folded 2x2
    save_export(tmp_path / "export", model, {**tiny_meta(), "config": model.config, "latent_shape": [16, 4, 8, 8],
                                             "tokenizer_options": {"patch": 2, "channels": 4}})
    result = invoke("--checkpoint", tmp_path / "export", "--prompt", "1", "--steps", "2", "-o", tmp_path / "out")
    assert result.exit_code == 1
    assert "decodes 4-channel video" in result.output and "1 (grey) or 3 (RGB)" in result.output
    assert "Traceback" not in result.output and not list((tmp_path / "out").glob("*.mp4"))


def test_a_folder_that_is_not_an_export_is_a_clear_error(tmp_path):
    result = invoke("--checkpoint", tmp_path, "--prompt", "1")
    assert result.exit_code == 1 and "is not an inference export: missing model.safetensors, config.json" in result.output


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="checks the message on a machine without CUDA")
def test_a_training_run_given_as_the_export_points_to_the_run_s_export(tmp_path):
    # vfm train writes <out>/checkpoints/step_N (resumable state) beside <out>/export (for inference)
    export = make_export(tmp_path / "run" / "export")
    checkpoint = tmp_path / "run" / "checkpoints" / "step_00000060"
    checkpoint.mkdir(parents=True)
    result = invoke("--checkpoint", tmp_path / "run", "--prompt", "1", "-o", tmp_path / "out")
    assert result.exit_code == 1 and f"its inference export is {export}" in result.output
    # a checkpoint is taken (tests/cli/test_export_checkpoint.py), whole or refused: this one never committed
    result = invoke("--checkpoint", checkpoint, "--prompt", "1", "-o", tmp_path / "out")
    assert result.exit_code == 1 and f"{checkpoint} is not a committed checkpoint (no manifest.json" in result.output


def test_videos_left_by_an_earlier_run_in_the_folder_are_named(tmp_path):
    export = make_export(tmp_path / "export")
    out = tmp_path / "out"
    out.mkdir()
    for i in (1, 2, 3):  # an earlier run of four prompts
        (out / f"{i:04d}.mp4").write_bytes(b"old")
    result = invoke("--checkpoint", export, "--prompt", "1", "--steps", "2", "-o", out)
    assert result.exit_code == 0, result.output
    assert "also holds 3 videos of an earlier run (0001.mp4 ... 0003.mp4)" in result.output
    assert (out / "0003.mp4").read_bytes() == b"old"  # the user's files are not deleted


def test_asking_for_cuda_without_a_gpu_names_the_problem_and_the_way_out(tmp_path):
    export = make_export(tmp_path / "export")
    result = invoke("--checkpoint", export, "--prompt", "1", "--device", "cuda", "-o", tmp_path / "out")
    assert result.exit_code == 1
    assert "no CUDA device is visible; use --device cpu or auto" in result.output
    assert not (tmp_path / "out").exists()


def test_bf16_generation_on_cpu_stays_close_to_fp32_and_reports_its_device(tmp_path):
    from vfm_infer.video.mp4 import read_mp4

    export = make_export(tmp_path / "export")
    outputs = {}
    for dtype in ("fp32", "bf16"):
        result = invoke("--checkpoint", export, "--prompt", "2", "--steps", "4", "--device", "cpu", "--dtype", dtype,
                        "-o", tmp_path / dtype)
        assert result.exit_code == 0, result.output
        assert f"cpu {'float32' if dtype == 'fp32' else 'bfloat16'}" in result.output
        outputs[dtype] = read_mp4(tmp_path / dtype / "0000.mp4").astype(float)
    assert abs(outputs["fp32"] - outputs["bf16"]).mean() < 8  # of 255: H264 and bf16 rounding only


def test_the_step_line_says_what_one_denoiser_evaluation_is_with_and_without_guidance(tmp_path):
    export = make_export(tmp_path / "export")
    common = ["--checkpoint", export, "--prompt", "2", "--steps", "2", "--sampler", "edm-euler"]
    guided = invoke(*common, "--guidance", "3.5", "-o", tmp_path / "a")
    assert guided.exit_code == 0, guided.output
    assert "2 denoiser evaluations per video, guidance 3.5: each a batch of 2 (conditional and unconditional)" in guided.output
    plain = invoke(*common, "--guidance", "1", "-o", tmp_path / "b")
    assert "2 denoiser evaluations per video, guidance off: one forward each" in plain.output
