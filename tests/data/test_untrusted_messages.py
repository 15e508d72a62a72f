"""Sample keys and shard names come from tar files someone else wrote; vfm-data names them in
warnings and errors that loader worker processes print themselves. Those messages are escaped where
they are made (``vfm_plugins.printable``, newlines too): an ESC sequence in a key (here OSC 52, which
sets the clipboard) or a shard name (clear screen, carriage return) reaches the terminal as visible
``\\x1b`` text. Real shards: written by vfm's ShardWriter, re-keyed as a crafted tar would be, indexed
by energon; read by the real loader in a worker process."""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import sys
import tarfile
import warnings

import pytest

from tests.data.helpers import quiet, write_dataset
from vfm_data import make_loader, prepare_dataset
from vfm_data.errors import ShardError

KEY = "k\x1b]52;c;cHduZWQ=\x07"  # + the sample number (4 digits): OSC 52 (set the clipboard) ... BEL
SHARD = "shard\x1b[2J\r-000000.tar"  # clear the screen, back to the line start
CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # any control character but tab
OPTIONS = dict(patch_size=2, batch_size=2, max_seq_len=64, shuffle_buffer=None)


def _crafted(folder, *, corrupt) -> None:
    """3x3 latents (the patch 2 leaves a remainder: a warning naming the sample), keys and shard
    renamed; the ``.json`` of samples whose number ends in ``corrupt`` replaced by garbage (skips)."""
    write_dataset(folder, 12, max_shard_bytes=1 << 20, hw=3)
    (shard,) = sorted(folder.glob("*.tar"))
    with tarfile.open(shard) as tar:
        members = [(m, tar.extractfile(m).read()) for m in tar.getmembers()]
    with tarfile.open(folder / SHARD, "w") as tar:
        for info, data in members:
            info.name = info.name.replace("k0", KEY, 1)
            if info.name.endswith(tuple(f"{c}.json" for c in corrupt)):
                data = b"{not json"
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    shard.unlink()
    (folder / f"{shard.name}.idx").unlink()
    shutil.rmtree(folder / ".nv-meta")
    quiet(prepare_dataset, folder)


_READ = """
import sys
from vfm_data import make_loader
loader = make_loader(sys.argv[1], patch_size=2, batch_size=2, max_seq_len=64, shuffle_buffer=None,
                     num_workers=1, streams=1)
for _ in range(4):
    next(loader)
loader.close()
"""


@pytest.mark.timeout(120)
def test_warnings_printed_by_a_loader_worker_show_control_characters_as_escapes(tmp_path):
    _crafted(tmp_path, corrupt="1")
    # a process of its own, as in a run: the worker prints its warnings itself, to the same stderr
    done = subprocess.run([sys.executable, "-c", _READ, str(tmp_path)], capture_output=True, timeout=100)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    # from our prefix on: energon's progress bar (a carriage return) may share the line
    ours = [line[line.index("vfm_data:"):] for line in done.stderr.decode().split("\n") if "vfm_data:" in line]
    crop = [line for line in ours if "not divisible by the patch" in line]
    skip = [line for line in ours if "skipped sample" in line]
    assert crop and skip, ours
    for line in crop + skip:
        assert not CONTROL.search(line), f"raw control characters printed: {line!r}"
        assert "shard\\x1b[2J\\r-000000.tar" in line
    assert "sample k\\x1b]52;c;cHduZWQ=\\x070000: latent (H, W) = (3, 3)" in crop[0]
    assert "skipped sample 'k\\x1b]52;c;cHduZWQ=\\x070001'" in skip[0]


@pytest.mark.timeout(60)
def test_a_shard_error_from_a_worker_names_the_shard_escaped(tmp_path):
    _crafted(tmp_path, corrupt="0123456789")  # nothing decodes
    loader = make_loader(tmp_path, num_workers=1, **OPTIONS)
    try:
        with warnings.catch_warnings(), pytest.raises(ShardError) as err:
            warnings.simplefilter("ignore")
            for _ in range(4):
                next(loader)
    finally:
        loader.close()
    message = str(err.value)
    assert f"shard {tmp_path}/shard\\x1b[2J\\r-000000.tar has no decodable sample" in message
    assert "first: sample 'k\\x1b]52;c;cHduZWQ=\\x07" in message
    assert not CONTROL.search(message), message


def test_the_first_sample_probe_names_the_shard_escaped(tmp_path):
    from vfm_data.sample import first_sample

    _crafted(tmp_path, corrupt="0123456789")
    with warnings.catch_warnings(), pytest.raises(ShardError, match="no decodable sample in") as err:
        warnings.simplefilter("ignore")
        first_sample(tmp_path)
    assert "shard\\x1b[2J\\r-000000.tar 12" in str(err.value) and not CONTROL.search(str(err.value))
