"""Shared fixtures: a session-wide Ray instance for cluster tests (started only when used)."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")


@pytest.fixture(scope="session")
def ray_session():
    """One local Ray instance for the whole session (ray.init costs seconds and ~600 MiB)."""
    import ray
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 configure_logging=False)
    yield ray
    ray.shutdown()
