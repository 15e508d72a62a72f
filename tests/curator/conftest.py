"""Shared fixtures: one local Ray session for the whole curator test run, and synthetic videos."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def ray_session():
    """A small local Ray instance shared by every test that needs one (ray.init takes seconds)."""
    import ray

    from vfm_curator.execution.session import ensure_ray

    started = ensure_ray(num_cpus=2)
    yield ray
    if started:
        ray.shutdown()
