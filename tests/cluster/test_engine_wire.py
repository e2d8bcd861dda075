"""The macro-step engine over the wire: rounds through the connections' lanes (zmq server
processes, Ray actors' data planes) give bit for bit the in-process protocol path, for the
shapes users build (feedthrough refreshed with the step, Gauss–Seidel chains, iterated
couplings rolled back on the units' side, extrapolation, adaptive steps)."""

import pytest

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
    ("relog", dict(scheme="gauss-seidel")),
    ("driven", dict(scheme="jacobi", extrapolation=2)),
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
