"""Attack: a text-encoder folder (inside an export, or one a shard dataset records) whose
``config.json`` or ``tokenizer_config.json`` names Python code of its own (``auto_map``, transformers'
``trust_remote_code`` models), shipped beside it.

transformers, given no ``trust_remote_code``, asks on stdin "Do you wish to run the custom code?
[y/N]": a ``y`` typed out of habit, or ``yes | vfm generate ...`` in a script, ran the folder's code.
A model folder is data (docs/security.md): such a folder is refused naming the file, nothing runs
and nothing is asked. Checked in a real subprocess whose stdin answers ``y``, with real transformers."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("transformers")

CODE = "import pathlib\npathlib.Path({marker!r}).touch()\nfrom transformers import {base} as Base\nclass Evil(Base):\n    pass\n"


def _config_folder(folder, marker):
    """A folder whose config.json names configuration_evil.Evil (a model type transformers does not know)."""
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "evil", "hidden_size": 16,
                                                    "auto_map": {"AutoConfig": "configuration_evil.Evil"}}))
    (folder / "configuration_evil.py").write_text(CODE.format(marker=str(marker), base="PretrainedConfig"))
    return folder, folder / "config.json", {}


def _tokenizer_folder(folder, marker):
    """A real tiny T5 folder, and beside it a tokenizer folder (a diffusers pipeline's text_encoder/ +
    tokenizer/ layout, as Wan's) whose tokenizer_config.json names tokenization_evil.Evil."""
    import shutil

    from tests.models.test_text_encoders import make_t5_folder

    make_t5_folder(folder, "t5")
    tokenizer = folder.parent / "tokenizer"
    tokenizer.mkdir()
    for name in ("tokenizer.json", "special_tokens_map.json"):
        if (folder / name).exists():
            shutil.copy(folder / name, tokenizer / name)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config.pop("tokenizer_class", None)
    (tokenizer / "tokenizer_config.json").write_text(json.dumps({**config, "auto_map": {"AutoTokenizer": [None, "tokenization_evil.Evil"]}}))
    (tokenizer / "tokenization_evil.py").write_text(CODE.format(marker=str(marker), base="PreTrainedTokenizerFast"))
    return folder, tokenizer / "tokenizer_config.json", {"tokenizer_path": str(tokenizer)}


@pytest.mark.parametrize("make", [_config_folder, _tokenizer_folder], ids=["config", "tokenizer"])
def test_a_model_folder_naming_its_own_code_is_refused_even_when_stdin_answers_yes(tmp_path, make):
    marker = tmp_path / "MARKER"
    folder, file, options = make(tmp_path / "te", marker)
    script = textwrap.dedent(f"""
        import vfm_models
        try:
            vfm_models.get_text_encoder("t5")(path={str(folder)!r}, **{options!r})
        except ValueError as exc:
            print("REFUSED:", exc)
        else:
            print("LOADED")
    """)
    result = subprocess.run([sys.executable, "-c", script], input="y\ny\ny\n", capture_output=True, text=True, timeout=120)
    out = result.stdout + result.stderr
    assert not marker.exists(), f"the folder's code ran:\n{out}"
    assert "Do you wish to run the custom code" not in out, out  # nothing asked
    assert f"REFUSED: {file} names Python code of its own (auto_map" in out, out
    assert "vfm never runs a model folder's code" in out


@pytest.mark.parametrize("name", ["config.json", "tokenizer_config.json"])
def test_a_model_folder_json_nested_too_deep_is_refused_naming_the_file_not_a_recursion_traceback(tmp_path, name):
    import vfm_models
    from tests.models.test_text_encoders import make_t5_folder

    folder = tmp_path / "te"
    make_t5_folder(folder, "t5")
    (folder / name).write_text('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(ValueError, match=r"nested 100001 levels deep") as err:
        vfm_models.get_text_encoder("t5")(path=str(folder))
    assert str(folder / name) in str(err.value)
