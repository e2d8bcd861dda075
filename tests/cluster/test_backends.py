"""One scenario on every backend: in process, Ray actors, ZeroMQ servers — bit for bit."""

import numpy as np
import pytest

from cosim import CoSimulation, CosimConfig, SimulationConfig

from tests.cluster.scenarios import algebraic, three_units

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def references():
    out = {}
    for name, scenario, cosim in SCENARIOS:
        out[name] = CoSimulation(scenario(), SimulationConfig(
            dt=0.002, t_end=0.5, cosim=CosimConfig(**cosim))).run()
    return out


SCENARIOS = [
    ("jacobi-extrapolated", three_units, dict(H=0.02, scheme="jacobi", extrapolation=2)),
    ("gauss-seidel", three_units, dict(H=0.02, scheme="gauss-seidel", extrapolation=1)),
    ("iterated-coupling", algebraic, dict(H=0.05, tolerance=1e-12)),
]


@pytest.mark.parametrize("backend", ["local", "ray", "zmq"])
@pytest.mark.parametrize("name, scenario, cosim", SCENARIOS, ids=[s[0] for s in SCENARIOS])
def test_every_backend_gives_the_same_numbers(ray_session, references, backend, name, scenario,
                                              cosim):
    sim = CoSimulation(scenario(), SimulationConfig(dt=0.002, t_end=0.5, cosim=CosimConfig(
        backend=backend, **cosim)))
    try:
        logs = sim.run()
    finally:
        sim.close()
    ref = references[name]
    assert sorted(ref) == sorted(logs)
    for key in ref:
        np.testing.assert_array_equal(ref[key], logs[key], err_msg=key)
        np.testing.assert_array_equal(ref.time_of(key), logs.time_of(key))
