"""The autouse fixture of the CLI tests that train in the test's own process: one CPU thread (fast and
repeatable), and energon's pin_memory warning (a CPU machine pins no memory) silenced."""

from __future__ import annotations

import warnings

import pytest
import torch


@pytest.fixture(autouse=True)
def one_thread_quiet_loader():
    """Imported by a test module: each of its tests runs on one CPU thread, without the pin_memory warning."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*pin_memory.*")
        yield
    torch.set_num_threads(threads)
