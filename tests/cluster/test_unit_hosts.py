"""Co-simulated runs of a study reuse their units' hosts (cosim.master.hosts): the Ray actors
or server processes of a run before get the next run's units (Reload, or only the parameter
values when nothing else changed: SetParameters), which run bit for bit as on new hosts; a
structure change or a host that died starts new ones (reported), and a run that failed never
hands its hosts on."""

from pathlib import Path

import numpy as np
import pytest

from cluster.codec import decode_batch, encode_batch
from cluster.sweep import final, listed, sweep
from cosim import SimulationError
from cosim.master import protocol as P
from cosim.master.cosimulation import CoSimulation
from cosim.master.hosts import UnitHosts
from tests.cluster import sweep_models as sm
from tests.cluster.served import client, serve, unit_file

POINTS = [{"k": 1.0, "freq": 0.3}, {"k": 2.5, "freq": 0.7}, {"k": 0.5, "freq": 0.1}]


def model(params, b_name="b"):
    m = sm.cosim_loop(b_name)
    m.parameters.update(params)
    return m


def with_x0(params, x0):
    """:func:`model` with unit a's integrator starting at ``x0`` (a literal: another unit
    file for a's process, the same processes)."""
    from blocks import Integrator
    m = model(params)
    a = m["a"]
    a.blocks[[b.name for b in a.blocks].index("x")] = Integrator("x", x0)
    return m


def run(params, config, hosts=None, b_name="b", x0=None):
    """The run's logs, and where its units ran (process ids)."""
    sim = CoSimulation(model(params, b_name) if x0 is None else with_x0(params, x0), config,
                       hosts=hosts)
    ok = False
    try:
        logs = sim.run()
        ok = True
        return logs, pids(sim.backend)
    finally:
        sim.close(keep=ok)


def pids(backend) -> list[int]:
    if hasattr(backend, "servers"):
        return [s.proc.pid for s in backend.servers]
    return sorted({p.where()["pid"] for p in backend.proxies.values()})


def assert_same(a, b):
    assert sorted(a) == sorted(b) and len(a) > 0
    for k in a:
        np.testing.assert_array_equal(a.time_of(k), b.time_of(k), strict=True)
        np.testing.assert_array_equal(a[k], b[k], strict=True)


@pytest.fixture(params=["zmq", "ray"])
def backend(request):
    if request.param == "ray":
        request.getfixturevalue("ray_session")
    return request.param


@pytest.mark.cluster
def test_reloaded_units_run_bit_for_bit_as_new_ones(backend):
    config = sm.cosim_loop_config(backend)
    with UnitHosts() as hosts:
        where = []
        for p in POINTS:
            logs, at = run(p, config, hosts)
            assert_same(logs, run(p, config)[0])
            where.append(at)
        assert hosts.started == 1 and hosts.reused == 2 and not hosts.fallbacks
        assert where[0] == where[1] == where[2]        # the same processes served every run
    # The parameters did reach the units: the runs differ.
    assert not np.array_equal(run(POINTS[0], config)[0]["a/x.out"], run(POINTS[1], config)[0]["a/x.out"])


@pytest.mark.cluster
def test_runs_that_change_only_parameter_values_send_the_values_alone(backend):
    config = sm.cosim_loop_config(backend)
    with UnitHosts() as hosts:
        backends = []
        for p, x0 in ((POINTS[0], 1.0), (POINTS[1], 1.0), (POINTS[2], 2.0), (POINTS[0], 2.0)):
            sim = CoSimulation(with_x0(p, x0), config, hosts=hosts)
            logs = sim.run()
            sim.close()
            backends.append(sim.backend)
            assert_same(logs, run(p, config, x0=x0)[0])
        assert all(b is backends[0] for b in backends)
        assert hosts.started == 1 and hosts.reused == 3 and not hosts.fallbacks
        # Two processes (a, b; the top-level blocks run beside the master): run 2 sends
        # values to both; run 3 a's new unit file (its integrator changed) and values to b;
        # run 4 values again.
        assert (backends[0].reparameterized, backends[0].reloaded) == (2 + 1 + 2, 1)


@pytest.mark.cluster
def test_a_structure_change_starts_new_units_and_says_why(caplog):
    config = sm.cosim_loop_config("zmq")
    with UnitHosts() as hosts:
        run(POINTS[0], config, hosts)
        logs, _ = run(POINTS[1], config, hosts, b_name="b2")
        assert hosts.started == 2 and hosts.reused == 0
        assert len(hosts.fallbacks) == 1 and "other server processes" in hosts.fallbacks[0]
        assert "b2" in hosts.fallbacks[0]
    assert "units started in new processes" in caplog.text
    assert_same(logs, run(POINTS[1], config, b_name="b2")[0])


@pytest.mark.cluster
def test_a_failed_run_does_not_hand_its_hosts_on(backend):
    config = sm.cosim_loop_config(backend)
    with UnitHosts() as hosts:
        run(POINTS[0], config, hosts)
        with pytest.raises(SimulationError, match="gave up"):
            run({**POINTS[1], "t_fail": 0.3}, config, hosts)      # on the reloaded hosts
        logs, _ = run(POINTS[2], config, hosts)
        assert hosts.started == 2 and hosts.reused == 1 and not hosts.fallbacks
    assert_same(logs, run(POINTS[2], config)[0])


@pytest.mark.cluster
def test_a_host_that_died_between_runs_is_replaced_and_reported():
    config = sm.cosim_loop_config("zmq")
    with UnitHosts() as hosts:
        sim = CoSimulation(model(POINTS[0]), config, hosts=hosts)
        sim.run()
        sim.close()
        dead = sim.backend.servers[1].proc
        dead.kill()
        dead.wait()
        logs, _ = run(POINTS[1], config, hosts)
        assert hosts.started == 2 and len(hosts.fallbacks) == 1
        assert "died" in hosts.fallbacks[0]
    assert_same(logs, run(POINTS[1], config)[0])


@pytest.mark.cluster
def test_only_a_reloadable_server_reloads_and_only_units_of_its_names(tmp_path):
    path = unit_file(tmp_path, spare=False)
    text = path.read_text()
    for extra, expect in (((), P.ErrorKind.UNSUPPORTED), (("--reloadable",), None)):
        proc, address = serve(path, *extra)
        try:
            sock = client(address)
            (reply,) = decode_batch(ask_raw(sock, "a", [P.Reload(text)]))
            if expect is not None:
                assert isinstance(reply, P.ErrorReply) and reply.kind is expect
                assert "--reloadable" in reply.message
                continue
            assert reply == P.Ok()
            (reply,) = decode_batch(ask_raw(sock, "a", [P.Reload(text.replace(
                "\n  b:\n", "\n  c:\n"))]))
            assert isinstance(reply, P.ErrorReply) and "serves a, b" in reply.message
            # A Reload must travel alone, and the units still answer after the refusals.
            (r1,) = decode_batch(ask_raw(sock, "a", [P.Heartbeat(), P.Reload(text)]))
            assert isinstance(r1, P.ErrorReply) and "alone" in r1.message
            assert isinstance(decode_batch(ask_raw(sock, "b", [P.Heartbeat()]))[0], P.Alive)
        finally:
            proc.kill()
            proc.wait()


def served_unit_file(tmp_path, k: float, freq: float) -> Path:
    """A unit file of one unit with two parameters, as a master writes one."""
    from blocks import Gain, Sine
    from cosim import Model, Outport, SimulationConfig, Subsystem
    m = Model("units_g", parameters={"k": k, "freq": freq})
    g = Subsystem("g", atomic=True, dt=0.002, solver="RK4")
    g.add(Sine("src", frequency="=freq"), Gain("gain", "=k"), Outport("y"))
    g.connect("src.out", "gain.in")
    g.connect("gain.out", "y.in")
    m.add(g)
    path = tmp_path / f"g-{k}-{freq}.yaml"
    m.to_yaml(path, simulation=SimulationConfig(dt=0.002, t_end=0.0))
    return path


def outputs_of(sock, steps: int = 20) -> list:
    """The unit's output after each of ``steps`` macro steps from 0."""
    assert decode_batch(ask_raw(sock, "g", [P.Initialize(0.0)])) == [P.Ok()]
    out = []
    for i in range(steps):
        done, outs = decode_batch(ask_raw(sock, "g", [P.DoStep(i * 0.01, 0.01),
                                                      P.GetOutputs()]))
        out.append(outs.values["y"].copy())
    return out


@pytest.mark.cluster
def test_set_parameters_builds_the_units_of_the_file_with_the_values_and_refuses_the_rest(
        tmp_path):
    first = served_unit_file(tmp_path, 1.5, 0.4)
    proc, address = serve(first)                    # not --reloadable
    try:
        (reply,) = decode_batch(ask_raw(client(address), "g", [P.SetParameters(
            {"k": 2.0, "freq": 0.1})]))
        assert reply.kind is P.ErrorKind.UNSUPPORTED and "--reloadable" in reply.message
    finally:
        proc.kill()
        proc.wait()
    fresh, address = serve(served_unit_file(tmp_path, -0.75, 0.9))
    proc, reloadable = serve(first, "--reloadable")
    try:
        expected = outputs_of(client(address))
        sock = client(reloadable)
        before = outputs_of(sock)                   # the units of the file as written
        refused = [
            [P.SetParameters({"k": 2.0})],                          # a parameter missing
            [P.SetParameters({"k": 2.0, "freq": 0.1, "z": 1.0})],   # one the file lacks
            [P.SetParameters({"k": "=nope", "freq": 0.1})],         # a name not defined
            [P.SetParameters({"k": {"a": 1.0}, "freq": 0.1})],      # a value of no kind
            [P.SetParameters({"k": [[1.0, 2.0], [3.0]], "freq": 0.1})],
            [P.Heartbeat(), P.SetParameters({"k": 2.0, "freq": 0.1})],   # not alone
        ]
        for requests in refused:
            replies = decode_batch(ask_raw(sock, "g", requests))
            assert isinstance(replies[-1], P.ErrorReply), (requests, replies)
            assert isinstance(decode_batch(ask_raw(sock, "g", [P.Heartbeat()]))[0], P.Alive)
        # Bytes that are no longer a message at all: each answered, the server lives on.
        rng = np.random.default_rng(3)
        seed = encode_batch([P.SetParameters({"k": 2.0, "freq": 0.1})])
        for _ in range(300):
            data = bytearray(seed)
            for _ in range(rng.integers(1, 5)):
                j = rng.integers(len(data))
                data[j] ^= 1 << rng.integers(8)
            sock.send_multipart([b"g", bytes(data)])
            sock.recv_multipart()
            assert proc.poll() is None
        # The values of the fresh server's file: bit for bit its outputs.
        assert decode_batch(ask_raw(sock, "g", [P.SetParameters(
            {"k": -0.75, "freq": 0.9})])) == [P.Ok()]
        got = outputs_of(sock)
        for a, b in zip(got, expected, strict=True):
            np.testing.assert_array_equal(a, b, strict=True)
        assert not np.array_equal(before[5], got[5])
    finally:
        for p in (proc, fresh):
            p.kill()
            p.wait()


def ask_raw(sock, unit, requests) -> bytes:
    sock.send_multipart([unit.encode(), encode_batch(requests)])
    return sock.recv_multipart()[0]


@pytest.mark.cluster
def test_a_study_of_cosimulations_reuses_units_with_the_results_of_new_ones(tmp_path):
    points = [{**p, "t_fail": 100.0} for p in POINTS]
    points[1:1] = [{"k": 1.5, "freq": 0.2, "t_fail": 0.3}]         # fails at t = 0.3
    config = sm.cosim_loop_config("zmq")
    reducers = {"y_end": final("a/x.out"), "x_end": final("b/x.out")}
    rows = {reuse: sweep(sm.cosim_loop, config, listed(points), reducers, backend="serial",
                         reuse_units=reuse) for reuse in (True, False)}
    strip = {k: [{c: v for c, v in r.items() if c != "wall_time"} for r in rows[k]]
             for k in rows}
    assert strip[True] == strip[False]
    assert [r["status"] for r in rows[True]] == ["ok", "failed", "ok", "ok"]


@pytest.mark.cluster
def test_a_chunk_of_a_worker_shares_hosts_and_stops_them_when_done(monkeypatch):
    from cluster.sweep_design import runs_of
    from cluster.sweep_worker import execute_many
    closed = []
    close = UnitHosts.close
    monkeypatch.setattr(UnitHosts, "close", lambda self: (closed.append(self), close(self)))
    runs = runs_of(POINTS)
    config = sm.cosim_loop_config("zmq")
    reducers = {"x_end": final("a/x.out")}
    rows = execute_many(sm.cosim_loop, config, runs, reducers, None)
    (hosts,) = closed
    assert hosts.started == 1 and hosts.reused == 2 and hosts.kept == 0
    fresh = execute_many(sm.cosim_loop, config, runs, reducers, None, reuse_units=False)
    assert [r["x_end"] for r, _ in rows] == [r["x_end"] for r, _ in fresh]
    assert all(r["status"] == "ok" for r, _ in rows)


@pytest.mark.cluster
def test_ray_actors_that_recovery_may_restart_are_not_reused(ray_session):
    from dataclasses import replace
    config = sm.cosim_loop_config("ray")
    config = replace(config, cosim=replace(config.cosim, checkpoint_every=10))
    with UnitHosts() as hosts:
        first = run(POINTS[0], config, hosts)[1]
        logs, second = run(POINTS[1], config, hosts)
        # Ray would restart a dead actor with its first run's units: new actors every run.
        assert hosts.started == 2 and hosts.reused == 0 and not hosts.fallbacks
        assert set(first).isdisjoint(second)
    assert_same(logs, run(POINTS[1], config)[0])
