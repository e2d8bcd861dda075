"""Benchmark: node loss -> the lost unit serving again on a surviving node, on a real
three-node Ray cluster on this machine (tests/cluster/raynodes.py), best of 5.

Two kinds of loss: the node's processes killed (SIGKILL: its raylet gone, as when a machine
dies or its network is cut; found by the heartbeat and the raylet check) and the node's
processes frozen (SIGSTOP: the kernel still accepts connections for the frozen raylet, so
cosim waits for :attr:`~cluster.ray_backend.Heartbeat.FROZEN` s before it counts the node
lost: a missed heartbeat on a node that answers is taken for a stall of a loaded machine).
The figure is the time from the loss to the log line of the
re-placed unit (the new actor started, reachable and connected; the restore from the last
checkpoint follows in milliseconds). For reference, Ray's own verdict on a lost node takes
its health checks (3 s x 5 by default), after which it would restart the actor.
Run: python -m pytest -m bench -s tests/benchmarks/test_bench_ray_node_loss.py
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time

import numpy as np
import pytest

from cosim import CoSimulation, CosimConfig, SimulationConfig
from tests.cluster.conftest import ray_nodes  # noqa: F401 - the three-node cluster fixture
from tests.cluster.scenarios import paced

pytestmark = [pytest.mark.bench, pytest.mark.cluster]

REPEAT = 5


class _Moved(logging.Handler):
    def __init__(self):
        super().__init__()
        self.at = None

    def emit(self, record):
        if "re-placed" in record.getMessage() and self.at is None:
            self.at = record.created


def lose_node(nodes, sig: int, ref) -> float:
    """Seconds from losing the node of unit a (``sig``) to a serving again elsewhere."""
    moved = _Moved()
    logging.getLogger("cosim.ray").addHandler(moved)
    on_head = {"resources": {"head": 1}}
    sim = CoSimulation(paced(0.1), SimulationConfig(dt=0.002, t_end=1.0, cosim=CosimConfig(
        H=0.02, scheme="jacobi", extrapolation=1, checkpoint_every=5, backend="ray",
        units={"a": {"resources": {"plant": 1}}, "b": on_head, "main": on_head})))
    try:
        lost = nodes.by_ip(sim.master.proxies["a"].location["ip"])
        out = {}
        runner = threading.Thread(target=lambda: out.update(logs=sim.run()))
        runner.start()
        time.sleep(1.5)                     # ~15 of 50 macro steps (0.1 s each) done
        at = time.time()
        nodes.kill(lost, sig)
        runner.join(120)
        if sig != signal.SIGKILL:
            nodes.kill(lost, signal.SIGKILL)
    finally:
        sim.close()
        logging.getLogger("cosim.ray").removeHandler(moved)
    for key in ref:
        np.testing.assert_array_equal(ref[key], out["logs"][key], err_msg=key)
    nodes.revive(lost)
    return moved.at - at


def test_node_loss_to_a_serving_again(ray_nodes):  # noqa: F811 - the fixture
    ref = CoSimulation(paced(0.0), SimulationConfig(dt=0.002, t_end=1.0, cosim=CosimConfig(
        H=0.02, scheme="jacobi", extrapolation=1, checkpoint_every=5))).run()
    figures = {"killed (SIGKILL)": [], "frozen (SIGSTOP)": []}
    for i in range(REPEAT):                 # interleaved
        figures["killed (SIGKILL)"].append(lose_node(ray_nodes, signal.SIGKILL, ref))
        if i < 2:                           # waits out FROZEN: twice is enough
            figures["frozen (SIGSTOP)"].append(lose_node(ray_nodes, signal.SIGSTOP, ref))
    print(f"\nload: {os.getloadavg()[0]:.2f} (1 min average)")
    for kind, seconds in figures.items():
        print(f"node {kind}: unit a serving again after best {min(seconds):.2f} s, median "
              f"{sorted(seconds)[len(seconds) // 2]:.2f} s "
              f"({', '.join(f'{s:.2f}' for s in seconds)}); bit-identical")
