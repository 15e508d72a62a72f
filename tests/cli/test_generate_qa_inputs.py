"""``vfm generate`` as a demanding user runs it: inputs that cannot change the video are named,
a long prompt's cut is named, small decode tiles work, earlier videos replaced are named."""

from __future__ import annotations

import pytest
import torch
from typer.testing import CliRunner

import vfm_models
from vfm_cli.main import app
from vfm_models.conditioning import describe
from tests.infer.tiny import LATENT_SHAPE, tiny_dit, tiny_meta


def _export(folder, **model_options):
    save_export = pytest.importorskip("vfm_models.export").save_export
    model = tiny_dit(**model_options)
    return save_export(folder, model, tiny_meta(config=model.config, null_condition=describe(model.config), guidance=2.0))


def _text_export(folder):
    save_export = pytest.importorskip("vfm_models.export").save_export
    torch.manual_seed(0)
    model = vfm_models.get_family("dit-cross").create(in_channels=LATENT_SHAPE[0], patch=(1, 2, 2), hidden=32, depth=1,
                                                       num_heads=2, text_dim=16)
    meta = tiny_meta(config=model.config, null_condition=describe(model.config), guidance=2.0,
                     text_encoder="hash", text_encoder_options={"dim": 16, "max_length": 6})
    return save_export(folder, model, meta)


def invoke(*args):
    return CliRunner().invoke(app, ["generate", *map(str, args)])


def test_an_unconditional_model_names_the_prompt_negative_prompt_and_guidance_it_cannot_use(tmp_path):
    export = _export(tmp_path / "export", num_classes=0)
    result = invoke("--checkpoint", export, "--prompt", "a red fox", "--negative-prompt", "blurry", "--guidance", "5",
                    "--steps", "1", "-o", tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert ("warning: this model is unconditional: the prompts, --negative-prompt, --guidance 5 cannot change "
            "its videos") in result.output
    assert (tmp_path / "out" / "0000.mp4").is_file()


def test_an_unconditional_model_names_guidance_zero_as_given_and_not_guidance_one_the_default(tmp_path):
    # guidance is uncond + scale (cond - uncond): 1 is off (the default, never named), 0 another scale
    export = _export(tmp_path / "export", num_classes=0)
    zero = invoke("--checkpoint", export, "--prompt", "", "--guidance", "0", "--steps", "1", "-o", tmp_path / "zero")
    assert zero.exit_code == 0, zero.output
    assert "warning: this model is unconditional: --guidance 0 cannot change its videos" in zero.output
    assert "--guidance 1" not in zero.output
    one = invoke("--checkpoint", export, "--prompt", "", "--guidance", "1", "--steps", "1", "-o", tmp_path / "one")
    assert one.exit_code == 0 and "warning" not in one.output, one.output


def test_a_negative_prompt_at_guidance_one_is_named_as_having_no_effect(tmp_path):
    export = _export(tmp_path / "export")  # class-conditional: the negative prompt is a class index
    off = invoke("--checkpoint", export, "--prompt", "1", "--negative-prompt", "3", "--guidance", "1", "--steps", "1",
                 "-o", tmp_path / "off")
    assert off.exit_code == 0, off.output
    assert "warning: --negative-prompt '3' has no effect: --guidance is 1 (guidance off)" in off.output
    on = invoke("--checkpoint", export, "--prompt", "1", "--negative-prompt", "3", "--guidance", "3", "--steps", "1",
                "-o", tmp_path / "on")
    assert on.exit_code == 0 and "warning" not in on.output, on.output


def test_a_prompt_longer_than_the_text_encoder_reads_is_named_once_with_its_video(tmp_path):
    export = _text_export(tmp_path / "export")
    prompts = tmp_path / "prompts.txt"
    long = " ".join(f"word{i}" for i in range(40))
    prompts.write_text(f"a fox\n\n# skipped\n{long}\n{long}\nun renard 🦊\n", encoding="utf-8")
    result = invoke("--checkpoint", export, "--prompts", prompts, "--steps", "1", "-o", tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert result.output.count("the 6 tokens the text encoder reads") == 1, result.output
    assert "warning: a prompt is longer than the 6 tokens the text encoder reads" in result.output
    assert "prompt 1 (video 0001) ('word0 word1" in result.output and "is 41 tokens: it keeps 6 and drops 35" in result.output
    assert sorted(p.name for p in (tmp_path / "out").glob("*.mp4")) == ["0000.mp4", "0001.mp4", "0002.mp4", "0003.mp4"]


@pytest.mark.parametrize("tile", [1, 2])
def test_a_decode_tile_of_one_or_two_latent_pixels_decodes_the_same_video(tmp_path, tile):
    from vfm_infer.video.mp4 import read_mp4

    export = _export(tmp_path / "export")
    common = ["--checkpoint", export, "--prompt", "2", "--steps", "1", "--seed", "7"]
    whole = invoke(*common, "-o", tmp_path / "whole")
    tiled = invoke(*common, "--decode-tile", tile, "-o", tmp_path / "tiled")
    assert whole.exit_code == 0 and tiled.exit_code == 0, tiled.output
    assert (read_mp4(tmp_path / "whole" / "0000.mp4") == read_mp4(tmp_path / "tiled" / "0000.mp4")).all()


def test_videos_of_an_earlier_run_that_this_run_replaces_are_named(tmp_path):
    export = _export(tmp_path / "export")
    out = tmp_path / "out"
    out.mkdir()
    for i in (0, 1, 5):
        (out / f"{i:04d}.mp4").write_bytes(b"old")
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("1\n2\n3\n")
    result = invoke("--checkpoint", export, "--prompts", prompts, "--steps", "1", "-o", out)
    assert result.exit_code == 0, result.output
    assert "note: replaced 2 videos of an earlier run in" in result.output
    assert "(0000.mp4 ... 0001.mp4) with this run's" in result.output
    assert "also holds 1 video of an earlier run (0005.mp4)" in result.output  # not "1 videos"
    once = invoke("--checkpoint", export, "--prompt", "1", "--steps", "1", "-o", out)
    assert "note: replaced 1 video of an earlier run in" in once.output, once.output
    fresh = invoke("--checkpoint", export, "--prompt", "1", "--steps", "1", "-o", tmp_path / "fresh")
    assert fresh.exit_code == 0 and "note:" not in fresh.output, fresh.output


def test_cfg_parallel_in_one_process_says_how_to_start_two(tmp_path):
    export = _export(tmp_path / "export")
    result = invoke("--checkpoint", export, "--prompt", "1", "--cfg-parallel", "-o", tmp_path / "out")
    assert result.exit_code == 1
    assert "torchrun --nproc-per-node 2" in result.output


def test_sampler_options_from_the_cli_reach_the_sampler_and_stay_seeded(tmp_path):
    from vfm_infer.video.mp4 import read_mp4

    export = _export(tmp_path / "export")
    common = ["--checkpoint", export, "--prompt", "2", "--steps", "3", "--sampler", "edm-euler", "--seed", "1"]
    for name, extra in (("a", ["--sampler-option", "churn=40"]), ("b", ["--sampler-option", "churn=40"]), ("plain", [])):
        result = invoke(*common, *extra, "-o", tmp_path / name)
        assert result.exit_code == 0, result.output
    video = {name: read_mp4(tmp_path / name / "0000.mp4") for name in ("a", "b", "plain")}
    assert (video["a"] == video["b"]).all()  # the churn noise comes from the seed
    assert (video["a"] != video["plain"]).any()


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("eta=1", "sampler 'edm-euler' has no option eta; its options: sigma_min, sigma_max, rho, churn,"),
        ("churn=lots", "error: sampler 'edm-euler': churn takes a number (default 0.0), got 'lots' (a string)"),
        ("churn=true", "error: sampler 'edm-euler': churn takes a number (default 0.0), got True (true/false)"),
        ("churn=-1", "error: sampler 'edm-euler': churn must be a finite number >= 0"),
        ("oops", "expected KEY=VALUE (e.g. churn=40), got 'oops'"),
    ],
)
def test_a_bad_sampler_option_is_named_before_any_work(tmp_path, option, message):
    export = _export(tmp_path / "export")
    result = invoke("--checkpoint", export, "--prompt", "2", "--sampler", "edm-euler", "--sampler-option", option,
                    "-o", tmp_path / "out")
    assert result.exit_code != 0
    assert message in " ".join(result.output.replace("│", " ").split()), result.output
    assert not (tmp_path / "out").exists()


def test_a_prompts_file_with_a_byte_order_mark_and_crlf_lines_reads_as_its_prompts(tmp_path):
    from vfm_cli.commands.generate import read_prompts_file

    prompts = tmp_path / "prompts.txt"
    prompts.write_bytes("1\r\n# note\r\n\r\n2\r\n".encode("utf-8-sig"))  # as Windows Notepad saves it
    assert read_prompts_file(prompts) == ["1", "2"]
    export = _export(tmp_path / "export")
    result = invoke("--checkpoint", export, "--prompts", prompts, "--steps", "1", "-o", tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert "; 1 denoiser evaluation per video" in result.output  # edm-heun at one step: one evaluation


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("caf\xe9\n".encode("latin-1"), "is not UTF-8 text (byte 0xe9 at offset 3); save it as UTF-8"),
        (None, "is a folder; give a text file with one prompt per line"),
    ],
)
def test_a_prompts_file_that_is_not_utf8_text_or_is_a_folder_is_named(tmp_path, content, message):
    prompts = tmp_path / "prompts"
    if content is None:
        prompts.mkdir()
    else:
        prompts.write_bytes(content)
    result = invoke("--checkpoint", tmp_path, "--prompts", prompts, "-o", tmp_path / "out")
    assert result.exit_code == 2
    assert message in " ".join(result.output.replace("│", " ").split()), result.output


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("cp-rnig", "unknown context-parallel strategy 'cp-rnig'; available: cp-hybrid, cp-ring, cp-ulysses"),
        ("fsdp", "strategy 'fsdp' is not a context-parallel strategy (phase 'dp'); use one of: cp-hybrid, cp-ring"),
    ],
)
def test_a_cp_strategy_that_is_not_one_is_named_before_the_export_loads(tmp_path, name, message):
    # tmp_path holds no export: the option is checked first, in one process too (where it is not used)
    result = invoke("--checkpoint", tmp_path, "--prompt", "1", "--cp-strategy", name, "-o", tmp_path / "out")
    assert result.exit_code == 1
    assert message in result.output, result.output


def test_the_step_time_leaves_out_the_first_video_s_warm_up_and_says_so(tmp_path):
    export = _export(tmp_path / "export")
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("1\n2\n3\n")
    several = invoke("--checkpoint", export, "--prompts", prompts, "--steps", "1", "-o", tmp_path / "several")
    assert several.exit_code == 0, several.output
    assert "over videos 2-3 (the first, with its warm-up: " in several.output
    one = invoke("--checkpoint", export, "--prompt", "1", "--steps", "1", "-o", tmp_path / "one")
    assert "for the one video, with its warm-up (the steady rate needs two videos or more)" in one.output


def test_guidance_against_a_null_condition_that_never_trained_is_named(tmp_path):
    save_export = pytest.importorskip("vfm_models.export").save_export
    model = tiny_dit()
    export = save_export(tmp_path / "export", model, tiny_meta(config=model.config, null_condition=describe(model.config),
                                                               cond_dropout=0.0, guidance=1.0))
    common = ["--checkpoint", export, "--prompt", "1", "--steps", "1"]
    guided = invoke(*common, "--guidance", "3", "-o", tmp_path / "guided")
    assert guided.exit_code == 0, guided.output
    assert ("warning: this model was trained without condition dropout (cond_dropout 0 in its export), so its null "
            "condition never trained: --guidance 3 guides against an input the model never saw") in guided.output
    alone = invoke(*common, "--guidance", "0", "-o", tmp_path / "alone")  # scale 0: the null branch alone
    assert ("--guidance 0 generates from the null condition alone, an input the model never saw (expect noise); use "
            "--guidance 1 (guidance off: the conditional branch alone)") in alone.output
    for name, extra in (("negative", ["--guidance", "3", "--negative-prompt", "2"]), ("default", [])):
        quiet = invoke(*common, *extra, "-o", tmp_path / name)
        assert quiet.exit_code == 0 and "warning" not in quiet.output, quiet.output


def test_the_step_line_at_guidance_zero_says_only_the_unconditional_branch_runs(tmp_path):
    export = _export(tmp_path / "export")
    result = invoke("--checkpoint", export, "--prompt", "1", "--steps", "1", "--guidance", "0", "-o", tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert "guidance 0: the unconditional branch alone, one forward each" in result.output


def test_an_empty_prompt_with_guidance_warns_in_one_line_that_guidance_cannot_change_the_video(tmp_path):
    # a text model's null condition is the empty caption's embedding: guidance then contrasts it with itself
    export = _text_export(tmp_path / "export")
    result = invoke("--checkpoint", export, "--prompt", "", "--guidance", "3", "--steps", "1", "-o", tmp_path / "out")
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("warning:")]
    assert len(lines) == 1, result.output
    assert lines[0].startswith("warning: prompt 0 (video 0000) '' encodes as the empty caption, the null condition that "
                               "guidance contrasts with, so --guidance 3 cannot change its video")
    assert (tmp_path / "out" / "0000.mp4").is_file()


def test_a_negative_guidance_scale_generates_with_one_warning_that_it_steers_away_from_the_prompt(tmp_path):
    # uncond + scale (cond - uncond) with scale < 0 is defined (anti-guidance) but rarely meant: warned, not refused
    export = _export(tmp_path / "export")
    result = invoke("--checkpoint", export, "--prompt", "1", "--guidance", "-3", "--steps", "1", "-o", tmp_path / "neg")
    assert result.exit_code == 0, result.output
    warned = [line for line in result.output.splitlines() if line.startswith("warning: --guidance -3")]
    assert warned == ["warning: --guidance -3 is below 0: it steers the video away from its prompt (uncond + scale * "
                      "(cond - uncond)), which is rarely meant; to steer away from something, give it as "
                      "--negative-prompt with --guidance above 1 (1 = off, 0 = the unconditional branch alone)"], result.output
    assert (tmp_path / "neg" / "0000.mp4").is_file()
    between = invoke("--checkpoint", export, "--prompt", "1", "--guidance", "0.5", "--steps", "1", "-o", tmp_path / "half")
    assert between.exit_code == 0 and "warning" not in between.output, between.output


def test_an_exports_negative_default_guidance_is_warned_about_as_the_exports(tmp_path):
    save_export = pytest.importorskip("vfm_models.export").save_export
    model = tiny_dit()
    export = save_export(tmp_path / "export", model, tiny_meta(config=model.config, null_condition=describe(model.config),
                                                               guidance=-2.0))
    result = invoke("--checkpoint", export, "--prompt", "1", "--steps", "1", "-o", tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert "warning: the export's default guidance -2 is below 0: it steers the video away from its prompt" in result.output


def test_generate_help_says_what_a_negative_guidance_scale_does():
    import re

    text = " ".join(re.sub(r"[│╭╮╰╯─]", " ", CliRunner().invoke(app, ["generate", "--help"], terminal_width=200).output).split())
    assert "below 0 steers away from the prompt (allowed, with a warning" in text, text
