"""Spawned unit servers: their death is noticed at once, and they never outlive their master.

A server process that dies fails the call waiting on it within a poll interval (the backend
watches the process), not after the step timeout; recovery from a checkpoint then replays bit
for bit. A master killed with SIGKILL takes its servers with it (Linux: the servers get
SIGTERM when their parent dies).
"""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from cosim import CosimConfig, SimulationConfig, TransportError
from cosim.master.cosimulation import CoSimulation
from tests.cluster.scenarios import Crash, crashing, three_units

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[2]

#: The step timeout of these runs: far longer than any of them may take, so a test that
#: finishes proves the death was noticed without waiting it out.
TIMEOUT = 120.0


def config(**cosim):
    return SimulationConfig(dt=0.002, t_end=0.6, cosim=CosimConfig(
        H=0.02, scheme="gauss-seidel", extrapolation=1, timeout=TIMEOUT, **cosim))


def test_a_dead_server_fails_the_call_at_once_naming_it(tmp_path):
    sim = CoSimulation(crashing(str(tmp_path / "crashed")), config(backend="zmq"))
    start = time.monotonic()
    try:
        with pytest.raises(TransportError, match=r"unit 'b'.*server process \(pid \d+\) died "
                                                 r"\(killed by signal 9\)"):
            sim.run()
    finally:
        sim.close()
    assert time.monotonic() - start < TIMEOUT / 2


def test_recovery_after_a_kill_replays_identically_without_waiting_out_the_timeout(tmp_path):
    ref = CoSimulation(three_units(), config(checkpoint_every=5)).run()
    sim = CoSimulation(crashing(str(tmp_path / "crashed")),
                       config(backend="zmq", checkpoint_every=5))
    start = time.monotonic()
    try:
        logs = sim.run()
    finally:
        sim.close()
    assert sim.stats["recoveries"] == 1
    assert time.monotonic() - start < TIMEOUT / 2
    for key in ref:
        np.testing.assert_array_equal(logs[key], ref[key], err_msg=key)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux")
def test_servers_do_not_outlive_a_killed_master(tmp_path):
    script = tmp_path / "master.py"
    script.write_text(textwrap.dedent("""
        import sys, time
        from cosim import CosimConfig, SimulationConfig
        from cosim.master.cosimulation import CoSimulation
        from tests.cluster.scenarios import three_units
        sim = CoSimulation(three_units(), SimulationConfig(dt=0.002, t_end=0.6,
                           cosim=CosimConfig(H=0.02, backend="zmq",
                                             units={"main": {"process": "glue"}})))
        print(" ".join(str(s.proc.pid) for s in sim.backend.servers), flush=True)
        time.sleep(600)
    """))
    master = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                              cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        pids = [int(p) for p in master.stdout.readline().split()]
        assert len(pids) == 3 and all(_alive(p) for p in pids)
    finally:
        master.send_signal(signal.SIGKILL)
        master.wait()
    deadline = time.monotonic() + 60                # generous: the kill is immediate
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(p) for p in pids)


def _alive(pid: int) -> bool:
    """True while process ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def crashing_at(times, tmp_path):
    """``three_units`` whose unit b's server is killed (SIGKILL) once at each of ``times``:
    a chain of Crash blocks in b, each with its own marker file."""
    m = three_units()
    b = m["b"]
    b.connections = [c for c in b.connections if c.dst != "y.in"]
    src = "x.out"
    for i, t in enumerate(times):
        b.add(Crash(f"crash{i}", float(t), str(tmp_path / f"crashed{i}")))
        b.connect(src, f"crash{i}.in")
        src = f"crash{i}.out"
    b.connect(src, "y.in")
    return m


@pytest.mark.slow
def test_twenty_kills_at_random_points_all_replay_identically(tmp_path):
    """SIGKILL of a unit's server at 20 random times of one run (each followed by a
    recovery from the last checkpoint): the run is bit-identical to the unfailed one. Prints
    what a recovery costs (wall time above an unfailed run, per kill)."""
    ref = CoSimulation(three_units(), config(checkpoint_every=5)).run()

    def timed(model):
        sim = CoSimulation(model, config(backend="zmq", checkpoint_every=5, max_restarts=25))
        start = time.monotonic()
        try:
            return sim, sim.run(), time.monotonic() - start
        finally:
            sim.close()

    base = min(timed(crashing_at([], tmp_path))[2] for _ in range(2))
    times = np.sort(np.random.default_rng(20).uniform(0.03, 0.58, 20))
    sim, logs, wall = timed(crashing_at(times, tmp_path))
    assert all((tmp_path / f"crashed{i}").exists() for i in range(20))
    assert sim.stats["recoveries"] == 20
    for key in ref:
        np.testing.assert_array_equal(logs[key], ref[key], err_msg=key)
    print(f"\n20 kills, 20 recoveries, bit-identical; unfailed run {base:.2f} s, failed run "
          f"{wall:.2f} s: {(wall - base) / 20:.2f} s per recovery")


@pytest.mark.parametrize("partition", [None, 1])
def test_a_failing_unit_leaves_no_reply_unread(partition):
    """Unit b raises while the unit after it has answered too: that answer is read before
    the error is raised, so the calls after the failure (the logs, terminating) get their
    own replies, not the stale step's, and the logs end where the failure stopped the run."""
    from cosim import SimulationError
    from tests.cluster.scenarios import failing
    sim = CoSimulation(failing(0.5), SimulationConfig(
        dt=0.002, t_end=1.0, cosim=CosimConfig(backend="zmq", H=0.02, feedthrough="delay",
                                               extrapolation=1, processes=partition)))
    try:
        with pytest.raises(SimulationError, match="gave up"):
            sim.run()
        logs = sim.logs
        t_failed = sim.t
        # Every unit's samples, up to the end of the step it took when b failed.
        assert {k.split("/")[0] for k in logs if "/" in k} == {"a", "b"} and "e.out" in logs
        for key in logs:
            assert t_failed - 0.02 <= logs.time_of(key)[-1] <= t_failed + 0.02 + 1e-12, key
    finally:
        sim.close()
