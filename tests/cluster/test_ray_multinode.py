"""A real three-node Ray cluster on this machine (``ray start`` processes, each node its own
loopback address, resources and working directory): placement, files that exist only on the
driver, unschedulable work, addresses, versions and node loss."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import numpy as np
import pytest

from cluster.sweep import main as sweep_main
from cosim import CoSimulation, CosimConfig, Logs, SimulationConfig

from tests.cluster.scenarios import three_units

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
