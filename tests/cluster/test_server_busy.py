"""A served unit that steps for long does not make its server deaf: heartbeats and other,
idle units (another master's handshake) are answered while it steps, and a step past the
server's deadline stops with an error naming the limit. A deadline changes no result."""

import numpy as np
import pytest

from cluster.codec import decode_batch, encode_batch
from cosim import SimulationConfig
from cosim.master import protocol as P
from cosim.master.local_unit import LocalUnit
from cosim.model.evaluate import evaluate
from tests.cluster import served
from tests.cluster.scenarios import three_units
from tests.cluster.served import DT, ask, client, serve


def unit_file(tmp_path, solver="RK4"):
    """Units a and b of :func:`three_units` with ``solver``."""
    return served.unit_file(tmp_path, three_units(solvers=(solver, solver)), spare=False)


@pytest.mark.cluster
def test_heartbeats_and_an_idle_unit_are_answered_while_a_unit_steps(tmp_path):
    proc, address = serve(unit_file(tmp_path))
    try:
        a, other = client(address), client(address)
        ask(a, "a", [P.Hello(P.PROTOCOL_VERSION, "m1"), P.Initialize(0.0),
                     P.SetInputs({"u": np.ones(1)})])
        # A long step: 250,000 ticks of RK4 (seconds of work on this machine).
        a.send_multipart([b"a", encode_batch([P.DoStep(0.0, 500.0)])])
        (first,) = ask(other, "a", [P.Heartbeat()])
        while not first.stepping:                   # (the step may not have come in yet)
            assert first.t == 0.0 and not a.poll(0)
            (first,) = ask(other, "a", [P.Heartbeat()])
        answered = []
        for unit, req in [("a", P.Heartbeat()), ("b", P.Hello(P.PROTOCOL_VERSION, "m2")),
                          ("b", P.Describe()), ("a", P.Heartbeat())]:
            (rep,) = ask(other, unit, [req])
            assert not isinstance(rep, P.ErrorReply), rep
            answered.append(rep)
            # The long step has not answered yet: these replies came while it ran.
            assert not a.poll(0), "the step finished before the other requests were answered"
        assert [type(r).__name__ for r in answered] == ["Alive", "Welcome", "UnitDescription",
                                                        "Alive"]
        # The heartbeats report the step's progress: under way, its time advancing.
        beat = answered[-1]
        assert first.stepping and 0.0 <= first.t < 500.0
        while beat.t == first.t and not a.poll(0):
            (beat,) = ask(other, "a", [P.Heartbeat()])
        assert a.poll(0) or (beat.stepping and first.t < beat.t < 500.0)
        (done,) = decode_batch(a.recv_multipart()[0])
        assert isinstance(done, P.StepDone) and done.t_reached == pytest.approx(500.0)
    finally:
        proc.terminate()
        proc.wait(timeout=60)


@pytest.mark.cluster
def test_a_step_past_the_deadline_stops_with_an_error_naming_it(tmp_path):
    proc, address = serve(unit_file(tmp_path), "--step-deadline", "0.2")
    try:
        a = client(address)
        ask(a, "a", [P.Hello(P.PROTOCOL_VERSION, "m1"), P.Initialize(0.0),
                     P.SetInputs({"u": np.ones(1)})])
        (err,) = ask(a, "a", [P.DoStep(0.0, 1000.0)])
        assert isinstance(err, P.ErrorReply)
        assert "step deadline of 0.2 s" in err.message and "--step-deadline" in err.message
        # The server serves on: a fresh session steps normally.
        replies = ask(a, "a", [P.Initialize(0.0), P.SetInputs({"u": np.ones(1)}),
                               P.DoStep(0.0, 0.02)])
        assert isinstance(replies[-1], P.StepDone)
    finally:
        proc.terminate()
        proc.wait(timeout=60)


@pytest.mark.parametrize("solver", ["RK4", "RK45", "BDF"])
def test_a_deadline_changes_no_result(solver):
    """A step run in chunks under a deadline equals the step run in one call, bit for bit."""
    def unit(deadline):
        model = three_units(solvers=(solver, solver))
        evaluate(model)
        u = LocalUnit(model["a"], SimulationConfig(dt=DT, t_end=1.0, solver=solver))
        u.step_deadline = deadline
        u.handle(P.Initialize(0.0))
        return u
    plain, chunked = unit(None), unit(1e9)
    for u in (plain, chunked):
        t = 0.0
        for k in range(3):
            u.handle(P.SetInputs({"u": np.array([np.sin(k)])}))
            done = u.handle(P.DoStep(t, 5.0))          # 2,500 ticks: several chunks
            assert isinstance(done, P.StepDone), done
            t = done.t_reached
    assert np.array_equal(plain.sim.state.X, chunked.sim.state.X)
    assert np.array_equal(plain.get_outputs()["y"], chunked.get_outputs()["y"])
    logs = [u.handle(P.CollectLogs()) for u in (plain, chunked)]
    assert all(isinstance(lg, P.LogBatch) for lg in logs)
    assert logs[0].signals.keys() == logs[1].signals.keys()
    for key, (t, v) in logs[0].signals.items():
        assert len(t) > 7000
        assert np.array_equal(t, logs[1].signals[key][0])
        assert np.array_equal(v, logs[1].signals[key][1])
