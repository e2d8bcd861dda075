"""The zmq backend's server processes live exactly as long as their co-simulation: a
co-simulation made and run in one thread runs on from another (the servers' parent-death
signal follows the master's process, not the thread that started them), and the servers
stop when the CoSimulation is closed, left as a context manager, garbage-collected, or
still open when the interpreter exits. A run that recovers keeps a warm spare server process,
which takes a lost server's place, is replaced in turn, and lives no longer than the
servers."""

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


def recovering(t_end=1.0):
    """A co-simulation that recovers (a checkpoint every 5 steps), its servers on zmq."""
    return CoSimulation(three_units(), SimulationConfig(dt=0.002, t_end=t_end, cosim=CosimConfig(
        **COSIM, checkpoint_every=5)))


def spare_pid(sim) -> int:
    spare = sim.backend.spares.spare
    assert spare is not None, "a run that recovers keeps a spare server process"
    return spare[0].pid


@pytest.mark.parametrize("spare_alive", [True, False])
def test_a_lost_server_is_replaced_by_the_warm_spare_which_is_replaced_in_turn(spare_alive):
    """The spare (cluster/spare.py) takes the lost server's place: the unit is served by
    the spare's process, a new spare waits, the run equals the uninterrupted one. A spare
    that died meanwhile is not used: a new process is started as without one."""
    import signal as sig
    with recovering() as sim:
        ref = sim.run()
    with recovering() as sim:
        first = spare_pid(sim)
        if not spare_alive:
            os.kill(first, sig.SIGKILL)
            assert gone_within([first])
        proxy = sim.master.proxies["a"]
        lost = proxy.server.proc.pid
        sim.run(t_end=0.3)
        os.kill(lost, sig.SIGKILL)
        logs = sim.run()
        assert sim.stats["recoveries"] == 1
        now = proxy.server.proc.pid
        assert now not in (lost,) and (now == first) is spare_alive
        second = spare_pid(sim)
        assert second not in (first, now) and alive(second)
        pids = [s.proc.pid for s in sim.backend.servers] + [second]
    assert gone_within(pids + [first, lost])    # the servers and the spare stop with it
    assert sorted(logs) == sorted(ref)
    for key in ref:
        np.testing.assert_array_equal(ref[key], logs[key], err_msg=key)
        np.testing.assert_array_equal(ref.time_of(key), logs.time_of(key), err_msg=key)


def test_no_spare_without_recovery_and_the_spare_dies_with_a_killed_master(tmp_path):
    import signal as sig
    with make() as sim:
        assert sim.backend.spares.spare is None      # a run that does not recover: none
    script = tmp_path / "master.py"
    script.write_text(
        "import time\n"
        "from tests.cluster.test_zmq_lifetime import recovering, spare_pid\n"
        "sim = recovering()\n"
        "print(' '.join(str(s.proc.pid) for s in sim.backend.servers), spare_pid(sim),"
        " flush=True)\n"
        "time.sleep(600)\n")
    master = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                              cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        pids = [int(p) for p in master.stdout.readline().split()]
        assert len(pids) == 3 and all(alive(p) for p in pids)     # servers of a, b; spare
    finally:
        master.send_signal(sig.SIGKILL)
        master.wait()
    assert gone_within(pids, 60.0)
