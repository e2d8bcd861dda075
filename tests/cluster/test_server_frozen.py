"""A unit server another team runs (``cosim serve``, reached by address) that freezes is told
from a slow one within seconds, whatever the step timeout: stopped (SIGSTOP) mid-run, the
master fails the call naming the unit, the server's address, the time and what to do — or,
with checkpoints, recovers once the server is resumed or started again, bit for bit. A unit
whose step takes longer than that is waited for; a timeout says how far its step came."""

import os
import signal
import threading
import time

import numpy as np
import pytest

from cluster.liveness import Pulse
from cosim import CoSimulation, TransportError
from tests.cluster.scenarios import paced, three_units
from tests.cluster.served import config, serve, stop, unit_file

pytestmark = pytest.mark.cluster

#: The step timeout of these runs: a frozen server must be found long before it.
TIMEOUT = 60.0


def freeze_during(sim, pid, after: float = 0.3, then=None) -> dict:
    """SIGSTOP process ``pid`` ``after`` s from now (while ``sim`` runs, from a thread);
    ``then(box)`` runs afterwards in that thread. The box holds when it froze."""
    box = {}

    def freezer():
        time.sleep(after)
        os.kill(pid, signal.SIGSTOP)
        box["frozen"] = time.monotonic()
        if then is not None:
            then(box)
    box["thread"] = threading.Thread(target=freezer, daemon=True)
    box["thread"].start()
    return box


def test_a_frozen_server_fails_the_run_within_seconds_naming_it(tmp_path):
    proc, address = serve(unit_file(tmp_path))
    try:
        with CoSimulation(three_units(), config(address, t_end=60.0, timeout=TIMEOUT)) as sim:
            sim.run(t_end=0.1)
            box = freeze_during(sim, proc.pid)
            with pytest.raises(TransportError) as caught:
                sim.run()
            took = time.monotonic() - box["frozen"]
            os.kill(proc.pid, signal.SIGCONT)
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        stop(proc)
    message = str(caught.value)
    print(f"\nfrozen server found {took:.2f} s after SIGSTOP (step timeout {TIMEOUT:g} s): "
          f"{message}")
    assert caught.value.unit in ("a", "b") and caught.value.t is not None
    assert f"the server at {address} is frozen or gone" in message
    assert "SIGSTOP" in message and "cosim serve" in message      # why, and what to do
    assert took < TIMEOUT / 4
    assert took >= Pulse.FROZEN - 0.5                              # not a guess


@pytest.mark.slow
@pytest.mark.parametrize("how", ["resumed", "restarted"])
def test_a_run_recovers_once_the_frozen_server_is_resumed_or_restarted(tmp_path, how):
    """The team resumes its stopped server (SIGCONT), or kills it and serves the unit file
    again on the same address: the run restores its last checkpoint there and ends as the
    run that never stopped did."""
    path = unit_file(tmp_path)
    proc, address = serve(path)
    procs = [proc]
    try:
        cfg = dict(t_end=30.0, timeout=TIMEOUT, checkpoint_every=10)
        with CoSimulation(three_units(), config(address, **cfg)) as sim:
            ref = sim.run()

        def bring_back(box):
            time.sleep(Pulse.FROZEN + 1.0)          # found frozen meanwhile
            box["back"] = time.monotonic()
            if how == "resumed":
                os.kill(proc.pid, signal.SIGCONT)
            else:
                proc.kill()
                proc.wait()
                procs.append(serve(path, bind=address)[0])

        with CoSimulation(three_units(), config(address, **cfg)) as sim:
            sim.run(t_end=0.5)
            box = freeze_during(sim, proc.pid, then=bring_back)
            logs = sim.run()
            box["thread"].join()
            assert sim.stats["recoveries"] == 1
    finally:
        for p in procs:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGCONT)
                stop(p)
    assert sorted(logs) == sorted(ref)
    for key in ref:
        np.testing.assert_array_equal(logs[key], ref[key], err_msg=key)


@pytest.mark.slow
def test_a_step_longer_than_the_frozen_verdict_is_waited_for_and_a_timeout_tells_progress(
        tmp_path):
    """Unit a sleeps 3 s per macro step (longer than the 2 s without an answer that make a
    server frozen): its server answers heartbeats meanwhile, the run goes on; with a timeout
    shorter than the step, the error says the server answers and how far the step came."""
    model = paced(3.0, start=0.01)              # (nothing slow before the first step)
    proc, address = serve(unit_file(tmp_path, paced(3.0, start=0.01), spare=False),
                          "--plugin", "tests.cluster.scenarios")
    try:
        with CoSimulation(model, config(address, t_end=0.04, timeout=TIMEOUT)) as sim:
            start = time.monotonic()
            sim.run()
            assert time.monotonic() - start >= 6.0          # two steps of 3 s, waited for
        with CoSimulation(model, config(address, t_end=0.04, timeout=2.5)) as sim:
            with pytest.raises(TransportError) as caught:
                sim.run()
    finally:
        stop(proc)
    message = str(caught.value)
    print(f"\n{message}")
    assert "within 2.5 s" in message and "still answers heartbeats" in message, message
    assert "unit 'a': its step had reached t=" in message, message
