"""Co-simulated runs of a study reuse their units' hosts (cosim.master.hosts): the Ray actors
or server processes of a run before get the next run's units (Reload), which run bit for bit
as on new hosts; a structure change or a host that died starts new ones (reported), and a
run that failed never hands its hosts on."""

import numpy as np
import pytest

from cluster.codec import decode_batch, encode_batch
from cluster.sweep import final, listed, sweep
from cosim import SimulationError
from cosim.master import protocol as P
from cosim.master.cosimulation import CoSimulation
from cosim.master.hosts import UnitHosts
from tests.cluster import sweep_models as sm
from tests.cluster.test_server_busy import client, serve, unit_file

POINTS = [{"k": 1.0, "freq": 0.3}, {"k": 2.5, "freq": 0.7}, {"k": 0.5, "freq": 0.1}]


def model(params, b_name="b"):
    m = sm.cosim_loop(b_name)
    m.parameters.update(params)
    return m


def run(params, config, hosts=None, b_name="b"):
    """The run's logs, and where its units ran (process ids)."""
    sim = CoSimulation(model(params, b_name), config, hosts=hosts)
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
    path = unit_file(tmp_path)
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
            assert decode_batch(ask_raw(sock, "b", [P.Heartbeat()])) == [P.Ok()]
        finally:
            proc.kill()
            proc.wait()


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
