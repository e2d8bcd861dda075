"""Continuous blocks against independent oracles (analytic solutions, scipy)."""

import numpy as np
import pytest
from scipy import linalg, signal
from scipy.integrate import solve_ivp

from blocks import (ODE, PID, Constant, Derivative, FirstOrderLag, Gain, Integrator, Sine,
                    StateSpace, Step, Sum, TransferFunction, TransportDelay)
from cosim import Model, ModelError, SimulationConfig, Simulator

TIGHT = dict(solver="RK45", rtol=1e-11, atol=1e-13)


def run(m, t_end=2.0, dt=0.01, **cfg):
    return Simulator(m, SimulationConfig(dt=dt, t_end=t_end, **(cfg or TIGHT))).run()


def driven(block, source):
    m = Model("driven")
    m.add(source, block)
    m.connect(f"{source.name}.out", f"{block.name}.in")
    return m


def test_first_order_lag_step_response_is_analytic():
    logs = run(driven(FirstOrderLag("lag", tau=0.4, gain=3.0, initial=0.5),
                      Constant("u", 2.0)))
    t = logs.time
    expect = 6.0 + (0.5 - 6.0) * np.exp(-t / 0.4)
    # RK45 at rtol 1e-11: the global error stays well below 1e-9.
    np.testing.assert_allclose(logs["lag.out"][:, 0], expect, rtol=0, atol=1e-9)


def test_integrator_of_a_sine_is_analytic_and_limits_and_reset_work():
    logs = run(driven(Integrator("x", 1.0), Sine("u", 2.0, 0.5)))
    t = logs.time
    w = 2 * np.pi * 0.5
    np.testing.assert_allclose(logs["x.out"][:, 0], 1.0 + 2.0 * (1 - np.cos(w * t)) / w,
                               atol=1e-9)
    m = Model("limited")
    m.add(Constant("u", 1.0), Integrator("x", 0.0, lower=-1.0, upper=0.5),
          Step("r", step_time=1.5, final=1.0))
    m.connect("u.out", "x.in")
    m.connect("r.out", "x.reset")
    logs = run(m, t_end=2.0, **dict(solver="RK4"))
    x, t = logs["x.out"][:, 0], logs.time
    assert np.all(x <= 0.5 + 1e-12) and x[np.searchsorted(t, 1.2)] == pytest.approx(0.5)
    # The reset's rising edge at t = 1.5 sets x back to 0; it then integrates again.
    np.testing.assert_allclose(x[t > 1.5 + 1e-9], t[t > 1.5 + 1e-9] - 1.5, atol=1e-9)


SYSTEMS = {
    "siso-2": ([[0.0, 1.0], [-4.0, -0.6]], [[0.0], [1.0]], [[1.0, 0.0]], [[0.0]]),
    "siso-3-D": ([[-1.0, 0.5, 0.0], [0.0, -2.0, 1.0], [0.2, 0.0, -0.5]],
                 [[1.0], [0.0], [0.5]], [[1.0, -1.0, 0.3]], [[0.4]]),
    "mimo": ([[-1.0, 0.3], [0.1, -0.7]], [[1.0, 0.0], [0.5, 1.0]],
             [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], [[0.0, 0.1], [0.0, 0.0], [0.2, 0.0]]),
}


@pytest.mark.parametrize("name", SYSTEMS)
def test_state_space_matches_solve_ivp(name):
    A, B, C, D = (np.array(v, dtype=float) for v in SYSTEMS[name])
    m_in = B.shape[1]
    x0 = np.linspace(0.2, -0.3, A.shape[0])
    m = Model("ss")
    amps = np.arange(1.0, m_in + 1.0)
    m.add(Constant("k", amps), Sine("s", 1.0, 0.7), StateSpace("ss", A, B, C, D, x0))
    from blocks import Product
    m.add(Product("u", "**"))
    m.connect("k.out", "u.in1")
    m.connect("s.out", "u.in2")
    m.connect("u.out", "ss.in")
    logs = run(m, t_end=3.0)
    t = logs.time

    def u(tt):
        return amps * np.sin(2 * np.pi * 0.7 * tt)

    sol = solve_ivp(lambda tt, x: A @ x + B @ u(tt), (0, 3.0), x0, t_eval=t, rtol=1e-12,
                    atol=1e-14, method="DOP853")
    y = (C @ sol.y).T + np.array([D @ u(tt) for tt in t])
    # Both integrators are run 3 orders tighter than the 1e-8 asserted.
    np.testing.assert_allclose(logs["ss.out"], y, rtol=0, atol=1e-8)


def test_transfer_function_step_matches_scipy():
    num, den = [2.0, 1.0], [1.0, 0.9, 4.0]
    logs = run(driven(TransferFunction("tf", num, den), Step("u", step_time=0.0, final=1.0)),
               t_end=5.0)
    t = logs.time
    _, y = signal.step((num, den), T=t)
    np.testing.assert_allclose(logs["tf.out"][:, 0], y, rtol=0, atol=1e-8)


def test_rk4_on_state_space_has_order_four():
    A = np.array([[0.0, 1.0], [-9.0, -0.5]])
    x0 = np.array([1.0, 0.0])
    dts = np.array([0.04, 0.02, 0.01, 0.005])
    errs = []
    for dt in dts:
        m = Model("free")
        m.add(Constant("z", 0.0), StateSpace("ss", A, [[0.0], [1.0]], [[1.0, 0.0]], x0=x0))
        m.connect("z.out", "ss.in")
        logs = run(m, t_end=2.0, dt=dt, solver="RK4")
        exact = (linalg.expm(A * 2.0) @ x0)[0]
        errs.append(abs(logs["ss.out"][-1, 0] - exact))
    slope = np.polyfit(np.log(dts), np.log(errs), 1)[0]
    assert slope >= 3.8, (errs, slope)


def test_pid_closed_loop_matches_hand_written_ode():
    kp, ki, kd, tf = 2.0, 1.5, 0.3, 0.05
    m = Model("loop")
    m.add(Step("r", step_time=0.0, final=1.0), Sum("e", "+-"), PID("pid", kp, ki, kd, tf),
          FirstOrderLag("plant", tau=0.5))
    m.connect("r.out", "e.in1")
    m.connect("plant.out", "e.in2")
    m.connect("e.out", "pid.in")
    m.connect("pid.out", "plant.in")
    logs = run(m, t_end=3.0)

    def f(t, z):
        xi, xf, y = z
        e = 1.0 - y
        u = kp * e + ki * xi + kd * (e - xf) / tf
        return [e, (e - xf) / tf, (u - y) / 0.5]

    sol = solve_ivp(f, (0, 3.0), [0.0, 0.0, 0.0], t_eval=logs.time, rtol=1e-12, atol=1e-14,
                    method="DOP853")
    np.testing.assert_allclose(logs["plant.out"][:, 0], sol.y[2], rtol=0, atol=1e-8)


def test_derivative_of_a_sine_matches_its_filter_solution():
    tau, w = 0.02, 2 * np.pi
    logs = run(driven(Derivative("d", tau=tau), Sine("u", 1.0, 1.0)), t_end=2.0)
    sol = solve_ivp(lambda t, x: [(np.sin(w * t) - x[0]) / tau], (0, 2.0), [0.0],
                    t_eval=logs.time, rtol=1e-12, atol=1e-14, method="DOP853")
    expect = (np.sin(w * logs.time) - sol.y[0]) / tau
    np.testing.assert_allclose(logs["d.out"][:, 0], expect, rtol=0, atol=1e-7)
    # ... which approaches the true derivative once the filter has settled (lag ~ tau).
    assert abs(logs["d.out"][-1, 0] - w * np.cos(w * 2.0)) < 0.1 * w


def test_ode_block_van_der_pol_matches_solve_ivp():
    mu = 1.0

    def f(t, x, u):
        return [x[1], mu * (1 - x[0] ** 2) * x[1] - x[0] + u[0]]

    m = driven(ODE("vdp", f, lambda t, x, u: x[:1], x0=[2.0, 0.0]), Constant("u", 0.0))
    logs = run(m, t_end=5.0)
    sol = solve_ivp(lambda t, x: f(t, x, [0.0]), (0, 5.0), [2.0, 0.0], t_eval=logs.time,
                    rtol=1e-12, atol=1e-14, method="DOP853")
    np.testing.assert_allclose(logs["vdp.out"][:, 0], sol.y[0], rtol=0, atol=1e-8)


def test_transport_delay_delays_a_sine():
    delay, dt = 0.25, 0.01
    logs = run(driven(TransportDelay("td", delay, initial=0.3), Sine("u", 1.0, 0.5)),
               t_end=2.0, dt=dt, solver="RK4")
    t, y = logs.time, logs["td.out"][:, 0]
    before = t < delay - 1e-12
    np.testing.assert_array_equal(y[before], 0.3)
    # Linear interpolation between tick samples: error <= (w*dt)^2/8 * max|u''|/w^2.
    w = np.pi
    np.testing.assert_allclose(y[~before], np.sin(w * (t[~before] - delay)), rtol=0,
                               atol=(w * dt) ** 2 / 8 + 1e-12)


@pytest.mark.parametrize("make, needle", [
    (lambda: FirstOrderLag("b", tau=0.0), "FirstOrderLag 'b': tau must be > 0"),
    (lambda: StateSpace("b", [[1.0, 0.0]], [[1.0]], [[1.0]]), "StateSpace 'b': A must be square"),
    (lambda: StateSpace("b", [[1.0]], [[1.0], [2.0]], [[1.0]]), "StateSpace 'b': B must have"),
    (lambda: TransferFunction("b", [1.0, 2.0, 3.0], [1.0, 1.0]), "must be proper"),
    (lambda: PID("b", tf=-1.0), "PID 'b': tf must be > 0"),
    (lambda: PID("b", lower=1.0, upper=0.0), "PID 'b': lower must be < upper"),
    (lambda: Derivative("b", tau=-0.1), "Derivative 'b': tau must be > 0"),
    (lambda: TransportDelay("b", delay=0.0), "TransportDelay 'b': delay must be > 0"),
    (lambda: ODE("b", None, None, [0.0]), "ODE 'b': f"),
    (lambda: Integrator("b", 0.0, lower=1.0, upper=0.0), "need lower < upper"),
])
def test_bad_parameters_name_block_and_parameter(make, needle):
    with pytest.raises(ModelError, match=needle):
        make()


def test_linearize_cross_checks_state_space_matrices():
    A, B, C, D = (np.array(v, dtype=float) for v in SYSTEMS["siso-3-D"])
    m = Model("lin")
    m.add(Constant("u", 0.3), StateSpace("ss", A, B, C, D, x0=[0.1, 0.2, 0.3]), Gain("y", 1.0))
    m.connect("u.out", "ss.in")
    m.connect("ss.out", "y.in")
    sim = Simulator(m, SimulationConfig(dt=0.01, t_end=1.0))
    sim.initialize()
    A2, B2, C2, D2 = sim.linearize(["u.out"], ["y.out"])
    for got, want in ((A2, A), (B2, B), (C2, C), (D2, D)):
        np.testing.assert_allclose(got, want, atol=1e-9)
