"""The macro-step engine over the wire: rounds through the connections' lanes (zmq server
processes, Ray actors' data planes) give bit for bit the in-process protocol path, for the
shapes users build (feedthrough refreshed with the step, Gauss–Seidel chains, iterated
couplings rolled back on the units' side, couplings fed from outside solved again at the
macro point, extrapolation, adaptive steps)."""

import numpy as np
import pytest

from cosim import CoSimulation, CosimConfig, SimulationConfig
from tests.cluster.scenarios import algebraic, crashing_algebraic
from tests.cosim.test_engine import MODELS, assert_identical, run

pytestmark = pytest.mark.cluster

CASES = [
    ("fan", dict(scheme="jacobi")),
    ("fan", dict(scheme="gauss-seidel", extrapolation=2)),
    ("servo", dict(scheme="jacobi", extrapolation=1)),
    ("servo", dict(scheme="gauss-seidel")),
    ("servo", dict(feedthrough="delay", extrapolation=1)),
    ("coupled", dict(scheme="jacobi", extrapolation=1)),
    ("coupled", dict(scheme="gauss-seidel", acceleration="newton", tolerance=1e-9)),
    ("coupled", dict(scheme="gauss-seidel", extrapolation=1, adaptive=True, rtol=1e-9,
                     atol=1e-12, H_min=0.00125, H_max=0.01)),
    ("held", dict(scheme="jacobi", extrapolation=2)),
    ("held", dict(scheme="gauss-seidel", extrapolation=1, feedthrough="delay")),
    ("held", dict(scheme="jacobi", acceleration="newton", tolerance=1e-10)),
    ("held", dict(scheme="gauss-seidel", adaptive=True, rtol=1e-9, atol=1e-12,
                  H_min=0.0025, H_max=0.01)),
    ("discrete-loop", dict(scheme="gauss-seidel", extrapolation=2, tolerance=1e-10)),
    ("pairs", dict(scheme="jacobi", extrapolation=1)),
    ("pairs", dict(scheme="gauss-seidel", acceleration="newton", tolerance=1e-10)),
    ("relog", dict(scheme="gauss-seidel")),
    ("driven", dict(scheme="jacobi", extrapolation=2)),
    ("fed", dict(scheme="jacobi", extrapolation=1)),
    ("fed", dict(scheme="gauss-seidel", extrapolation=2, acceleration="anderson",
                 tolerance=1e-11)),
    ("fed", dict(scheme="jacobi", adaptive=True, rtol=1e-9, atol=1e-12, H_min=0.0025,
                 H_max=0.01)),
]


@pytest.mark.parametrize("model,options", CASES, ids=[f"{m}-{i}" for i, (m, _) in
                                                     enumerate(CASES)])
def test_engine_on_zmq_is_the_protocol_path(model, options):
    make, H = MODELS[model]
    ref = run(make(), H, False, **options)
    assert_identical(run(make(), H, True, backend="zmq", **options), ref)


@pytest.mark.parametrize("model,options", CASES[::3], ids=[f"{m}-{i}" for i, (m, _) in
                                                          enumerate(CASES[::3])])
def test_engine_on_ray_is_the_protocol_path(ray_session, model, options):
    make, H = MODELS[model]
    ref = run(make(), H, False, **options)
    assert_identical(run(make(), H, True, backend="ray", **options), ref)


@pytest.mark.parametrize("backend", ["zmq", "ray"])
def test_a_unit_killed_while_its_coupling_iterates_recovers_bit_identically(
        request, tmp_path, backend):
    """The coupled units keep and roll back their state on their servers' fast lanes; one
    dies in the middle of the iterations (its partner holds a kept state), is recreated
    from the last checkpoint and the run replays to the same numbers as in process."""
    if backend == "ray":
        request.getfixturevalue("ray_session")
    cosim = dict(H=0.01, checkpoint_every=4, tolerance=1e-12)

    def go(model, backend):
        sim = CoSimulation(model, SimulationConfig(dt=0.01, t_end=1.0, cosim=CosimConfig(
            backend=backend, **cosim)))
        try:
            return sim, sim.run()
        finally:
            sim.close()

    _, ref = go(algebraic(), "local")
    marker = tmp_path / "crashed"
    sim, logs = go(crashing_algebraic(str(marker), 0.503), backend)
    assert marker.exists(), "the unit never crashed"
    assert sim.stats["recoveries"] == 1 and sim.stats["iterations"] > sim.stats["macro_steps"]
    for key in ref:
        np.testing.assert_array_equal(ref[key], logs[key], err_msg=key)
        np.testing.assert_array_equal(ref.time_of(key), logs.time_of(key), err_msg=key)
