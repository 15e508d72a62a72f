"""A run folder from elsewhere (resumed, or a shared scratch folder) may hold links where the trainer
writes: ``metrics.jsonl`` (appended) is refused before step 1, ``loss_curve.png`` is replaced; the
file a link points to is never written."""

from __future__ import annotations

import pytest

from tests.parallel.trainer_helpers import run_config, tiny_config
from vfm_parallel.trainer import ConfigError
from tests.parallel.trainer_helpers import one_thread  # noqa: F401 (autouse: one CPU thread per test)


def test_a_metrics_file_that_is_a_link_is_refused_and_its_target_untouched(tmp_path):
    victim = tmp_path / "bashrc"
    victim.write_text("precious\n")
    out = tmp_path / "run"
    out.mkdir()
    (out / "metrics.jsonl").symlink_to(victim)
    with pytest.raises(ConfigError, match=r"train.out_dir.*metrics.jsonl is a symbolic link \(to .*bashrc\); the trainer appends"):
        run_config(tiny_config(out, train={"steps": 2}))
    assert victim.read_text() == "precious\n"


def test_a_loss_curve_that_is_a_link_is_replaced_not_written_through(tmp_path):
    pytest.importorskip("matplotlib")
    victim = tmp_path / "photo.png"
    victim.write_bytes(b"precious")
    out = tmp_path / "run"
    out.mkdir()
    (out / "loss_curve.png").symlink_to(victim)
    run_config(tiny_config(out, train={"steps": 2}, logging={"loss_curve": True}))
    assert victim.read_bytes() == b"precious"
    assert not (out / "loss_curve.png").is_symlink()
    assert (out / "loss_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
