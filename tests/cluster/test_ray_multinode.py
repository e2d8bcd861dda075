"""A real three-node Ray cluster on this machine (``ray start`` processes, each node its own
loopback address, resources and working directory): placement, files that exist only on the
driver, unschedulable work, addresses, versions and node loss."""

from __future__ import annotations

import contextlib
import csv
import io
import logging
import re
import shutil
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from cluster.sweep import main as sweep_main
from cluster.sweep import final, sweep
from cosim import CoSimulation, CosimConfig, Logs, ModelError, SimulationConfig
from tests.cluster import sweep_models as sm

from tests.cluster.scenarios import paced, three_units

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def cosim_run(model, **cosim):
    sim = CoSimulation(model, SimulationConfig(dt=0.002, t_end=0.4, cosim=CosimConfig(
        H=0.02, **cosim)))
    try:
        return sim, sim.run()
    finally:
        sim.close()


def assert_same(a, b):
    assert sorted(a) == sorted(b)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def test_units_land_on_the_nodes_asked_and_match_the_in_process_run(ray_nodes):
    head, n2, n3 = ray_nodes.nodes
    _, ref = cosim_run(three_units())
    sim = CoSimulation(three_units(), SimulationConfig(dt=0.002, t_end=0.4, cosim=CosimConfig(
        H=0.02, backend="ray", units={"a": {"resources": {"n2": 1}},
                                      "b": {"node": n3.node_id},
                                      "main": {"resources": {"head": 1}}})))
    try:
        where = {u: p.where() for u, p in sim.master.proxies.items()}
        logs = sim.run()
    finally:
        sim.close()
    assert {u: w["node"] for u, w in where.items()} == {
        "a": n2.node_id, "b": n3.node_id, "main": head.node_id}
    assert_same(ref, logs)
    # The run's record says where each unit ran: node, address, process.
    ran = {u: d["where"] for u, d in sim.placement()["units"].items()}
    assert {u: (w["node"], w["ip"], w["pid"]) for u, w in ran.items()} == {
        u: (w["node"], w["ip"], w["pid"]) for u, w in where.items()}
    assert {u: w["ip"] for u, w in ran.items()} == {"a": n2.ip, "b": n3.ip, "main": head.ip}


# -- files that exist only on the driver ---------------------------------------------------

EXAMPLES = Path(__file__).parents[2] / "examples"


def node_files(ray_nodes) -> dict:
    """Every file in the nodes' working directories (where their workers run)."""
    return {n.ip: sorted(str(p.relative_to(n.cwd)) for p in n.cwd.rglob("*"))
            for n in ray_nodes.nodes}


def test_a_sweep_of_a_model_file_only_the_driver_has_ships_it_and_its_references(
        ray_nodes, tmp_path, monkeypatch):
    # The model and the library file it references exist only in the driver's directory,
    # named relatively (as `cosim sweep servo.yaml` is typed); the logs come back to it.
    for name in ("servo.yaml", "plant_lib.yaml"):
        shutil.copy(EXAMPLES / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    before = node_files(ray_nodes)
    args = ["servo.yaml", "--grid", "kp=0.5,0.8,1.2,1.6,2.0,2.5", "--metric",
            "y=final:plant/lag.out", "--save-logs"]
    assert sweep_main([*args, "--out", "ray", "--backend", "ray",
                       "--ray-address", ray_nodes.address]) == 0
    assert sweep_main([*args, "--out", "serial", "--backend", "serial"]) == 0
    on_ray, serial = (read_rows(tmp_path / d / "results.csv") for d in ("ray", "serial"))
    assert [r["status"] for r in on_ray] == ["ok"] * 6
    assert [(r["kp"], r["y"]) for r in on_ray] == [(r["kp"], r["y"]) for r in serial]
    for r in serial:
        ours = Logs.load(tmp_path / "ray" / "logs" / f"{r['run_id']}.npz")
        theirs = Logs.load(tmp_path / "serial" / "logs" / f"{r['run_id']}.npz")
        assert_same(theirs, ours)
    assert node_files(ray_nodes) == before         # no worker wrote in its directory


def read_rows(path) -> list[dict]:
    with open(path, newline="") as fh:
        return sorted(csv.DictReader(fh), key=lambda r: int(r["index"]))


# -- addresses, versions, code ---------------------------------------------------------------

def test_an_address_other_than_the_connected_cluster_is_refused_naming_both(ray_nodes):
    with pytest.raises(ModelError, match=rf"connected to {ray_nodes.address}, but address "
                                         r"'127.0.0.9:6379' was asked"):
        cosim_run(three_units(), backend="ray", address="127.0.0.9:6379")
    with pytest.raises(ModelError, match=r"Ray Client \(ray://\) is not supported"):
        cosim_run(three_units(), backend="ray", address="ray://127.0.0.1:10001")
    _, ref = cosim_run(three_units())
    _, logs = cosim_run(three_units(), backend="ray", address=ray_nodes.address)
    assert_same(ref, logs)


def test_a_node_with_another_cosim_version_refuses_units_and_pullers(ray_nodes, tmp_path,
                                                                     monkeypatch):
    import cluster.ray_backend
    import cluster.versions
    other = {"cosim": "0.0.1-other", "protocol": 5}
    n2 = ray_nodes.nodes[1]
    # The driver claims another version; the nodes check theirs against it.
    monkeypatch.setattr(cluster.ray_backend, "versions", lambda: other)
    with pytest.raises(ModelError, match=rf"unit actor of a refused to start: cosim "
                                         rf"'0.0.1-other' on the driver, '[^']+' on node "
                                         rf"{re.escape(n2.ip)}"):
        cosim_run(three_units(), backend="ray", units={"a": {"resources": {"n2": 1}}})
    monkeypatch.setattr(cluster.versions, "versions", lambda: other)
    with pytest.raises(ModelError, match=r"a sweep puller refused to start: cosim "
                                         r"'0.0.1-other' on the driver, '[^']+' on node "
                                         r"127\.0\.0\.[23]"):
        sweep(sm.lag, sm.CONFIG, [{"gain": 1.0, "tau": 0.1}], {}, backend="ray",
              out_dir=tmp_path, progress=False)


USER_BLOCKS = '''
from blocks import Gain, Sine
from cosim import Inport, Model, Outport, Subsystem


class Doubler(Gain):
    """A block type of the user's own package, absent from the nodes."""

    def __init__(self, name):
        super().__init__(name, 2.0)


def model():
    m = Model("user")
    s = Subsystem("a", atomic=True, dt=0.01)
    s.add(Inport("u"), Doubler("d"), Outport("y"))
    s.connect("u.out", "d.in")
    s.connect("d.out", "y.in")
    m.add(Sine("src", frequency=1.0), s)
    m.connect("src.out", "a.u")
    return m
'''


def test_a_user_package_only_the_driver_has_is_shipped_with_runtime_env(ray_nodes, tmp_path,
                                                                        monkeypatch):
    pkg = tmp_path / "userpkg_i32"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(USER_BLOCKS)
    monkeypatch.syspath_prepend(str(tmp_path))
    import userpkg_i32
    cfg = dict(dt=0.01, t_end=0.5)
    ref = CoSimulation(userpkg_i32.model(), SimulationConfig(**cfg, cosim=CosimConfig(
        H=0.05))).run()
    placed = {"a": {"resources": {"n3": 1}}}
    with pytest.raises(ModelError, match=r"unit a could not start: .*userpkg_i32.*ship it "
                                         r"with the run: CosimConfig\(runtime_env="):
        CoSimulation(userpkg_i32.model(), SimulationConfig(**cfg, cosim=CosimConfig(
            H=0.05, backend="ray", units=placed))).run()
    sim = CoSimulation(userpkg_i32.model(), SimulationConfig(**cfg, cosim=CosimConfig(
        H=0.05, backend="ray", units=placed, runtime_env={"py_modules": [str(pkg)]})))
    try:
        logs = sim.run()
    finally:
        sim.close()
    assert_same(ref, logs)


def test_data_plane_ports_stay_in_the_range_given(ray_nodes):
    lo = 52100
    _, ref = cosim_run(three_units())
    sim = CoSimulation(three_units(), SimulationConfig(dt=0.002, t_end=0.4, cosim=CosimConfig(
        H=0.02, backend="ray", ports=(lo, lo + 40), units={"a": {"resources": {"n2": 1}},
                                                            "b": {"resources": {"n3": 1}}})))
    try:
        ports = {u: int(p.where()["endpoint"].rpartition(":")[2])
                 for u, p in sim.master.proxies.items() if u != "main"}   # (beside the master)
        logs = sim.run()
    finally:
        sim.close()
    assert all(lo <= p <= lo + 40 for p in ports.values()), ports
    assert_same(ref, logs)
    # The sweep driver's socket, which the pullers connect to.
    from cluster.sweep_design import runs_of
    from cluster.sweep_ray import Pullers
    pullers = Pullers(sm.lag, sm.CONFIG, {}, None, True, 1, 0, None,
                      runs_of([{"gain": 1.0, "tau": 0.1}]), ports=(lo + 50, lo + 60))
    try:
        pullers.start()
        assert lo + 50 <= int(pullers.endpoint.rpartition(":")[2]) <= lo + 60
    finally:
        pullers.close()


# -- no silent waits ----------------------------------------------------------------------------

def _taking(n: int):
    """``n`` actors holding a CPU each (other work on the cluster), placed."""
    import ray

    @ray.remote(num_cpus=1)
    class Holder:
        def ready(self):
            return True

    holders = [Holder.remote() for _ in range(n)]
    ray.get([h.ready.remote() for h in holders], timeout=120)
    return holders


def _first(caplog, text: str, timeout: float):
    """The first log record containing ``text``, waited for up to ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [r for r in caplog.records if text in r.getMessage()]
        if found:
            return found[0]
        time.sleep(0.05)
    raise AssertionError(f"no log record with {text!r} within {timeout} s")


def test_work_waiting_for_cpus_all_taken_is_reported_within_seconds(ray_nodes, tmp_path,
                                                                     caplog):
    import ray
    caplog.set_level(logging.WARNING)
    holders = _taking(2)                    # both worker nodes' CPUs (the head has none)
    try:
        # A co-simulation unit that asks for a CPU: said within seconds, then refused at its
        # timeout with the same reason (not blamed on its options).
        start = time.time()
        with pytest.raises(ModelError, match=r"unit a could not be placed within 8 s: it "
                                             r"needs CPU=1 but all of the cluster's 2 are "
                                             r"taken \(free: 0\)"):
            cosim_run(three_units(), backend="ray", timeout=8.0, units={"a": {"num_cpus": 1}})
        said = _first(caplog, "unit a waits to be placed", 1)
        assert "CPU=1 but all of the cluster's 2 are taken (free: 0)" in said.getMessage()
        print(f"co-simulation: the wait reported after {said.created - start:.2f} s")
        # A sweep: its runs wait (reported) until the CPUs are free, then run.
        done = {}
        start = time.time()
        bar = io.StringIO()                 # the progress bar shows the wait too
        with contextlib.redirect_stderr(bar):
            worker = threading.Thread(target=lambda: done.update(rows=sweep(
                sm.lag, sm.CONFIG, [{"gain": g, "tau": 0.1} for g in (1.0, 2.0, 3.0)],
                {"y": final("plant.out")}, backend="ray", out_dir=tmp_path, progress=True)))
            worker.start()
            said = _first(caplog, "runs wait for a puller to start", 60)
            assert "3 runs wait for a puller to start: it needs CPU=1 but all of the " \
                   "cluster's 2 are taken (free: 0)" in said.getMessage()
            for h in holders:
                ray.kill(h)
            holders = []
            worker.join(180)
        assert [r["status"] for r in done["rows"]] == ["ok"] * 3
        assert "3 runs wait for a free CPU" in bar.getvalue()
        print(f"sweep: the wait reported after {said.created - start:.2f} s")
    finally:
        for h in holders:
            ray.kill(h)


# -- node loss (these tests end nodes: they come last) ---------------------------------------

def test_a_lost_node_s_unit_is_re_placed_within_seconds_bit_identically(ray_nodes, caplog):
    caplog.set_level(logging.WARNING)
    cosim = dict(H=0.02, scheme="jacobi", extrapolation=1, checkpoint_every=5)
    cfg = dict(dt=0.002, t_end=1.0)
    ref = CoSimulation(paced(0.0), SimulationConfig(**cfg, cosim=CosimConfig(**cosim))).run()
    on_head = {"resources": {"head": 1}}
    sim = CoSimulation(paced(0.1), SimulationConfig(**cfg, cosim=CosimConfig(
        backend="ray", units={"a": {"resources": {"plant": 1}}, "b": on_head,
                              "main": on_head}, **cosim)))
    try:
        before = sim.master.proxies["a"].location
        lost = ray_nodes.by_ip(before["ip"])
        out = {}
        runner = threading.Thread(target=lambda: out.update(logs=sim.run()))
        runner.start()
        time.sleep(2.0)                     # ~20 of 50 macro steps (0.1 s each) done
        killed = time.time()
        assert ray_nodes.kill(lost) > 0
        runner.join(120)
        after = sim.master.proxies["a"].location
        moved = _first(caplog, "re-placed", 1)
    finally:
        sim.close()
    print(f"node {lost.ip} lost -> unit a re-placed on {after['ip']} after "
          f"{moved.created - killed:.2f} s")
    assert sim.stats["recoveries"] == 1
    assert after["ip"] != lost.ip and after["generation"] == 1
    assert sim.placement()["units"]["a"]["where"]["ip"] == after["ip"]
    assert_same(ref, out["logs"])
    ray_nodes.revive(lost)


def test_a_sweep_survives_a_lost_node_and_says_when_no_node_can_run_its_runs(ray_nodes,
                                                                            tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    points = [{"gain": 1.0 + i / 10, "tau": 0.1} for i in range(60)]
    reducers = {"y": final("plant.out")}
    serial = sweep(sm.lag, sm.CONFIG, points, reducers, backend="serial", progress=False)
    done = {}
    start = time.monotonic()
    worker = threading.Thread(target=lambda: done.update(rows=sweep(
        sm.paced_lag, sm.CONFIG, points, reducers, backend="ray", out_dir=tmp_path / "a",
        progress=False)))
    worker.start()
    time.sleep(3.0)
    n3 = ray_nodes.nodes[2]
    assert ray_nodes.kill(n3) > 0
    worker.join(300)
    print(f"sweep of {len(points)} runs with node {n3.ip} lost: "
          f"{time.monotonic() - start:.1f} s")
    assert [(r["status"], r["y"]) for r in done["rows"]] == \
        [("ok", r["y"]) for r in serial]
    found = [r.getMessage() for r in caplog.records if "of puller" in r.getMessage()]
    print("found by cosim's check of the node:" if found else
          "found by Ray (the puller's task failed, or no chunk was held):", *found)
    # Every node with a CPU lost: said within seconds, not a silent wait.
    ray_nodes.kill(ray_nodes.nodes[1])
    start = time.monotonic()
    with pytest.raises(ModelError, match=r"sweep on Ray: .*no node (can run a puller|has "
                                         r"CPU=1)"):
        sweep(sm.lag, sm.CONFIG, points[:4], reducers, backend="ray",
              out_dir=tmp_path / "b", progress=False)
    print(f"no CPU left: refused after {time.monotonic() - start:.2f} s")
