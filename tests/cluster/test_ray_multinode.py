"""A real three-node Ray cluster on this machine (``ray start`` processes, each node its own
loopback address, resources and working directory): placement, files that exist only on the
driver, unschedulable work, addresses, versions and node loss."""

from __future__ import annotations

import numpy as np
import pytest

from cosim import CoSimulation, CosimConfig, SimulationConfig

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
