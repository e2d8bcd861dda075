"""Where a sweep runs when nobody says: local worker processes, one per core, and no Ray
started; Ray when an address is given or Ray already runs (``cluster.sweep.choose_backend``).
Each case is made real here: a listening port named by Ray's address file, RAY_ADDRESS, the
session's Ray, and a ``cosim sweep`` without options whose Ray directory stays empty."""

from __future__ import annotations

import csv
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from cluster.sweep import BACKEND_RULE, choose_backend, ray_running
from cosim import SimulationConfig
from tests.cluster import sweep_models as sm

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def no_ray(tmp_path, monkeypatch):
    """An environment where no Ray runs: an empty Ray directory, no RAY_ADDRESS (other
    sessions on this machine may run Ray under /tmp/ray), and no Ray seen in this process
    (the session's Ray, started by an earlier test, is hidden while the test runs;
    test_ray_initialised_in_this_process_means_ray checks that case)."""
    monkeypatch.delitem(sys.modules, "ray", raising=False)
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path / "raytmp"))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    return tmp_path / "raytmp"


def test_without_ray_or_an_address_the_default_is_local_processes(no_ray):
    assert not ray_running()
    assert choose_backend(None, None) == "process"


def test_a_given_backend_is_kept(no_ray):
    for backend in ("ray", "process", "serial"):
        assert choose_backend(backend, None) == backend
    assert choose_backend("process", "auto") == "process"


def test_an_address_means_ray(no_ray):
    assert choose_backend(None, "auto") == "ray"
    assert choose_backend(None, "10.0.0.7:6379") == "ray"


def test_ray_address_in_the_environment_means_ray(no_ray, monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")
    assert choose_backend(None, None) == "ray"


def test_a_ray_start_cluster_that_answers_means_ray(no_ray):
    """``ray start`` writes its address to ``$RAY_TMPDIR/ray/ray_current_cluster``; a cluster
    whose port answers is running, one whose port is closed (stopped, crashed) is not."""
    (no_ray / "ray").mkdir(parents=True)
    address_file = no_ray / "ray" / "ray_current_cluster"
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        address_file.write_text(f"127.0.0.1:{port}")
        assert ray_running() and choose_backend(None, None) == "ray"
    assert not ray_running() and choose_backend(None, None) == "process"   # port closed
    address_file.write_text("garbage")
    assert choose_backend(None, None) == "process"


@pytest.mark.cluster
def test_ray_initialised_in_this_process_means_ray(ray_session):
    assert ray_running()
    assert choose_backend(None, None) == "ray"


def test_cosim_sweep_without_options_runs_on_local_processes_and_starts_no_ray(no_ray,
                                                                               tmp_path):
    path = tmp_path / "lag.yaml"
    sm.lag().to_yaml(path, simulation=SimulationConfig(dt=0.01, t_end=1.0, solver="RK4"))
    code = ("import os, sys\n"
            "from cluster.sweep import main\n"
            "code = main(sys.argv[1:])\n"
            "print('ray imported:', 'ray' in sys.modules)\n"
            "sys.exit(code)\n")
    r = subprocess.run([sys.executable, "-c", code, str(path), "--out", str(tmp_path / "s"),
                        "--grid", "gain=1,2,3", "--metric", "y=final:plant.out"],
                       capture_output=True, text=True, cwd=ROOT, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    assert "3 runs (0 failed)" in r.stdout
    assert "ray imported: False" in r.stdout
    assert not no_ray.exists()                  # no Ray session directory was made
    with open(tmp_path / "s" / "results.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    # The oracle: the same runs, serially in this process.
    from cluster.sweep import final, grid, sweep
    serial = sweep(sm.lag, sm.CONFIG, grid({"gain": [1.0, 2.0, 3.0]}),
                   {"y": final("plant.out")}, backend="serial")
    assert [float(row["y"]) for row in rows] == [row["y"] for row in serial]


def test_the_help_states_the_rule():
    r = subprocess.run([sys.executable, "-m", "cosim.cli", "sweep", "--help"],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0
    text = " ".join(r.stdout.split())
    assert " ".join(BACKEND_RULE.split()) in text
    assert "--ray-address" in text
