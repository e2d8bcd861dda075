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


@pytest.mark.parametrize("backend", ["local", "ray", "zmq"])
def test_every_backend_logs_the_monolithic_keys_and_a_selection(ray_session, references, backend):
    """A full log has every key of the monolithic run, unit ports only another unit receives
    (``a.y``) included; a selection is what each unit logs, wherever it runs (a served unit
    takes its own selection from the unit file, not its server's)."""
    from cosim import Simulator
    mono = Simulator(three_units(), SimulationConfig(dt=0.002, t_end=0.5)).run()
    ref = references["gauss-seidel"]
    assert sorted(ref) == sorted(mono)
    log = ("a/x.out", "a.y", "e.out", "b/x.out")
    sim = CoSimulation(three_units(), SimulationConfig(dt=0.002, t_end=0.5, log=log, cosim=CosimConfig(
        backend=backend, H=0.02, scheme="gauss-seidel", extrapolation=1)))
    try:
        logs = sim.run()
    finally:
        sim.close()
    assert sorted(logs) == sorted(log)
    for key in log:
        np.testing.assert_array_equal(ref[key], logs[key], err_msg=key)
        np.testing.assert_array_equal(ref.time_of(key), logs.time_of(key))
