"""Saturation, DeadZone, Lookup1D, Switch, RateLimiter and Relay against numpy or a plain
loop, and bad parameters."""

from __future__ import annotations

import numpy as np
import pytest

from blocks import DeadZone, Lookup1D, RateLimiter, Relay, Saturation, Switch
from cosim import ModelError

from tests.blocks.support import assert_same_bits, output

rng = np.random.default_rng(3)
U = rng.uniform(-3.0, 3.0, size=40)


@pytest.mark.parametrize("lower, upper", [(-1.0, 1.0), (-0.5, 2.0), (None, 0.3),
                                          (0.2, None), (None, None), (1.0, 1.0)])
def test_saturation_is_clip(lower, upper):
    out = output(Saturation("s", lower, upper), {"in": U})[:, 0]
    np.testing.assert_array_equal(out, np.clip(U, lower, upper))


def test_saturation_with_per_element_limits():
    u = rng.uniform(-3.0, 3.0, size=(10, 2))
    out = output(Saturation("s", [-1.0, 0.0], [1.0, 2.0]), {"in": u})
    np.testing.assert_array_equal(out, np.clip(u, [-1.0, 0.0], [1.0, 2.0]))


def test_saturation_passes_nan():
    out = output(Saturation("s", -1.0, 1.0), {"in": [np.nan, 2.0]})[:, 0]
    assert np.isnan(out[0]) and out[1] == 1.0


@pytest.mark.parametrize("start, end", [(-0.5, 0.5), (-1.0, 0.2), (0.0, 0.0)])
def test_dead_zone(start, end):
    out = output(DeadZone("d", start, end), {"in": np.append(U, [start, end])})[:, 0]
    u = np.append(U, [start, end])
    expected = np.where(u < start, u - start, np.where(u > end, u - end, 0.0))
    np.testing.assert_array_equal(out, expected)


BP = np.array([-2.0, -0.5, 0.0, 1.0, 2.5])
TB = np.array([1.0, -1.0, 0.5, 0.5, 3.0])
PROBES = np.concatenate([U, BP, [-5.0, 7.0]])


def test_lookup_clip_is_numpy_interp():
    out = output(Lookup1D("l", BP, TB), {"in": PROBES})[:, 0]
    np.testing.assert_array_equal(out, np.interp(PROBES, BP, TB))


def test_lookup_linear_extends_the_end_segments():
    out = output(Lookup1D("l", BP, TB, "linear"), {"in": PROBES})[:, 0]
    lo = TB[0] + (PROBES - BP[0]) * (TB[1] - TB[0]) / (BP[1] - BP[0])
    hi = TB[-1] + (PROBES - BP[-1]) * (TB[-1] - TB[-2]) / (BP[-1] - BP[-2])
    expected = np.where(PROBES < BP[0], lo, np.where(PROBES > BP[-1], hi,
                                                     np.interp(PROBES, BP, TB)))
    np.testing.assert_allclose(out, expected, rtol=1e-14, atol=1e-14)


def test_lookup_keeps_the_input_shape():
    u = rng.uniform(-3.0, 3.0, size=(6, 2, 3))
    out = output(Lookup1D("l", BP, TB), {"in": u})
    np.testing.assert_array_equal(out, np.interp(u, BP, TB))


SPECIAL = np.array([-0.0, 0.0, np.nan, np.inf, -np.inf, -1.0, 1.0, -0.5, 0.5, 0.7, -2.0, 2.5,
                    1e-300, -1e300, *U[:8]])


@pytest.mark.parametrize("make", [
    lambda: Saturation("b", -0.5, 0.7), lambda: Saturation("b", 0.0, None),
    lambda: Saturation("b", None, -0.0), lambda: DeadZone("b", -0.5, 0.5),
    lambda: DeadZone("b", 0.0, 0.0), lambda: Lookup1D("b", [-1.0, 0.0, 0.5, 1.0],
                                                      [2.0, -0.0, 0.0, -1.0]),
    lambda: Lookup1D("b", [-1.0, 0.0, 0.5, 1.0], [2.0, -0.0, 0.0, -1.0], "linear"),
])
def test_scalar_and_vector_signals_give_the_same_bits(make):
    """A (1,) signal is computed in Python floats, a larger one with numpy: same values."""
    scalar = output(make(), {"in": SPECIAL})[:, 0]
    vector = output(make(), {"in": SPECIAL[None, :]})[0]
    assert_same_bits(scalar, vector)


def build(cls, **kw):
    """A factory of ``cls(**kw)``, so the construction happens inside the test."""
    return lambda: cls(**kw)


@pytest.mark.parametrize("make, param", [
    (build(Saturation, name="n", lower=1.0, upper=-1.0), "lower/upper"),
    (build(Saturation, name="n", lower="low"), "lower"),
    (build(Saturation, name="n", upper=np.inf), "upper"),
    (build(Saturation, name="n", lower=[0.0, 0.0], upper=[1.0, 1.0, 1.0]), "lower/upper"),
    (build(DeadZone, name="n", start=1.0, end=0.0), "start/end"),
    (build(DeadZone, name="n", start=None), "start"),
    (build(Lookup1D, name="n", breakpoints=[0.0, 0.0, 1.0], table=[1, 2, 3]), "breakpoints"),
    (build(Lookup1D, name="n", breakpoints=[0.0], table=[1]), "breakpoints"),
    (build(Lookup1D, name="n", breakpoints=[0.0, 1.0], table=[1, 2, 3]), "table"),
    (build(Lookup1D, name="n", breakpoints=[0.0, 1.0], table=[1, np.nan]), "table"),
    (build(Lookup1D, name="n", breakpoints=[0.0, 1.0], table=[1, 2], extrapolation="hold"),
     "extrapolation"),
])
def test_bad_parameters_name_the_block_and_parameter(make, param):
    with pytest.raises(ModelError) as err:
        make()
    msg = str(err.value)
    assert "'n'" in msg and f": {param} " in msg, msg


@pytest.mark.parametrize("criterion, test", [(">=", lambda c: c >= 0.5), (">", lambda c: c > 0.5),
                                             ("!=", lambda c: c != 0.0)])
def test_switch_selects_in1_where_the_control_passes(criterion, test):
    a, b = rng.uniform(-1, 1, 40), rng.uniform(-1, 1, 40)
    c = np.concatenate([rng.uniform(-1, 1, 36), [0.5, 0.0, np.nan, 0.5]])
    out = output(Switch("s", criterion, 0.5), {"in1": a, "in2": c, "in3": b})[:, 0]
    np.testing.assert_array_equal(out, np.where(test(c), a, b))


def test_switch_on_vectors_and_bad_criterion():
    a, b = rng.uniform(-1, 1, (10, 3)), rng.uniform(-1, 1, (10, 3))
    c = rng.uniform(-1, 1, (10, 3))
    out = output(Switch("s"), {"in1": a, "in2": c, "in3": b})
    np.testing.assert_array_equal(out, np.where(c >= 0.0, a, b))
    with pytest.raises(ModelError, match="criterion"):
        Switch("s", "<")


def test_rate_limiter_follows_a_slewing_loop():
    u = np.concatenate([np.zeros(3), np.ones(10), -np.ones(10), rng.uniform(-1, 1, 20)])
    out = output(RateLimiter("r", rising=2.0, falling=5.0), {"in": u}, dt=0.1)[:, 0]
    y = [u[0]]
    for v in u[1:]:
        y.append(y[-1] + min(max(v - y[-1], -5.0 * 0.1), 2.0 * 0.1))
    np.testing.assert_array_equal(out, y)
    assert np.max(np.diff(out)) <= 0.2 + 1e-15 and np.min(np.diff(out)) >= -0.5 - 1e-15


def test_relay_has_hysteresis():
    u = np.array([0.0, 0.6, 0.2, -0.2, -0.6, -0.1, 0.3, 0.5, 0.1])
    out = output(Relay("r", 0.5, -0.5, 1.0, -1.0), {"in": u})[:, 0]
    np.testing.assert_array_equal(out, [-1, 1, 1, 1, -1, -1, -1, 1, 1])
    with pytest.raises(ModelError, match="off_point"):
        Relay("r", on_point=0.0, off_point=0.5)
    with pytest.raises(ModelError, match="rising"):
        RateLimiter("r", rising=0.0)
