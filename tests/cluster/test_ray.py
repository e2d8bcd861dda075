"""The Ray backend: same numbers as in process, placement, and recovery from a killed unit."""

import numpy as np
import pytest

from cosim import CoSimulation, CosimConfig, SimulationConfig
from cosim.master.records import StepStatus

from tests.cluster.scenarios import algebraic, crashing, three_units

pytestmark = pytest.mark.cluster


def run(model, backend, **cosim):
    sim = CoSimulation(model, SimulationConfig(dt=0.002, t_end=1.0, cosim=CosimConfig(
        backend=backend, **cosim)))
    try:
        logs = sim.run()
    finally:
        sim.close()
    return sim, logs


def assert_same(a, b):
    assert sorted(a) == sorted(b)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
        np.testing.assert_array_equal(a.time_of(key), b.time_of(key))


@pytest.mark.parametrize("scenario, cosim", [
    (three_units, dict(H=0.02, scheme="jacobi", extrapolation=1)),
    (three_units, dict(H=0.02, scheme="gauss-seidel", extrapolation=2)),
    (algebraic, dict(H=0.05, tolerance=1e-12)),
])
def test_ray_backend_is_bit_identical_to_in_process(ray_session, scenario, cosim):
    _, local = run(scenario(), "local", **cosim)
    sim, remote = run(scenario(), "ray", **cosim)
    assert_same(local, remote)


def test_killed_unit_is_recreated_and_the_run_replays_identically(ray_session, tmp_path):
    cosim = dict(H=0.02, scheme="gauss-seidel", extrapolation=1, checkpoint_every=5)
    _, ref = run(three_units(), "local", **cosim)
    marker = tmp_path / "crashed"
    sim, logs = run(crashing(str(marker)), "ray", **cosim)
    assert marker.exists(), "the unit never crashed"
    assert sim.stats["recoveries"] == 1
    assert any(r.status is StepStatus.RECOVERED for r in sim.step_log)
    # Unit b has one more block (the crash pass-through): compare every common signal.
    for key in ref:
        np.testing.assert_array_equal(ref[key], logs[key], err_msg=key)
        np.testing.assert_array_equal(ref.time_of(key), logs.time_of(key))


def test_units_sharing_a_process_share_an_actor_and_are_bit_identical(ray_session):
    cosim = dict(H=0.02, scheme="jacobi", extrapolation=1)
    _, local = run(three_units(), "local", **cosim)
    sim = CoSimulation(three_units(), SimulationConfig(dt=0.002, t_end=1.0, cosim=CosimConfig(
        backend="ray", units={"a": {"process": "ab"}, "b": {"process": "ab"},
                              "main": {"process": "glue"}}, **cosim)))
    try:
        pa, pb, pm = (sim.master.proxies[u] for u in ("a", "b", "main"))
        assert pa.actor is pb.actor and pa.conn is pb.conn and pm.actor is not pa.actor
        assert pa.where()["pid"] == pb.where()["pid"] != pm.where()["pid"]
        logs = sim.run()
    finally:
        sim.close()
    assert_same(local, logs)


def test_a_killed_shared_actor_is_recreated_and_replays_identically(ray_session, tmp_path):
    cosim = dict(H=0.02, scheme="gauss-seidel", extrapolation=1, checkpoint_every=5)
    _, ref = run(three_units(), "local", **cosim)
    marker = tmp_path / "crashed"
    sim, logs = run(crashing(str(marker)), "ray",
                    units={"a": {"process": "ab"}, "b": {"process": "ab"}}, **cosim)
    assert marker.exists() and sim.stats["recoveries"] == 1
    for key in ref:
        np.testing.assert_array_equal(ref[key], logs[key], err_msg=key)


def test_units_sharing_a_process_must_share_a_placement(ray_session):
    from cosim import ModelError
    with pytest.raises(ModelError, match="share process 'ab' but ask for different placements"):
        run(three_units(), "ray", H=0.02, units={"a": {"process": "ab", "num_cpus": 1},
                                                 "b": {"process": "ab"}})


@pytest.mark.parametrize("options, says", [
    ({"resources": {"no_such_thing": 1}}, r"unit a cannot be placed: no node has "
                                          r"no_such_thing=1 \(the nodes offer: [\d.]+: CPU="),
    ({"num_cpus": 4096}, r"unit a cannot be placed: no node has CPU=4096"),
    ({"node": "f" * 56}, r"unit a cannot be placed: no alive node has id 'f+'"),
])
def test_a_placement_no_node_can_meet_fails_at_once_naming_it(ray_session, options, says):
    import time
    from cosim import ModelError
    start = time.monotonic()
    with pytest.raises(ModelError, match=says):
        run(three_units(), "ray", H=0.02, timeout=120.0, units={"a": options})
    assert time.monotonic() - start < 60          # not the 120 s placement timeout


def test_unit_gone_for_good_leaves_a_checkpoint_to_resume_from(ray_session, tmp_path):
    from cosim import TransportError
    cosim = dict(H=0.02, scheme="gauss-seidel", extrapolation=1, checkpoint_every=5)
    _, ref = run(three_units(), "local", **cosim)
    cp = tmp_path / "failed"
    with pytest.raises(TransportError, match="resume with") as exc:
        # The timeout also bounds placing the actors: generous, so a loaded machine places
        # them in time; the dead unit is noticed when it runs out (after the crash).
        run(crashing(str(tmp_path / "crashed")), "ray", max_restarts=0, timeout=15.0,
            checkpoint_path=str(cp), **cosim)
    assert exc.value.unit == "b"
    assert cp.with_suffix(".npz").exists()
    # Resume in process (the crash marker exists now, so the unit runs on).
    sim = CoSimulation(crashing(str(tmp_path / "crashed")), SimulationConfig(
        dt=0.002, t_end=1.0, cosim=CosimConfig(backend="local", **cosim)))
    sim.load_checkpoint(cp)
    assert 0.0 < sim.t < 1.0
    logs = sim.run()
    # Nothing lost: the failed run wrote its logs with its checkpoint, so the resumed run's
    # logs are the unfailed run's on every key, every sample from t0.
    assert set(ref) <= set(logs)                    # (plus the Crash block's own output)
    for key in ref:
        np.testing.assert_array_equal(ref[key], logs[key], err_msg=key)
        np.testing.assert_array_equal(ref.time_of(key), logs.time_of(key))


@pytest.mark.parametrize("curve", [True, False])
def test_the_ray_data_plane_refuses_outside_clients_unless_opted_out(ray_session, curve):
    import zmq
    from cosim.master import protocol as P
    from cluster.codec import decode_batch, encode_batch
    sim = CoSimulation(three_units(), SimulationConfig(dt=0.002, t_end=0.1, cosim=CosimConfig(
        H=0.02, backend="ray", curve=curve)))
    try:
        endpoint = sim.master.proxies["a"].where()["endpoint"]
        logs = sim.run()                               # the master itself gets through
        assert len(logs["a/x.out"]) == 51
        outsiders = {"plain": {}, "other keys": None}
        for who in outsiders:
            sock = zmq.Context.instance().socket(zmq.REQ)
            sock.setsockopt(zmq.LINGER, 0)
            sock.RCVTIMEO = 3000                       # an answer comes in ms when allowed
            if who == "other keys":
                # A CURVE client that even knows a server key (its own pair's): not the run's.
                pub, sec = zmq.curve_keypair()
                sock.curve_serverkey, sock.curve_publickey, sock.curve_secretkey = pub, pub, sec
            sock.connect(endpoint)
            sock.send_multipart([b"a", encode_batch([P.Heartbeat()])])
            try:
                outsiders[who] = decode_batch(sock.recv_multipart()[0])
            except zmq.Again:
                outsiders[who] = None
            finally:
                sock.close(linger=0)
        if curve:
            assert outsiders == {"plain": None, "other keys": None}
        else:
            assert [type(r) for r in outsiders["plain"]] == [P.Alive]
    finally:
        sim.close()
