"""Two-node Ray cluster on this machine: units placed by custom resource and by node id."""

import os
import sys

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
sys.path.insert(0, os.getcwd())

import numpy as np  # noqa: E402
import ray  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

from cosim import CoSimulation, CosimConfig, SimulationConfig, simulation  # noqa: E402
from tests.cluster.scenarios import three_units  # noqa: E402


def main():
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1,
                                                            "resources": {"head": 1}})
    worker = cluster.add_node(num_cpus=1, resources={"plant_node": 2})
    ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
    cluster.wait_for_nodes()
    head_id = ray.get_runtime_context().get_node_id()
    cfg = SimulationConfig(dt=0.002, t_end=0.2, cosim=CosimConfig(
        H=0.02, backend="ray", units={"a": {"resources": {"plant_node": 1}},
                                      "b": {"resources": {"plant_node": 1}},
                                      "main": {"node": head_id}}))
    sim = simulation(three_units(), cfg)
    logs = sim.run()
    where = {u: p.where()["node"] for u, p in sim.master.proxies.items()}
    ref = CoSimulation(three_units(), SimulationConfig(
        dt=0.002, t_end=0.2, cosim=CosimConfig(H=0.02))).run()
    sim.close()
    assert where["a"] == worker.node_id and where["b"] == worker.node_id, where
    assert where["main"] == head_id, where
    for key in ref:
        np.testing.assert_array_equal(ref[key], logs[key])
    print("placement ok", where)
    ray.shutdown()
    cluster.shutdown()


if __name__ == "__main__":
    main()
