"""The zmq backend's server processes live exactly as long as their co-simulation: a
co-simulation made and run in one thread runs on from another (the servers' parent-death
signal follows the master's process, not the thread that started them), and the servers
stop when the CoSimulation is closed, left as a context manager, garbage-collected, or
still open when the interpreter exits."""

import gc
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from cosim import CoSimulation, CosimConfig, SimulationConfig
from tests.cluster.scenarios import three_units

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[2]
COSIM = dict(H=0.02, scheme="gauss-seidel", extrapolation=1, backend="zmq", timeout=60.0)


def make(t_end=0.4):
    return CoSimulation(three_units(), SimulationConfig(dt=0.002, t_end=t_end,
                                                        cosim=CosimConfig(**COSIM)))


def alive(pid: int) -> bool:
    """True while process ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def gone_within(pids, seconds=20.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not any(alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


def test_a_cosimulation_made_and_run_in_a_thread_runs_on_from_another():
    with make() as sim:
        ref = sim.run()
    box = {}

    def first_part():
        box["sim"] = make()
        box["sim"].run(duration=0.1)
    worker = threading.Thread(target=first_part)
    worker.start()
    worker.join()
    time.sleep(0.5)              # (the signal of a thread's end would have come by now)
    with box["sim"] as sim:
        logs = sim.run()         # the rest, from the main thread
    assert sorted(logs) == sorted(ref)
    for key in ref:
        np.testing.assert_array_equal(ref[key], logs[key], err_msg=key)


def test_servers_stop_when_the_context_manager_is_left_even_after_an_error():
    with pytest.raises(RuntimeError, match="the caller's own"):
        with make() as sim:
            pids = [s.proc.pid for s in sim.backend.servers]
            assert pids and all(alive(p) for p in pids)
            sim.run(duration=0.04)
            raise RuntimeError("the caller's own error")
    assert gone_within(pids)


def test_servers_stop_when_the_cosimulation_is_garbage_collected():
    sim = make()
    pids = [s.proc.pid for s in sim.backend.servers]
    sim.run(duration=0.04)
    del sim
    gc.collect()
    assert gone_within(pids)


def test_servers_stop_when_the_interpreter_exits_with_the_cosimulation_open(tmp_path):
    script = tmp_path / "open.py"
    script.write_text(
        "import threading\n"
        "from tests.cluster.test_zmq_lifetime import make\n"
        "box = []\n"
        "t = threading.Thread(target=lambda: box.append(make()))\n"
        "t.start(); t.join()\n"
        "box[0].run(duration=0.04)\n"
        "print(' '.join(str(s.proc.pid) for s in box[0].backend.servers), flush=True)\n")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         cwd=ROOT, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    pids = [int(p) for p in out.stdout.split()]
    assert pids and gone_within(pids)


@pytest.mark.slow
def test_a_frozen_server_is_told_from_a_slow_one_and_recovered_well_before_the_timeout():
    """A server stopped with SIGSTOP mid-run (its step timeout 60 s) is found frozen within
    seconds, re-spawned and the run replayed from its checkpoint, bit for bit."""
    import signal as sig
    config = dict(H=0.02, scheme="gauss-seidel", extrapolation=1, checkpoint_every=5)
    cfg = SimulationConfig(dt=0.002, t_end=6.0, cosim=CosimConfig(**config))
    with CoSimulation(three_units(), cfg) as sim:
        ref = sim.run()
    with CoSimulation(three_units(), replace_cosim(cfg, backend="zmq", timeout=60.0)) as sim:
        sim.run(t_end=1.0)
        pid = sim.backend.servers[0].proc.pid
        frozen = {}

        def freeze():
            time.sleep(0.3)
            os.kill(pid, sig.SIGSTOP)
            frozen["at"] = time.monotonic()
        threading.Thread(target=freeze, daemon=True).start()
        logs = sim.run()
        took = time.monotonic() - frozen["at"]
        assert sim.stats["recoveries"] == 1
        assert not alive(pid)
    print(f"frozen server recovered and the run finished {took:.1f} s after SIGSTOP "
          f"(step timeout 60 s)")
    assert took < 30.0                       # not the 60 s timeout
    for key in ref:
        np.testing.assert_array_equal(ref[key], logs[key], err_msg=key)


def replace_cosim(cfg, **cosim):
    from dataclasses import replace
    return replace(cfg, cosim=replace(cfg.cosim, **cosim))


@pytest.mark.slow
@pytest.mark.parametrize("request_kind, after", [("Initialize", -1.0), ("GetState", 0.3),
                                                 ("CollectLogs", 0.3), ("CollectLogs", 1.001)])
def test_a_server_killed_while_a_checkpoint_is_captured_is_recovered(request_kind, after):
    """Killed when the master initializes it, asks for its state or logs for the periodic
    checkpoint, or for its logs at the end of the run: the run recovers (initializing again,
    or from the checkpoint before; it failed with none written) and equals the
    uninterrupted run."""
    import signal as sig
    from cosim.master import protocol as P
    config = dict(H=0.02, scheme="gauss-seidel", extrapolation=1, checkpoint_every=5)
    cfg = SimulationConfig(dt=0.002, t_end=1.01, cosim=CosimConfig(**config))
    with CoSimulation(three_units(), cfg) as sim:
        ref = sim.run()
    with CoSimulation(three_units(), replace_cosim(cfg, backend="zmq", timeout=60.0)) as sim:
        proxy = sim.master.proxies["a"]
        kind = getattr(P, request_kind)
        submit, killed = proxy.submit, []

        def kill_on_capture(requests):
            if not killed and sim.master.T > after and any(type(r) is kind for r in requests):
                pid = proxy.server.proc.pid
                os.kill(pid, sig.SIGKILL)
                proxy.server.proc.wait()
                killed.append(pid)
            return submit(requests)
        proxy.submit = kill_on_capture
        logs = sim.run()
        assert killed and sim.stats["recoveries"] == 1
    for key in ref:
        np.testing.assert_array_equal(ref[key], logs[key], err_msg=key)
