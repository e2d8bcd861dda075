"""ZeroMQ remote units: real server processes on loopback, no mocks of the transport."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import zmq

from cluster.codec import encode_batch
from cluster.zmq_backend import ZmqProxy
from blocks import Sum
from cosim import (CoSimulation, CosimConfig, Inport, Model, ModelError, Outport,
                   SimulationConfig, Subsystem, TransportError)
from cosim.master import protocol as P
from cosim.master.partition import REST

from tests.cluster.scenarios import algebraic, crashing, three_units

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[2]


def run(model, **cosim):
    sim = CoSimulation(model, SimulationConfig(dt=0.002, t_end=0.6, cosim=CosimConfig(**cosim)))
    try:
        return sim, sim.run()
    finally:
        sim.close()


def assert_same(a, b, keys=None):
    for key in keys or a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
        np.testing.assert_array_equal(a.time_of(key), b.time_of(key))


@pytest.mark.parametrize("scenario, cosim", [
    (three_units, dict(H=0.02, scheme="gauss-seidel", extrapolation=1)),
    (algebraic, dict(H=0.05, tolerance=1e-12)),
])
def test_zmq_backend_is_bit_identical_to_in_process(scenario, cosim):
    _, ref = run(scenario(), **cosim)
    _, logs = run(scenario(), backend="zmq", **cosim)
    assert sorted(ref) == sorted(logs)
    assert_same(ref, logs)


def vector_ring():
    """Four units in a loop: scalar outputs feeding a unit with two inputs and a vector
    output (off the servers' generated path), which feeds a unit with feedthrough."""
    from blocks import Demux, Integrator, Mux, UnitDelay
    m = Model("vectors")
    p = Subsystem("p", atomic=True)
    p.add(Inport("u"), UnitDelay("d", 1.0), Outport("y"))
    p.connect("u.out", "d.in")
    p.connect("d.out", "y.in")
    q = Subsystem("q", atomic=True)
    q.add(Inport("u"), Integrator("x", 0.5), Outport("y"))
    q.connect("u.out", "x.in")
    q.connect("x.out", "y.in")
    v = Subsystem("v", atomic=True)
    v.add(Inport("a"), Inport("b"), Mux("mux"), UnitDelay("d", np.array([0.25, -1.0])),
          Outport("y"))
    v.connect("a.out", "mux.in1")
    v.connect("b.out", "mux.in2")
    v.connect("mux.out", "d.in")
    v.connect("d.out", "y.in")
    w = Subsystem("w", atomic=True)
    w.add(Inport("u", shape=(2,)), Demux("dm"), Sum("s", "+-"), Outport("y"))
    w.connect("u.out", "dm.in")
    w.connect("dm.out1", "s.in1")
    w.connect("dm.out2", "s.in2")
    w.connect("s.out", "y.in")
    m.add(p, q, v, w)
    m.connect("p.y", "v.a")
    m.connect("q.y", "v.b")
    m.connect("v.y", "w.u")
    m.connect("w.y", "p.u", "q.u")
    return m


@pytest.mark.parametrize("feedthrough", ["resolve", "delay"])
@pytest.mark.parametrize("processes", [None, 2])
def test_jacobi_rounds_through_lanes_are_bit_identical_to_in_process(feedthrough, processes):
    """Jacobi at extrapolation order 0: every unit's fused step written from the master's
    values through its channel's lane by the engine (one message per server), vector ports
    and units off the generated path included."""
    cosim = dict(H=0.01, feedthrough=feedthrough)
    sim = CoSimulation(vector_ring(), SimulationConfig(dt=0.01, t_end=0.5,
                                                       cosim=CosimConfig(**cosim)))
    try:
        ref = sim.run()
    finally:
        sim.close()
    sim = CoSimulation(vector_ring(), SimulationConfig(
        dt=0.01, t_end=0.5, cosim=CosimConfig(backend="zmq", processes=processes, **cosim)))
    try:
        sim.master.initialize()
        engine = sim.master.engine
        assert engine is not None and set(engine.lanes) == set(sim.master.names)
        logs = sim.run()
    finally:
        sim.close()
    assert sorted(ref) == sorted(logs)
    assert_same(ref, logs)


def test_units_sharing_a_process_are_bit_identical_to_in_process():
    # Units a (RK4) and b (RK45) and the rest share one server process: each keeps its own
    # configuration (carried as subsystem options in the one unit file).
    cosim = dict(H=0.02, scheme="gauss-seidel", extrapolation=1)
    _, ref = run(three_units(), **cosim)
    units = {u: {"process": "shared"} for u in ("a", "b", REST)}
    sim = CoSimulation(three_units(), SimulationConfig(
        dt=0.002, t_end=0.6, cosim=CosimConfig(backend="zmq", units=units, **cosim)))
    try:
        assert len(sim.backend.servers) == 1
        assert {p.server for p in sim.backend.proxies.values()} == set(sim.backend.servers)
        logs = sim.run()
    finally:
        sim.close()
    assert_same(ref, logs)


def test_units_spread_over_processes_balanced_and_bit_identical():
    """``processes=2``: the units without options go to two server processes, the largest
    (most blocks) first onto the emptier one; a unit with options keeps its own."""
    from tests.benchmarks.rings import ring
    cosim = dict(H=0.01)
    _, ref = run(ring(5), **cosim)
    sim = CoSimulation(ring(5), SimulationConfig(dt=0.002, t_end=0.6, cosim=CosimConfig(
        backend="zmq", processes=2, units={"u4": {"process": "own"}}, **cosim)))
    try:
        assert len(sim.backend.servers) == 3
        hosts = {}
        for u, p in sim.backend.proxies.items():
            hosts.setdefault(p.server, []).append(u)
        assert sorted(map(sorted, hosts.values())) == [["u0", "u2"], ["u1", "u3"], ["u4"]]
        logs = sim.run()
    finally:
        sim.close()
    assert_same(ref, logs)


def test_units_of_one_server_share_one_round_trip_per_call():
    units = {u: {"process": "shared"} for u in ("a", "b", REST)}
    # The protocol path: every call addressed to all three units goes out as one message.
    sim = CoSimulation(three_units(), SimulationConfig(
        dt=0.002, t_end=0.6, cosim=CosimConfig(H=0.02, backend="zmq", units=units,
                                               engine=False)))
    try:
        (conn,) = sim.backend.connections
        counts = {"messages": 0, "calls": 0}
        sim.master.initialize()
        calls = sim.master.calls
        send, call = conn._send, calls.call

        def counted_send():
            counts["messages"] += 1
            send()

        def counted_call(batch, t):
            counts["calls"] += 1
            return call(batch, t)
        conn._send, calls.call = counted_send, counted_call
        for _ in range(10):
            sim.master.step()
        # Every call addressed all three units; each went out as one message.
        assert counts["calls"] >= 10 and counts["messages"] == counts["calls"]
    finally:
        sim.close()


def test_the_engine_sends_one_message_per_round_to_a_server_of_several_units():
    units = {u: {"process": "shared"} for u in ("a", "b", REST)}
    sim = CoSimulation(three_units(), SimulationConfig(
        dt=0.002, t_end=0.6, cosim=CosimConfig(H=0.02, backend="zmq", units=units)))
    try:
        (conn,) = sim.backend.connections
        sim.master.initialize()
        program = sim.master.engine.program
        counts = {"messages": 0}
        send, post = conn._send, conn.post

        def counted_send():
            counts["messages"] += 1
            send()

        def counted_post(*args):
            counts["messages"] += 1
            return post(*args)
        conn._send, conn.post = counted_send, counted_post
        for _ in range(10):
            sim.master.step()
        couplings = sum(1 for s in program.stages if s.coupling)
        extra = sim.master.stats["iterations"] - 10 * couplings
        assert counts["messages"] == 10 * program.round_trips + extra, program.table()
    finally:
        sim.close()


def test_every_server_gets_its_message_before_the_master_waits_for_a_reply():
    # a in one server process, b and the rest in another: a Jacobi call sends to both
    # servers first (the master flushes), then waits; waiting on one before the other has
    # its message would run the servers one after the other.
    units = {"b": {"process": "rest"}, REST: {"process": "rest"}}
    sim = CoSimulation(three_units(), SimulationConfig(
        dt=0.002, t_end=0.6, cosim=CosimConfig(H=0.02, backend="zmq", units=units)))
    try:
        events = []
        for n, conn in enumerate(sim.backend.connections):
            def send(_send=conn._send, n=n):
                events.append(("send", n))
                _send()

            def receive(unit, requests, _receive=conn._receive, n=n):
                events.append(("receive", n))
                _receive(unit, requests)

            # Fused steps of a Jacobi round go through the channel's lane methods.
            def post(*args, _post=conn.post, n=n):
                events.append(("send", n))
                return _post(*args)

            def collect(*args, _collect=conn.collect, n=n):
                events.append(("receive", n))
                return _collect(*args)
            conn._send, conn._receive, conn.post, conn.collect = send, receive, post, collect
        sim.master.initialize()
        events.clear()
        sim.master.step()
        assert sorted(events[:2]) == [("send", 0), ("send", 1)], events
    finally:
        sim.close()


def test_a_process_named_like_a_unit_gets_its_own_unit_file():
    # Unit a runs alone; b and the rest share a process that happens to be called "a".
    cosim = dict(H=0.02, scheme="gauss-seidel", extrapolation=1)
    _, ref = run(three_units(), **cosim)
    sim = CoSimulation(three_units(), SimulationConfig(dt=0.002, t_end=0.6, cosim=CosimConfig(
        backend="zmq", units={"b": {"process": "a"}, REST: {"process": "a"}}, **cosim)))
    try:
        files = {s.unit_file.name for s in sim.backend.servers}
        assert files == {"unit-a.yaml", "process-a.yaml"}
        logs = sim.run()
    finally:
        sim.close()
    assert_same(ref, logs)


def test_a_killed_shared_process_is_respawned_once_and_replays_identically(tmp_path):
    cosim = dict(H=0.02, scheme="gauss-seidel", extrapolation=1, checkpoint_every=5,
                 timeout=10.0)
    _, ref = run(three_units(), **cosim)
    marker = tmp_path / "crashed"
    # b kills its process, which also hosts a: both come back from one re-spawn.
    sim, logs = run(crashing(str(marker)), backend="zmq",
                    units={"a": {"process": "ab"}, "b": {"process": "ab"}}, **cosim)
    assert marker.exists() and sim.stats["recoveries"] == 1
    assert_same(ref, logs)


def test_a_unit_with_events_is_refused_rather_than_run_without_them():
    from cosim.model.events import Scheduled
    m = three_units()
    m.add_event(Scheduled("halt", times=[0.374], stop=True))
    # placed in a server process, the top-level blocks' unit cannot take its events there
    with pytest.raises(ModelError, match="unit 'main' has events \\(halt\\)"):
        run(m, H=0.02, backend="zmq", units={"main": {"process": "glue"}})


def test_the_top_level_blocks_run_beside_the_master_with_their_events():
    from cosim.model.events import Scheduled

    def model():
        m = three_units()
        m.add_event(Scheduled("halt", times=[0.374], stop=True))
        return m
    _, ref = run(model(), H=0.02, backend="local")
    sim, logs = run(model(), H=0.02, backend="zmq")
    assert sim.master.proxies["main"].in_process() is not None
    assert all(sim.master.proxies[u].in_process() is None for u in ("a", "b"))
    assert sim.t == pytest.approx(0.374)
    assert_same(ref, logs)


def test_a_unit_with_an_address_and_a_process_is_refused():
    with pytest.raises(ModelError, match="unit 'a' has both an address"):
        run(three_units(), H=0.02, backend="zmq",
            units={"a": {"address": "tcp://127.0.0.1:1", "process": "p"}})


@pytest.fixture(scope="module")
def served_plant(tmp_path_factory):
    """`cosim serve` hosting unit 'a' of three_units, as another team would run it."""
    d = tmp_path_factory.mktemp("served")
    model = three_units()
    keep = model["a"]
    model.blocks = [keep]
    model.connections = []
    path = d / "plant.yaml"
    model.to_yaml(path, simulation=SimulationConfig(dt=0.002, t_end=0.0))
    proc = subprocess.Popen([sys.executable, "-m", "cosim.cli", "serve", str(path), "--bind",
                             "tcp://127.0.0.1:0", "--max-message-size", "1000000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    line = proc.stdout.readline()
    assert line.startswith("serving a on "), line + proc.stderr.read()
    yield line.strip().rsplit(" on ", 1)[1], proc
    proc.terminate()
    proc.wait(timeout=10)


def test_remote_unit_served_by_another_process(served_plant):
    address, _ = served_plant
    cosim = dict(H=0.02, scheme="gauss-seidel", extrapolation=1)
    _, ref = run(three_units(), **cosim)
    # The default (local) backend runs b and the rest in process; a is remote all the same.
    sim, logs = run(three_units(), units={"a": {"address": address}}, **cosim)
    assert isinstance(sim.master.proxies["a"], ZmqProxy)
    # Column for column the in-process run (a.y, which only unit b receives, included:
    # tests/cluster/test_remote_columns.py).
    assert sorted(logs) == sorted(ref)
    assert_same(ref, logs)
    # The server outlives that master and serves the next session the same way.
    _, again = run(three_units(), units={"a": {"address": address}}, **cosim)
    assert_same(ref, again)


def test_malformed_oversized_and_misaddressed_messages_are_refused(served_plant):
    address, proc = served_plant
    sock = zmq.Context.instance().socket(zmq.REQ)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(address)
    from cluster.codec import decode_batch
    big = encode_batch([P.SetInputs({"u": np.zeros(200_000)})])   # 1.6 MB > the 1 MB limit
    for frames, needle in (([b"a", b"\x93garbage"], "malformed"),
                           ([b"nobody", encode_batch([P.Heartbeat()])], "no unit 'nobody'"),
                           ([b"a"], "expected pairs of frames"),
                           ([b"a", big], "exceeds the limit of 1000000")):
        sock.send_multipart(frames)
        assert sock.poll(5000)
        (reply,) = decode_batch(sock.recv())
        assert isinstance(reply, P.ErrorReply) and needle in reply.message
    sock.close()
    proxy = ZmqProxy("a", address, timeout=10.0)
    assert proxy.heartbeat(2.0) and proc.poll() is None     # still serving
    proxy.close()


def test_server_answers_each_unit_of_a_message_in_order(served_plant):
    from cluster.codec import decode_batch
    address, _ = served_plant
    sock = zmq.Context.instance().socket(zmq.REQ)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(address)
    beat = encode_batch([P.Heartbeat()])
    sock.send_multipart([b"a", beat, b"nobody", beat, b"a", encode_batch([P.Describe()])])
    assert sock.poll(5000)
    frames = sock.recv_multipart()
    sock.close()
    assert len(frames) == 3
    (ok,), (err,), (desc,) = (decode_batch(f) for f in frames)
    assert isinstance(ok, P.Alive) and isinstance(desc, P.UnitDescription) and desc.name == "a"
    assert isinstance(err, P.ErrorReply) and "no unit 'nobody'" in err.message


def test_unreachable_server_raises_transport_error_naming_unit_call_and_time():
    ctx = zmq.Context.instance()
    silent = ctx.socket(zmq.ROUTER)                          # accepts, never answers
    port = silent.bind_to_random_port("tcp://127.0.0.1")
    try:
        start = time.time()
        with pytest.raises(TransportError) as exc:
            ZmqProxy("plant", f"tcp://127.0.0.1:{port}", timeout=0.5)
        assert time.time() - start < 5
        assert exc.value.unit == "plant" and exc.value.method == "Hello"
    finally:
        silent.close(linger=0)


def test_killed_server_is_respawned_and_the_run_replays_identically(tmp_path):
    cosim = dict(H=0.02, scheme="gauss-seidel", extrapolation=1, checkpoint_every=5,
                 timeout=10.0)
    _, ref = run(three_units(), **cosim)
    marker = tmp_path / "crashed"
    sim, logs = run(crashing(str(marker)), backend="zmq", **cosim)
    assert marker.exists() and sim.stats["recoveries"] == 1
    assert_same(ref, logs)


def test_version_mismatch_is_refused(served_plant):
    address, _ = served_plant
    sock = zmq.Context.instance().socket(zmq.REQ)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(address)
    sock.send_multipart([b"a", encode_batch([P.Hello(P.PROTOCOL_VERSION + 1, "x")])])
    assert sock.poll(5000)
    from cluster.codec import decode_batch
    (reply,) = decode_batch(sock.recv())
    sock.close()
    assert isinstance(reply, P.ErrorReply)
    assert str(P.PROTOCOL_VERSION + 1) in reply.message and str(P.PROTOCOL_VERSION) in \
        reply.message


def test_curve_refuses_a_client_without_the_right_key(tmp_path):
    import zmq.auth
    keys = tmp_path / "keys"
    allowed = tmp_path / "allowed"
    keys.mkdir()
    allowed.mkdir()
    server_pub, server_sec = zmq.auth.create_certificates(keys, "server")
    good_pub, good_sec = zmq.auth.create_certificates(keys, "good")
    _, bad_sec = zmq.auth.create_certificates(keys, "bad")
    os.replace(good_pub, allowed / Path(good_pub).name)
    model = three_units()
    model.blocks = [model["a"]]
    model.connections = []
    path = tmp_path / "plant.yaml"
    model.to_yaml(path, simulation=SimulationConfig(dt=0.002, t_end=0.0))
    proc = subprocess.Popen([sys.executable, "-m", "cluster.server", str(path), "--bind",
                             "tcp://127.0.0.1:0", "--curve-secret", server_sec,
                             "--authorized", str(allowed)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        address = proc.stdout.readline().strip().rsplit(" on ", 1)[1]
        with pytest.raises(TransportError):
            ZmqProxy("a", address, timeout=1.0, curve_server_public=server_pub,
                     curve_client_keys=bad_sec)
        good = ZmqProxy("a", address, timeout=30.0, curve_server_public=server_pub,
                        curve_client_keys=good_sec)
        assert good.description.name == "a"
        good.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=10)
    assert "refused a client" in err and "authentication" in err, err
