"""`vfm generate --checkpoint EXPORT` with no prompt at all (an unconditional model's user has none to
give) is told what to give, not "not both"; an unconditional model then generates from --prompt ""."""

from __future__ import annotations

from tests.cli.test_generate import invoke, make_export


def test_no_prompt_is_told_to_give_one_and_how_for_an_unconditional_model(tmp_path):
    export = make_export(tmp_path / "export")
    result = invoke("--checkpoint", export, "-o", tmp_path / "out")
    assert result.exit_code == 2
    text = " ".join(result.output.replace("│", " ").split())
    assert "not both" not in text, text
    assert "no prompt given" in text and '--prompt ""' in text and "once per video" in text, text
    assert not (tmp_path / "out").exists()


def test_both_prompt_options_are_still_refused_as_both(tmp_path):
    export = make_export(tmp_path / "export")
    (tmp_path / "p.txt").write_text("1\n")
    result = invoke("--checkpoint", export, "--prompt", "1", "--prompts", tmp_path / "p.txt", "-o", tmp_path / "out")
    assert result.exit_code == 2 and "not both" in result.output
