"""A unit alone on its connection (a :class:`cluster.steplane.StepBatch` of one unit, the
engine's one-unit round):
its macro step is one exchange, bit for bit the in-process run, with the same
failures and recovery; a unit server's fast lane (:meth:`cluster.lane.FusedLane.answer`)
answers whatever frames arrive and serves on."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zmq

from blocks import Gain, UnitDelay
from cluster.codec import decode_batch, encode_batch
from cluster.steplane import StepBatch
from cosim import (CoSimulation, CosimConfig, Inport, Model, Outport, SimulationConfig,
                   SimulationError, Subsystem)
from cosim.master import protocol as P
from tests.cluster.scenarios import Crash, Fail

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[2]


def alone(extra=None) -> Model:
    """One unit fed back by itself: u -> delay -> gain (-> extra) -> y -> u."""
    m = Model("alone")
    s = Subsystem("u0", atomic=True)
    s.add(Inport("u"), UnitDelay("d", 1.0), Gain("g", -0.97), Outport("y"))
    s.connect("u.out", "d.in")
    s.connect("d.out", "g.in")
    if extra is None:
        s.connect("g.out", "y.in")
    else:
        s.add(extra)
        s.connect("g.out", f"{extra.name}.in")
        s.connect(f"{extra.name}.out", "y.in")
    m.add(s)
    m.connect("u0.y", "u0.u")
    return m


def config(t_end=0.5, **cosim):
    return SimulationConfig(dt=0.01, t_end=t_end, cosim=CosimConfig(H=0.01, **cosim))


def assert_same(a, b):
    assert sorted(a) == sorted(b)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
        np.testing.assert_array_equal(a.time_of(key), b.time_of(key))


@pytest.mark.parametrize("processes", [None, "cores"])
def test_a_unit_alone_steps_in_one_exchange_bit_identical_to_in_process(processes):
    ref = CoSimulation(alone(), config()).run()
    sim = CoSimulation(alone(), config(backend="zmq", processes=processes))
    try:
        sim.master.initialize()
        logs = sim.run()
        batches = list(sim.master.engine.transport.batches.values())
        assert [type(b) for b in batches] == [StepBatch] and batches[0].alone is not None
        ts, seconds = sim.master.calls.step_times["u0"]
    finally:
        sim.close()
    assert_same(ref, logs)
    assert len(ts) == len(seconds) == 50 and min(seconds) > 0


def test_a_unit_alone_that_fails_fails_as_in_process():
    ref = CoSimulation(alone(Fail("f", 0.25)), config())
    with pytest.raises(SimulationError, match="gave up") as local:
        ref.run()
    sim = CoSimulation(alone(Fail("f", 0.25)), config(backend="zmq"))
    try:
        sim.master.initialize()
        assert "u0" in sim.master.engine.lanes
        with pytest.raises(SimulationError, match="gave up") as remote:
            sim.run()
        assert remote.value.t == local.value.t and sim.t == ref.t
        assert_same(ref.logs, sim.logs)
    finally:
        sim.close()


def test_a_killed_unit_alone_is_respawned_and_replays_identically(tmp_path):
    ref = CoSimulation(alone(Crash("c", 0.3)), config()).run()
    marker = str(tmp_path / "crashed")
    sim = CoSimulation(alone(Crash("c", 0.3, marker)), config(backend="zmq",
                                                               checkpoint_every=5))
    try:
        logs = sim.run()
    finally:
        sim.close()
    assert Path(marker).exists() and sim.stats["recoveries"] == 1
    assert_same(ref, logs)


def test_the_fast_lane_answers_frames_of_any_shape_and_serves_on(tmp_path):
    """A DEALER peer may send anything (no delimiter, a unit without a batch, a pair and a
    half): each message is answered the ordinary way or dropped, and fused steps are
    served on afterwards as if nothing had come."""
    model = alone()
    model.connections = []
    path = tmp_path / "u0.yaml"
    model.to_yaml(path, simulation=SimulationConfig(dt=0.01, t_end=0.0))
    proc = subprocess.Popen([sys.executable, "-m", "cosim.cli", "serve", str(path), "--bind",
                             "tcp://127.0.0.1:0", "--log-level", "ERROR"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    ctx = zmq.Context.instance()
    dealer, req = ctx.socket(zmq.DEALER), ctx.socket(zmq.REQ)
    try:
        address = proc.stdout.readline().strip().rsplit(" on ", 1)[1]
        for s in (dealer, req):
            s.setsockopt(zmq.LINGER, 0)
            s.RCVTIMEO = 30_000
            s.connect(address)

        def step(t):
            batch = encode_batch([P.Step(("u",), (0,), 0, t, 0.01, np.array([0.5]))])
            req.send_multipart([b"u0", batch])
            (reply,) = req.recv_multipart()
            (rep,) = decode_batch(reply)
            assert type(rep) is P.Stepped and rep.t_reached == pytest.approx(t + 0.01)
            return rep

        req.send_multipart([b"u0", encode_batch([P.Initialize(0.0)])])
        req.recv_multipart()
        first = step(0.0)
        batch = encode_batch([P.Step(("u",), (0,), 0, 0.01, 0.01, np.array([0.5]))])
        answered = 0
        for frames in ([b"x"], [b""], [b"", b"u0"], [b"", b"u0", batch, b"u0"],
                       [b"junk", b"u0", batch], [b"", b"", b"u0", batch],
                       [b"", b"nobody", batch], [b"", b"u0", b"\x91\xc0"]):
            dealer.send_multipart(frames)
            if dealer.poll(2000):
                answered += 1
                for f in dealer.recv_multipart()[1:]:
                    assert all(isinstance(r, P.ErrorReply) for r in decode_batch(f))
            assert proc.poll() is None
        assert answered >= 5
        rep = step(0.01)                    # the unit did not move meanwhile
        assert rep.outputs.shape == first.outputs.shape
    finally:
        dealer.close()
        req.close()
        proc.terminate()
        proc.wait(timeout=30)
