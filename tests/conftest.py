"""Shared fixtures: a session-wide Ray instance for cluster tests (started only when used)."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")


def pytest_configure(config):
    # Tests load pythonfmu-built FMUs into this process, through cosim and through fmpy
    # alone (fmpy's SSP simulator, simulate_fmu): their libraries corrupt the heap at exit
    # unless their state is reset first (cosim/fmi/pythonfmu_exit.py), which would abort
    # the whole run after every test passed. The reset covers every loaded FMU library,
    # whoever loaded it; stdlib only, nothing of fmpy is imported here.
    from cosim.fmi.pythonfmu_exit import release_at_exit
    release_at_exit()


@pytest.fixture(scope="session", autouse=True)
def _keys_in_a_scratch_directory(tmp_path_factory):
    """``cosim keys`` run by a test writes to a scratch key directory, never the user's."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("COSIM_KEY_DIR", str(tmp_path_factory.mktemp("keys")))
        yield


@pytest.fixture(scope="session")
def ray_session():
    """One local Ray instance for the whole session (ray.init costs seconds and ~600 MiB)."""
    import ray
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 configure_logging=False)
    yield ray
    ray.shutdown()
