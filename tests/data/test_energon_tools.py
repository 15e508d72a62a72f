"""energon's own `info`, `lint` and `preview` commands read a prepared vfm dataset folder through the
typed config prepare_dataset writes beside the crude one (`--dataset-config energon_tools.yaml`): on
the crude `dataset.yaml` they fail (`KeyError: 'sample_type'`, "No cookers registered"). vfm's loader
accepts that file as written and refuses it changed, as any other YAML in `.nv-meta/`."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.data.helpers import meta, quiet
from vfm_data import ShardWriter, make_loader, prepare_dataset
from vfm_data.energon_tools import TOOLS_YAML
from vfm_data.trust import UntrustedDatasetError

ENERGON = [sys.executable, "-c", "import sys; from megatron.energon.cli.main import main; sys.exit(main())"]


def _energon(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*ENERGON, *args], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module", params=["npy", "pth"])
def folder(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(request.param)
    with ShardWriter(folder, max_shard_bytes=4_000, array_format=request.param) as w:
        for i in range(6):
            w.write(f"s{i}", torch.randn(4, 2, 4, 4), torch.randn(3, 8), meta())
    quiet(prepare_dataset, folder)
    return folder


def test_energon_info_reads_a_prepared_folder_through_its_tools_config(folder):
    done = _energon("info", str(folder), "--dataset-config", TOOLS_YAML)
    assert done.returncode == 0, done.stderr
    assert "6 samples" in done.stdout and "`train`: 100%, 6 samples" in done.stdout


def test_energon_lint_reads_every_sample_of_a_prepared_folder_through_its_tools_config(folder):
    done = _energon("lint", str(folder), "--dataset-config", TOOLS_YAML, "--split-parts", "train")
    assert done.returncode == 0, done.stderr
    assert "6/6" in done.stderr  # its progress bar: every sample read and decoded


def test_energon_lint_names_a_damaged_latent_through_the_tools_config(tmp_path):
    from tests.data.helpers import rewrite_shard

    with ShardWriter(tmp_path, max_shard_bytes=1 << 20) as w:
        for i in range(3):
            w.write(f"s{i}", torch.randn(4, 2, 4, 4), torch.randn(3, 8), meta())
    shard, = tmp_path.glob("*.tar")
    rewrite_shard(shard, lambda name, data: data[:20] if name == "s1.latent.npy" else data)
    quiet(prepare_dataset, tmp_path)
    done = _energon("lint", str(tmp_path), "--dataset-config", TOOLS_YAML, "--split-parts", "train")
    # energon 7.4.1's lint ignores its own error handler (deprecated) and exits 0: its output names the sample
    said = done.stdout + done.stderr
    assert "DecodingError" in said and "__key__: s1" in said and "2/3" in said


def test_the_loader_reads_a_folder_with_the_tools_config_and_refuses_it_changed(folder, tmp_path):
    assert (folder / ".nv-meta" / TOOLS_YAML).is_file()
    assert next(make_loader(folder, patch_size=2, batch_size=1)).__key__
    import shutil

    changed = Path(shutil.copytree(folder, tmp_path / "changed"))
    tools = changed / ".nv-meta" / TOOLS_YAML
    tools.write_text(tools.read_text().replace("json[caption]", "json[source]") + "sample_loader: evil.py:load\n")
    with pytest.raises(UntrustedDatasetError, match=rf"{TOOLS_YAML}.*not the one vfm writes"):
        make_loader(changed, patch_size=2, batch_size=1)
