"""A weights file the disk refuses (full, or past the process's file-size limit) is an OSError
naming the file, as every other disk error is: safetensors raised its own SafetensorError, which
`vfm train` could only show as a traceback when writing its export."""

from __future__ import annotations

import errno
import subprocess
import sys
import textwrap


def test_a_weights_file_the_disk_refuses_is_an_oserror_naming_the_file(tmp_path):
    # RLIMIT_FSIZE makes the kernel refuse the write (EFBIG) for real, without root or a full disk
    code = textwrap.dedent(f"""
        import resource, signal, torch
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead of killing us
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
        from vfm_models.checkpoint import save_state_dict
        try:
            save_state_dict({str(tmp_path / 'w.safetensors')!r}, {{"w": torch.zeros(10_000)}})
        except OSError as exc:
            print("OSError", exc.errno, exc.filename)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["OSError", str(errno.EFBIG), str(tmp_path / "w.safetensors")], done.stdout + done.stderr
