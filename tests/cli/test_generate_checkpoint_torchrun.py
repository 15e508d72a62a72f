"""``vfm generate --checkpoint RUN/checkpoints/step_<N>`` builds the checkpoint's export in memory: under
torchrun (2 real gloo ranks) the checkpoint is verified once between the ranks, not once per rank, and no
rank writes a temporary export; the paths its recorded settings name resolve as in the run's own export."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from tests.cli.probed_torchrun import rank_notes, run_probed_torchrun
from tests.cli.test_export_checkpoint import _step_dir, one_process_run  # noqa: F401 - fixture
from vfm_cli.main import app

#: loaded into every process of the job (sitecustomize): notes each file it opens under VFM_TEST_WATCH
#: and each temporary folder it makes, from Python's audit events (observing, changing nothing)
PROBE = '''
import os, sys

_WATCH, _OUT = os.environ.get("VFM_TEST_WATCH"), os.environ.get("VFM_TEST_PROBE_DIR")
if _WATCH and _OUT:
    _WHO = os.environ.get("RANK", "launcher") + "-" + str(os.getpid())

    def _hook(event, args, _open=open, _join=os.path.join):
        if event == "open" and isinstance(args[0], str) and args[0].startswith(_WATCH):
            with _open(_join(_OUT, _WHO + ".opens"), "a") as fh:
                fh.write(args[0] + "\\n")
        elif event == "tempfile.mkdtemp":
            with _open(_join(_OUT, _WHO + ".mkdtemp"), "a") as fh:
                fh.write(str(args[0]) + "\\n")

    sys.addaudithook(_hook)
'''


def _notes(folder: Path, suffix: str) -> dict[str, list[str]]:
    """{rank: lines} of the ranks' notes (the launcher's own left out)."""
    return {name.split("-")[0]: text.splitlines() for name, text in rank_notes(folder, suffix).items()}


def test_two_ranks_generating_from_a_checkpoint_verify_it_once_and_write_no_temporary_export(one_process_run, tmp_path):  # noqa: F811
    checkpoint = _step_dir(one_process_run)
    notes, tmp, out = tmp_path / "notes", tmp_path / "tmp", tmp_path / "out"
    for folder in (notes, tmp):
        folder.mkdir()
    done = run_probed_torchrun(tmp_path, PROBE, notes, "generate", "--checkpoint", str(checkpoint), "--prompt", "3",
                               "--steps", "2", "--seed", "5", "-o", str(out),
                               env={"TMPDIR": str(tmp), "VFM_TEST_WATCH": str(checkpoint)})
    assert done.returncode == 0, f"{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    assert (out / "0000.mp4").is_file()
    opens = _notes(notes, "opens")
    assert sorted(opens) == ["0", "1"]  # both ranks read the checkpoint's settings
    # Each file the manifest lists is hashed by one rank (the tensors' reads for the weights go through
    # safetensors' own file access, not Python's open: what is counted here is the verification).
    listed = [name for name in json.loads((checkpoint / "manifest.json").read_text())["files"]
              if name != "state.json"]  # state.json is also read by every rank for its settings
    assert listed and any(name.startswith("tensors/") for name in listed)
    for name in listed:
        readers = [rank for rank, paths in opens.items() for path in paths if path == str(checkpoint / name)]
        assert len(readers) == 1, f"{name} opened by ranks {readers}: verified more than once"
    made = [path for paths in _notes(notes, "mkdtemp").values() for path in paths]
    assert not [p for p in made if "vfm-generate" in p], made  # no rank wrote a temporary export
    assert [p.name for p in tmp.iterdir() if not p.name.startswith("torchelastic_")] == []  # (torchrun's own)


def _with_tokenizer(checkpoint: Path, run: Path, tokenizer: str, options: dict) -> Path:
    """A copy of ``checkpoint`` in ``run``/checkpoints whose recorded export settings name ``tokenizer``
    with ``options``, committed again (its manifest rewritten), as a run with that tokenizer saves it."""
    from vfm_parallel.checkpoint_integrity import write_manifest

    copy = Path(shutil.copytree(checkpoint, run / "checkpoints" / checkpoint.name))
    state = json.loads((copy / "state.json").read_text())
    state["export"].update(tokenizer=tokenizer, tokenizer_options=options)
    (copy / "state.json").write_text(json.dumps(state))
    write_manifest(copy, state["step"])
    return copy


def test_a_relative_tokenizer_path_in_a_checkpoint_resolves_against_the_runs_export_folder(one_process_run, tmp_path):  # noqa: F811
    run = tmp_path / "run"
    tokenizer = run / "export" / "tokenizer" / "Cosmos-Tokenizer-CV4x8x8"  # where the run's export finds it
    tokenizer.mkdir(parents=True)
    for name in ("encoder.jit", "decoder.jit"):
        (tokenizer / name).write_bytes(b"PK")
    checkpoint = _with_tokenizer(_step_dir(one_process_run), run, "cosmos", {"path": "tokenizer/Cosmos-Tokenizer-CV4x8x8"})
    result = CliRunner().invoke(app, ["generate", "--checkpoint", str(checkpoint), "--prompt", "3", "--steps", "1",
                                      "-o", str(tmp_path / "out")])
    # found there (a TorchScript tokenizer then waits for --trust-torchscript, before any of it is loaded)
    assert result.exit_code == 1
    assert f"cosmos tokenizer: {tokenizer} holds TorchScript" in result.output, result.output


def test_a_relative_tokenizer_path_leading_out_of_the_runs_export_is_refused_as_the_export_refuses_it(one_process_run, tmp_path):  # noqa: F811
    run = tmp_path / "run"
    checkpoint = _with_tokenizer(_step_dir(one_process_run), run, "cosmos", {"path": "../elsewhere/Cosmos-Tokenizer-CV4x8x8"})
    result = CliRunner().invoke(app, ["generate", "--checkpoint", str(checkpoint), "--prompt", "3", "--steps", "1",
                                      "-o", str(tmp_path / "out")])
    assert result.exit_code == 1
    assert (f"tokenizer_options.path = '../elsewhere/Cosmos-Tokenizer-CV4x8x8' resolves to "
            f"{(run / 'elsewhere' / 'Cosmos-Tokenizer-CV4x8x8').resolve()}, outside") in result.output, result.output
