"""Discrete blocks against independent oracles: closed-form sums (integrator), scipy.signal
dlsim / lfilter (state space, transfer function), a hand-written loop (PID); plus bad
parameters."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import signal

from blocks import (DiscreteIntegrator, DiscretePID, DiscreteStateSpace,
                    DiscreteTransferFunction, RateTransition, UnitDelay, ZeroOrderHold)
from cosim import ModelError

from tests.blocks.support import assert_same_bits, output

rng = np.random.default_rng(11)
N = 40
U = rng.normal(size=N)


def test_unit_delay_shifts_by_one_sample():
    out = output(UnitDelay("d", 0.7), {"in": U})[:, 0]
    np.testing.assert_array_equal(out, np.concatenate([[0.7], U[:-1]]))


def test_unit_delay_of_a_vector():
    u = rng.normal(size=(5, 3))
    out = output(UnitDelay("d", [1.0, 2.0, 3.0]), {"in": u})
    np.testing.assert_array_equal(out, np.vstack([[1.0, 2.0, 3.0], u[:-1]]))


def test_zero_order_hold_at_the_base_rate_is_an_identity():
    np.testing.assert_array_equal(output(ZeroOrderHold("z"), {"in": U})[:, 0], U)


# -- DiscreteIntegrator: y[k] = x0 + K*T*sum(u[:k]) + c*K*T*u[k], c = 0, 1, 1/2 ------------

@pytest.mark.parametrize("method, c", [("forward", 0.0), ("backward", 1.0),
                                       ("trapezoidal", 0.5)])
@pytest.mark.parametrize("K, T, x0", [(1.0, 0.1, 0.0), (-2.5, 0.02, 1.5)])
def test_integrator_matches_its_closed_form_sum(method, c, K, T, x0):
    out = output(DiscreteIntegrator("i", K, x0, method), {"in": U}, dt=T)[:, 0]
    before = np.concatenate([[0.0], np.cumsum(U)[:-1]])      # sum(u[:k])
    np.testing.assert_allclose(out, x0 + K * T * (before + c * U), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("method", ["forward", "backward", "trapezoidal"])
def test_integrator_stops_at_its_limits_and_leaves_them_when_the_input_reverses(method):
    u = np.concatenate([np.ones(20), -np.ones(20)])
    out = output(DiscreteIntegrator("i", 1.0, 0.0, method, lower=-0.5, upper=0.8),
                 {"in": u}, dt=0.1)[:, 0]
    # Reference: the same recursion with clipping after each update, written out.
    x, expected = 0.0, []
    c = {"forward": 0.0, "backward": 1.0, "trapezoidal": 0.5}[method]
    for uk in u:
        y = min(max(x + c * 0.1 * uk, -0.5), 0.8)
        expected.append(y)
        x = min(max(y + (1.0 - c) * 0.1 * uk, -0.5), 0.8)
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-12)
    assert out.max() == 0.8 and out.min() >= -0.5
    assert out[21] < 0.8                     # leaves the limit as soon as the input reverses


@pytest.mark.parametrize("method, feedthrough", [("forward", False), ("backward", True),
                                                 ("trapezoidal", True)])
def test_integrator_feedthrough_follows_the_method(method, feedthrough):
    assert DiscreteIntegrator("i", method=method).direct_feedthrough is feedthrough


def test_integrator_of_a_vector_with_per_element_limits():
    u = np.ones((30, 2))
    out = output(DiscreteIntegrator("i", 1.0, [0.0, 0.0], upper=[1.0, 2.0]), {"in": u},
                 dt=0.1)
    np.testing.assert_allclose(out[-1], [1.0, 2.0])
    np.testing.assert_allclose(out[5], [0.5, 0.5], rtol=1e-12)


@pytest.mark.parametrize("method", ["forward", "backward", "trapezoidal"])
@pytest.mark.parametrize("limits", [{}, dict(lower=-0.3, upper=0.4)])
def test_integrator_scalar_and_vector_signals_give_the_same_bits(method, limits):
    """A scalar integrator runs in Python floats, a vector one in numpy: same values."""
    u = rng.normal(size=(N, 3))
    vector = output(DiscreteIntegrator("i", 1.7, [0.1, -0.2, 0.0], method, **limits),
                    {"in": u}, dt=0.1)
    for j, x0 in enumerate([0.1, -0.2, 0.0]):
        scalar = output(DiscreteIntegrator("i", 1.7, x0, method, **limits), {"in": u[:, j]},
                        dt=0.1)
        assert_same_bits(scalar[:, 0], vector[:, j])


# -- DiscreteStateSpace vs scipy.signal.dlsim ----------------------------------------------

def random_system(n, m, p, feedthrough, seed):
    r = np.random.default_rng(seed)
    A = r.normal(size=(n, n))
    A *= 0.9 / max(1e-9, np.max(np.abs(np.linalg.eigvals(A))))     # stable
    D = r.normal(size=(p, m)) if feedthrough else np.zeros((p, m))
    return A, r.normal(size=(n, m)), r.normal(size=(p, n)), D, r.normal(size=n)


@pytest.mark.parametrize("n, m, p, feedthrough", [
    (1, 1, 1, False), (1, 1, 1, True), (2, 1, 1, True), (4, 1, 1, False), (8, 1, 1, True),
    (9, 1, 1, True),                    # beyond the scalar form: state vector and @
    (3, 2, 2, True), (3, 2, 1, False), (2, 1, 3, True),
])
def test_state_space_matches_scipy_dlsim(n, m, p, feedthrough):
    A, B, C, D, x0 = random_system(n, m, p, feedthrough, seed=n * 100 + m * 10 + p)
    T = 0.05
    u = rng.normal(size=(N, m))
    block = DiscreteStateSpace("ss", A, B, C, D, x0)
    assert block.direct_feedthrough is feedthrough
    out = output(block, {"in": u}, dt=T)
    _, y, _ = signal.dlsim((A, B, C, D, T), u, x0=x0)
    np.testing.assert_allclose(out, y.reshape(N, p), rtol=1e-12, atol=1e-12)


# -- DiscreteTransferFunction vs scipy.signal.lfilter (z^-1) and dlsim (z) ----------------

TF_CASES = [
    ([1.0], [1.0, -0.5]),
    ([0.5, 0.2], [1.0, -0.5]),
    ([1.0, 0.5, 0.25], [2.0, -1.0, 0.3]),
    ([0.0, 0.0, 1.0], [1.0, -1.2, 0.5, -0.1]),
    ([0.3, -0.1, 0.2, 0.05], [1.0, -0.9, 0.4, -0.05]),
    ([2.0], [4.0]),
]


@pytest.mark.parametrize("num, den", TF_CASES)
def test_transfer_function_in_z_matches_dlsim(num, den):
    T = 0.1
    out = output(DiscreteTransferFunction("tf", num, den), {"in": U}, dt=T)[:, 0]
    _, y = signal.dlsim((np.trim_zeros(num, "f"), den, T), U)     # (scipy warns on 0s)
    np.testing.assert_allclose(out, y[:, 0], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("num, den", TF_CASES + [([1.0, 2.0, 3.0], [1.0])])
def test_transfer_function_in_z_inverse_matches_lfilter(num, den):
    out = output(DiscreteTransferFunction("tf", num, den, "z^-1"), {"in": U})[:, 0]
    np.testing.assert_allclose(out, signal.lfilter(num, den, U), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("num, den, variable, feedthrough, order", [
    ([1.0], [1.0, -0.5], "z", False, 1),
    ([1.0], [1.0, -0.5], "z^-1", True, 1),
    ([0.0, 1.0], [1.0, -0.5], "z^-1", False, 1),
    ([1.0, 0.0], [1.0, -0.5], "z", True, 1),
    ([3.0], [2.0], "z", True, 0),
    ([1.0, 2.0, 3.0], [1.0], "z^-1", True, 2),
])
def test_transfer_function_feedthrough_and_order(num, den, variable, feedthrough, order):
    tf = DiscreteTransferFunction("tf", num, den, variable)
    assert tf.direct_feedthrough is feedthrough
    assert tf.A.shape == (order, order)


# -- DiscretePID vs a hand-written loop ----------------------------------------------------

def pid_loop(e, T, kp, ki, kd, N=None, lower=None, upper=None, anti_windup="none", kb=1.0,
             initial=0.0):
    """The documented equations, written out independently of the block."""
    lo = -np.inf if lower is None else lower
    hi = np.inf if upper is None else upper
    xi, xf, out = initial, 0.0, []
    for ek in e:
        if N is None:
            d = (kd * ek - xf) / T
            xf_next = kd * ek
        else:
            d = N * (kd * ek - xf)
            xf_next = xf + T * d
        v = kp * ek + xi + d
        y = min(max(v, lo), hi)
        out.append(y)
        if anti_windup == "back_calculation":
            xi = xi + T * (ki * ek + kb * (y - v))
        elif anti_windup == "clamping" and ((v > hi and ki * ek > 0) or (v < lo and ki * ek < 0)):
            pass
        else:
            xi = xi + ki * T * ek
        xf = xf_next
    return np.array(out)


@pytest.mark.parametrize("params", [
    dict(kp=2.0, ki=0.0, kd=0.0),
    dict(kp=1.0, ki=3.0, kd=0.0, initial=0.5),
    dict(kp=1.0, ki=2.0, kd=0.1, N=8.0),
    dict(kp=0.5, ki=1.0, kd=0.05),
    dict(kp=1.0, ki=4.0, kd=0.05, N=10.0, lower=-0.8, upper=0.6),
    dict(kp=1.0, ki=4.0, kd=0.05, N=10.0, lower=-0.8, upper=0.6, anti_windup="clamping"),
    dict(kp=1.0, ki=4.0, kd=0.0, upper=0.6, anti_windup="clamping"),
    dict(kp=1.0, ki=4.0, kd=0.0, lower=-0.8, upper=0.6, anti_windup="back_calculation",
         kb=3.0),
    dict(kp=0.0, ki=-2.0, kd=0.0, lower=-1.0, upper=1.0, anti_windup="clamping"),
], ids=lambda p: "-".join(f"{k}={v}" for k, v in p.items()))
def test_pid_matches_a_hand_written_loop(params):
    T = 0.05
    e = 2.0 * np.sin(np.arange(N) * 0.3) + 0.5
    out = output(DiscretePID("pid", **params), {"in": e}, dt=T)[:, 0]
    np.testing.assert_allclose(out, pid_loop(e, T, **params), rtol=1e-12, atol=1e-12)


def test_pid_anti_windup_recovers_faster_than_a_wound_up_integrator():
    """After a long saturation the clamped integrator leaves saturation as soon as the error
    reverses; the unclamped one stays saturated while it unwinds."""
    e = np.concatenate([np.ones(30), -0.2 * np.ones(30)])
    common = dict(kp=0.5, ki=5.0, lower=-1.0, upper=1.0)
    wound = output(DiscretePID("p", **common), {"in": e}, dt=0.05)[:, 0]
    clamped = output(DiscretePID("p", **common, anti_windup="clamping"), {"in": e},
                     dt=0.05)[:, 0]
    back = output(DiscretePID("p", **common, anti_windup="back_calculation", kb=20.0),
                  {"in": e}, dt=0.05)[:, 0]
    assert all(np.all(y[20:30] == 1.0) for y in (wound, clamped, back))
    leaves = [np.append(np.flatnonzero(y[30:] < 1.0), 30)[0] for y in (wound, clamped, back)]
    assert leaves[1] == 0 and leaves[2] <= 1 and leaves[0] == 30, leaves


@pytest.mark.parametrize("params, feedthrough", [
    (dict(kp=1.0), True), (dict(kp=0.0, kd=0.1), True), (dict(kp=0.0, ki=1.0), False),
])
def test_pid_feedthrough(params, feedthrough):
    assert DiscretePID("pid", **params).direct_feedthrough is feedthrough


def build(cls, **kw):
    """A factory of ``cls(**kw)``, so the construction happens inside the test."""
    return lambda: cls(**kw)


@pytest.mark.parametrize("make, param", [
    (build(UnitDelay, name="x", initial="zero"), "initial"),
    (build(RateTransition, name="x", mode="zoh"), "sample_time"),
    (build(RateTransition, name="x", mode="fast", sample_time=0.1), "mode"),
    (build(DiscreteIntegrator, name="x", method="euler"), "method"),
    (build(DiscreteIntegrator, name="x", gain=np.nan), "gain"),
    (build(DiscreteIntegrator, name="x", lower=1.0, upper=0.0), "lower/upper"),
    (build(DiscreteIntegrator, name="x", initial=2.0, upper=1.0), "initial"),
    (build(DiscreteIntegrator, name="x", initial=[0.0, 0.0], upper=[1.0, 1.0, 1.0]), "upper"),
    (build(DiscreteStateSpace, name="x", A=[[1.0, 0.0]], B=[[1.0]], C=[[1.0]]), "A"),
    (build(DiscreteStateSpace, name="x", A=[[1.0]], B=[[1.0], [1.0]], C=[[1.0]]), "B"),
    (build(DiscreteStateSpace, name="x", A=[[1.0]], B=[[1.0]], C=[[1.0, 2.0]]), "C"),
    (build(DiscreteStateSpace, name="x", A=[[1.0]], B=[[1.0]], C=[[1.0]], D=[[1.0, 1.0]]), "D"),
    (build(DiscreteStateSpace, name="x", A=[[1.0]], B=[[1.0]], C=[[1.0]], x0=[1.0, 2.0]), "x0"),
    (build(DiscreteStateSpace, name="x", A=[[np.inf]], B=[[1.0]], C=[[1.0]]), "A"),
    (build(DiscreteTransferFunction, name="x", num=[1.0, 2.0, 3.0], den=[1.0, 0.5]), "num"),
    (build(DiscreteTransferFunction, name="x", num=[1.0], den=[0.0, 0.0]), "den"),
    (build(DiscreteTransferFunction, name="x", num=[1.0], den=[0.0, 1.0], variable="z^-1"),
     "den"),
    (build(DiscreteTransferFunction, name="x", num=[1.0], den=[1.0], variable="s"), "variable"),
    (build(DiscreteTransferFunction, name="x", num=[[1.0]], den=[1.0]), "num"),
    (build(DiscreteTransferFunction, name="x", num=[1.0], den=[1.0, 0.5], x0=[1.0, 2.0]), "x0"),
    (build(DiscretePID, name="x", kp="one"), "kp"),
    (build(DiscretePID, name="x", N=0.0), "N"),
    (build(DiscretePID, name="x", lower=1.0, upper=-1.0), "lower/upper"),
    (build(DiscretePID, name="x", anti_windup="clamping"), "anti_windup"),
    (build(DiscretePID, name="x", anti_windup="conditional", upper=1.0), "anti_windup"),
])
def test_bad_parameters_name_the_block_and_parameter(make, param):
    with pytest.raises(ModelError) as err:
        make()
    msg = str(err.value)
    assert "'x'" in msg and f": {param} " in msg, msg
