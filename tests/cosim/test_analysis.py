"""Linearization, equilibria, periodic steady states (cosim.run.analysis) vs analytic oracles."""

import math

import numpy as np
import pytest

import blocks.continuous as continuous
from blocks import Constant, Gain, MathFunction, Sine, Sum
from blocks.continuous import Integrator
from cosim import (Block, ConvergenceError, Kernel, Model, ModelError, SimulationConfig,
                   SimulationError, Simulator)
from cosim.run.analysis import linearize, periodic_steady_state, steady_state
from cosim.model.block import as_signal

# -- test blocks -------------------------------------------------------------------------------


class LTI(Block):
    """``dx/dt = A x + B u``, ``y = C x + D u`` (a local state-space block for cross-checks)."""

    def __init__(self, name, A, B, C, D, initial=None, **kw):
        super().__init__(name, **kw)
        self.A, self.B, self.C, self.D = (np.atleast_2d(np.asarray(v, dtype=float))
                                          for v in (A, B, C, D))
        self.initial = np.zeros(len(self.A)) if initial is None else as_signal(initial)
        self.direct_feedthrough = bool(np.any(self.D))

    def initialize(self, t0):
        self.cstate = self.initial.copy()
        # Set even with feedthrough: a loop's tear values start from what initialize set.
        self.outputs["out"] = self.C @ self.cstate

    def output_update(self, t, dt):
        self.outputs["out"] = self.C @ self.cstate + self.D @ self.inputs["in"]

    def derivative(self, t):
        return self.A @ self.cstate + self.B @ self.inputs["in"]


class KernelLag(Block):
    """``tau dy/dt = in - y`` with a fast-path kernel (so the generated fast path runs it)."""

    direct_feedthrough = False

    def __init__(self, name, tau=1.0, **kw):
        super().__init__(name, **kw)
        self.tau = float(tau)

    def initialize(self, t0):
        self.cstate = np.zeros(1)
        self.outputs["out"] = np.zeros(1)

    def output_update(self, t, dt):
        self.outputs["out"] = self.cstate.copy()

    def derivative(self, t):
        return (self.inputs["in"] - self.cstate) / self.tau

    def kernel(self):
        return Kernel({"out": "c_0"}, derivatives=(f"(u_in - c_0) / {self.tau!r}",))


# -- models ------------------------------------------------------------------------------------

M, K, CD = 2.0, 3.0, 0.5      # mass (kg), stiffness (N/m), damping (N s/m)


def mass_spring_damper(force=1.0, sample_time=None):
    """``m x'' = u - k x - c v`` from Integrators, Gains and a Sum; input ``u.out``."""
    m = Model("msd")
    m.add(Constant("u", force, sample_time=sample_time), Sum("f", "+--"), Gain("inv_m", 1 / M),
          Integrator("vel", 0.3), Integrator("pos", -0.2), Gain("kx", K), Gain("cv", CD))
    m.connect("u.out", "f.in1")
    m.connect("kx.out", "f.in2")
    m.connect("cv.out", "f.in3")
    m.connect("f.out", "inv_m.in")
    m.connect("inv_m.out", "vel.in")
    m.connect("vel.out", "pos.in", "cv.in")
    m.connect("pos.out", "kx.in")
    return m


def order(sim, names):
    """Indices of the named blocks' (scalar) states in the simulator's state vector."""
    sl = sim.state_slices()
    return [sl[n].start for n in names]


A_P, B_P, R = 2.0, 0.5, 1.5             # plant x' = -a x + b u; reference r
KP, KI = 4.0, 3.0                       # PI gains


def pi_loop():
    """A first-order plant under PI feedback to a constant reference."""
    m = Model("pi")
    m.add(Constant("r", R), Sum("e", "+-"), Integrator("xi", 0.0), Gain("kp", KP),
          Gain("ki", KI), Sum("u", "++"), Gain("bu", B_P), Gain("ax", A_P), Sum("dx", "+-"),
          Integrator("plant", 0.0))
    m.connect("r.out", "e.in1")
    m.connect("plant.out", "e.in2", "ax.in")
    m.connect("e.out", "xi.in", "kp.in")
    m.connect("xi.out", "ki.in")
    m.connect("kp.out", "u.in1")
    m.connect("ki.out", "u.in2")
    m.connect("u.out", "bu.in")
    m.connect("bu.out", "dx.in1")
    m.connect("ax.out", "dx.in2")
    m.connect("dx.out", "plant.in")
    return m


# -- linearize ---------------------------------------------------------------------------------


@pytest.mark.parametrize("sample_time", [None, 0.1], ids=["stage_source", "held_source"])
def test_linearize_mass_spring_damper(sample_time):
    sim = Simulator(mass_spring_damper(sample_time=sample_time),
                    SimulationConfig(dt=0.01, t_end=2.0, solver="RK4"))
    sim.run(duration=0.5)
    A, B, C, D = linearize(sim, ["u.out"], ["pos.out", "vel.out"])
    p = order(sim, ["pos", "vel"])                      # state vector in (pos, vel) order
    A, B, C = A[np.ix_(p, p)], B[p], C[:, p]
    assert (A.shape, B.shape, C.shape, D.shape) == ((2, 2), (2, 1), (2, 2), (2, 1))
    np.testing.assert_allclose(A, [[0, 1], [-K / M, -CD / M]], rtol=0, atol=1e-9)
    np.testing.assert_allclose(B, [[0], [1 / M]], rtol=0, atol=1e-9)
    np.testing.assert_allclose(C, np.eye(2), rtol=0, atol=1e-9)
    np.testing.assert_array_equal(D, np.zeros((2, 1)))


def _state_space_classes():
    return [pytest.param(LTI, id="local_LTI"),
            pytest.param(continuous.StateSpace, id="blocks.StateSpace")]


SS_A = [[-1.0, 2.0, 0.0], [-2.0, -1.0, 1.0], [0.0, 0.0, -3.0]]
SS_B = [[1.0, 0.0], [0.0, 2.0], [1.0, -1.0]]
SS_C = [[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]]
SS_D = [[0.5, 0.0], [0.0, -0.25]]


@pytest.mark.parametrize("cls", _state_space_classes())
def test_linearize_recovers_a_state_space_block_with_feedthrough(cls):
    m = Model("ss")
    m.add(Constant("u", [0.3, -0.7]), cls("ss", A=SS_A, B=SS_B, C=SS_C, D=SS_D))
    m.connect("u.out", "ss.in")
    sim = Simulator(m, SimulationConfig(dt=0.01, t_end=1.0, solver="RK4"))
    sim.run(duration=0.2)
    A, B, C, D = linearize(sim, ["u.out"], ["ss.out"])
    blk = m["ss"]
    for got, want in ((A, blk.A), (B, blk.B), (C, blk.C), (D, blk.D)):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-9)
    assert np.any(D)


@pytest.mark.parametrize("cls", _state_space_classes())
def test_linearize_closes_an_algebraic_loop_through_feedthrough(cls):
    """u = r - k y with y = C x + D u: an algebraic loop; the closed loop is known exactly.

    SISO, because the loop solver starts a tear it has no value for from ``zeros(1)``.
    """
    a, b, c, d, k = (np.array(SS_A), np.array(SS_B)[:, :1], np.array(SS_C)[:1],
                     np.array([[0.5]]), 0.4)
    m = Model("loop")
    m.add(Constant("r", 1.0), Sum("e", "+-"), Gain("kf", k), cls("ss", A=a, B=b, C=c, D=d))
    m.connect("r.out", "e.in1")
    m.connect("e.out", "ss.in")
    m.connect("ss.out", "kf.in")
    m.connect("kf.out", "e.in2")
    sim = Simulator(m, SimulationConfig(dt=0.01, t_end=1.0, solver="RK4", tolerance_fpi=1e-14))
    sim.run(duration=0.1)
    assert sim.plan.loops
    A, B, C, D = linearize(sim, ["r.out"], ["ss.out", "e.out"])
    s = 1.0 / (1.0 + k * d[0, 0])                   # u = s (r - k C x)
    want = (a - s * k * b @ c, s * b, np.vstack([c - s * k * d @ c, -s * k * c]),
            np.array([[s * d[0, 0]], [s]]))
    for got, w in zip((A, B, C, D), want):
        np.testing.assert_allclose(got, w, rtol=0, atol=1e-8)


def test_linearize_of_a_nonlinear_model_at_a_given_point():
    """theta' = omega, omega' = -sin(theta): A = [[0, 1], [-cos(theta), 0]] at any theta."""
    m = Model("pendulum")
    m.add(Integrator("theta", 0.1), Integrator("omega", 0.0), MathFunction("s", "sin"),
          Gain("g", -1.0))
    m.connect("theta.out", "s.in")
    m.connect("s.out", "g.in")
    m.connect("g.out", "omega.in")
    m.connect("omega.out", "theta.in")
    sim = Simulator(m, SimulationConfig(dt=0.01, t_end=1.0, solver="RK4"))
    sim.initialize()
    x_before = sim.get_state_vector()
    x = np.zeros(2)
    p = order(sim, ["theta", "omega"])
    x[p] = [1.1, 0.3]
    A, B, C, D = linearize(sim, [], ["s.out"], x=x)
    assert (B.shape, D.shape, C.shape) == ((2, 0), (1, 0), (1, 2))
    np.testing.assert_allclose(A[np.ix_(p, p)], [[0, 1], [-math.cos(1.1), 0]], atol=1e-9)
    np.testing.assert_allclose(C[:, p], [[math.cos(1.1), 0]], atol=1e-9)
    np.testing.assert_array_equal(sim.get_state_vector(), x_before)


@pytest.mark.parametrize("solver", ["RK4", "RK45", "ESDIRK32"])
def test_continuing_after_linearize_is_bit_identical(solver):
    cfg = SimulationConfig(dt=0.01, t_end=3.0, solver=solver)
    ref = Simulator(mass_spring_damper(), cfg)
    want = ref.run()
    sim = Simulator(mass_spring_damper(), cfg)
    sim.run(duration=1.0)
    ports = [(dict(b.outputs), dict(b.inputs)) for b in sim.plan.blocks]
    linearize(sim, ["u.out"], ["pos.out", "vel.out", "f.out"])
    linearize(sim, ["u.out", "kx.out"], ["vel.out"], t=7.0, x=[5.0, -3.0], eps=1e-3)
    # Every port holds the very array it held before (the wires and logs share them).
    for b, (outs, ins) in zip(sim.plan.blocks, ports):
        assert b.outputs == outs and b.inputs == ins, b.name
        assert all(b.outputs[p] is v for p, v in outs.items()), b.name
    got = sim.run()
    for key in want:
        np.testing.assert_array_equal(got[key], want[key], err_msg=key)
    np.testing.assert_array_equal(sim.get_state_vector(), ref.get_state_vector())
    assert sim.solver_stats == ref.solver_stats


def test_linearize_names_every_bad_port():
    sim = Simulator(mass_spring_damper(), SimulationConfig(dt=0.01, t_end=1.0))
    with pytest.raises(ModelError) as info:
        linearize(sim, ["u.out", "nosuch.out", "u"], ["pos.nope", "pos.out", "pos.out"])
    msg = str(info.value)
    assert "no block 'nosuch'" in msg and "'u' is not 'block.port'" in msg
    with pytest.raises(ModelError) as info:
        linearize(sim, ["u.out"], ["pos.nope", "pos.out", "pos.out"])
    msg = str(info.value)
    assert "has no output 'nope' (outputs: out)" in msg and "'pos.out' is listed twice" in msg
    with pytest.raises(ModelError, match=r"write \['u.out'\]"):
        linearize(sim, "u.out", ["pos.out"])
    with pytest.raises(ModelError, match="2 continuous states"):
        linearize(sim, ["u.out"], ["pos.out"], x=[1.0, 2.0, 3.0])


def test_linearize_names_the_component_where_the_model_is_not_finite():
    # dx/dt = -x for x <= 0 and inf above: the +h perturbation of x = 0 leaves the domain.
    m = Model("edge")
    m.add(Integrator("x", 0.0), MathFunction("f", lambda u: np.where(u > 0, np.inf, -u)))
    m.connect("x.out", "f.in")
    m.connect("f.out", "x.in")
    sim = Simulator(m, SimulationConfig(dt=0.01, t_end=1.0))
    sim.initialize()
    with pytest.raises(SimulationError, match=r"not finite at state 0 \(x\[0\]\) = 0.0 ± 6.06e-06"):
        linearize(sim, [], ["x.out"])
    assert sim.get_state_vector().tolist() == [0.0]


# -- steady state ------------------------------------------------------------------------------


def m_out(sim, name):
    """The (scalar) output ``name.out`` as the simulator holds it now."""
    return float(sim.plan.blocks[sim.plan.index[name]].outputs["out"][0])


def test_steady_state_of_a_pi_loop_is_the_analytic_equilibrium():
    sim = Simulator(pi_loop(), SimulationConfig(dt=0.01, t_end=5.0, solver="RK4"))
    sim.run(duration=0.3)
    x = steady_state(sim)
    p = order(sim, ["plant", "xi"])
    np.testing.assert_allclose(x[p], [R, A_P * R / (B_P * KI)], rtol=0, atol=1e-12)
    # The simulator is left there, outputs evaluated, and stays there.
    np.testing.assert_array_equal(sim.get_state_vector(), x)
    assert abs(m_out(sim, "e")) <= 1e-12
    logs = sim.run(duration=1.0)
    np.testing.assert_allclose(logs["plant.out"][-101:, 0], R, rtol=0, atol=1e-11)
    assert abs(logs["e.out"][-101, 0]) <= 1e-12       # the cycle-start sample was refreshed


def test_steady_state_of_a_nonlinear_pendulum_with_torque():
    """theta'' = tau - (g/l) sin(theta) - c theta': equilibrium theta = asin(tau l / g)."""
    g_l, tau, c = 9.81, 4.905, 0.7
    m = Model("pendulum")
    m.add(Constant("tau", tau), Integrator("theta", 0.2), Integrator("omega", 0.0),
          MathFunction("s", "sin"), Gain("gl", g_l), Gain("c", c), Sum("acc", "+--"))
    m.connect("tau.out", "acc.in1")
    m.connect("theta.out", "s.in")
    m.connect("s.out", "gl.in")
    m.connect("gl.out", "acc.in2")
    m.connect("omega.out", "c.in", "theta.in")
    m.connect("c.out", "acc.in3")
    m.connect("acc.out", "omega.in")
    sim = Simulator(m, SimulationConfig(dt=0.01, t_end=1.0, solver="RK4"))
    x = steady_state(sim)
    p = order(sim, ["theta", "omega"])
    np.testing.assert_allclose(x[p], [math.asin(tau / g_l), 0.0], rtol=0, atol=1e-12)
    assert np.max(np.abs(sim.derivatives(sim.t, x))) <= 1e-10


def test_steady_state_without_equilibrium_raises_and_leaves_the_simulator():
    m = Model("ramp")
    m.add(Constant("one", 1.0), Integrator("i", 0.5))
    m.connect("one.out", "i.in")
    sim = Simulator(m, SimulationConfig(dt=0.01, t_end=1.0))
    sim.run(duration=0.1)
    before = sim.get_state_vector()
    with pytest.raises(ConvergenceError, match="steady_state of model 'ramp'") as info:
        steady_state(sim)
    assert info.value.residual == pytest.approx(1.0)
    np.testing.assert_array_equal(sim.get_state_vector(), before)


def test_steady_state_under_the_fast_path():
    """The generated fast path keeps its own copy of the state; steady_state must still move."""
    m = Model("lag")
    m.add(Constant("u", 2.5), KernelLag("lag", 0.3))
    m.connect("u.out", "lag.in")
    sim = Simulator(m, SimulationConfig(dt=0.01, t_end=1.0, solver="RK4"))
    sim.initialize()
    x = steady_state(sim)
    np.testing.assert_allclose(x, [2.5], rtol=0, atol=1e-12)
    logs = sim.run(duration=0.5)
    np.testing.assert_allclose(logs["lag.out"][:, 0], 2.5, rtol=0, atol=1e-12)


# -- periodic steady state ---------------------------------------------------------------------

TAU, FREQ, AMP = 0.2, 1.0, 1.3


def driven_lag(kernel_block):
    """``tau y' = u - y`` with ``u = AMP sin(2 pi FREQ t)``."""
    m = Model("driven_lag")
    if kernel_block:
        m.add(Sine("u", amplitude=AMP, frequency=FREQ), KernelLag("y", TAU))
        m.connect("u.out", "y.in")
        return m
    m.add(Sine("u", amplitude=AMP, frequency=FREQ), Sum("e", "+-"), Gain("g", 1 / TAU),
          Integrator("y", 0.0))
    m.connect("u.out", "e.in1")
    m.connect("y.out", "e.in2")
    m.connect("e.out", "g.in")
    m.connect("g.out", "y.in")
    return m


def lag_cycle(t):
    """The analytic periodic solution of the driven lag at time t."""
    w = 2 * math.pi * FREQ
    return AMP / math.hypot(1.0, w * TAU) * math.sin(w * t - math.atan(w * TAU))


@pytest.mark.parametrize("kernel_block", [False, True], ids=["interpreter", "fast_path"])
def test_periodic_steady_state_of_a_driven_lag_is_the_analytic_cycle(kernel_block):
    # RK4 with dt = 1 ms: the discrete cycle differs from the analytic one by ~1e-12
    # (global error ~ (w dt)^4 / 120 relative), far inside the 1e-8 asked for.
    sim = Simulator(driven_lag(kernel_block),
                    SimulationConfig(dt=1e-3, t_end=10.0, solver="RK4"))
    x0 = periodic_steady_state(sim, 1.0 / FREQ, transient=0.25, tol=1e-12)
    assert sim.t == pytest.approx(0.25)
    np.testing.assert_allclose(x0, [lag_cycle(0.25)], rtol=0, atol=1e-8)
    # Continuing the run follows the cycle and comes back to x0 after one period.
    logs = sim.run(duration=1.0)
    np.testing.assert_allclose(sim.get_state_vector(), x0, rtol=0, atol=1e-11)
    t = logs.time_of("y.out")
    cycle = np.array([lag_cycle(tk) for tk in t[t >= 0.25 - 1e-12]])
    np.testing.assert_allclose(logs["y.out"][t >= 0.25 - 1e-12, 0], cycle, rtol=0, atol=1e-8)


def test_periodic_shots_leave_no_trace_in_the_logs():
    cfg = SimulationConfig(dt=1e-3, t_end=2.0, solver="RK4")
    sim = Simulator(driven_lag(False), cfg)
    x0 = periodic_steady_state(sim, 1.0, transient=0.5)
    logs = sim.logs
    ref = Simulator(driven_lag(False), cfg)
    want = ref.run(duration=0.5)
    for key in want:
        # Everything up to the cycle start is the plain run's; the cycle-start sample shows x0.
        np.testing.assert_array_equal(logs[key][:-1], want[key][:-1], err_msg=key)
        np.testing.assert_array_equal(logs.time_of(key), want.time_of(key), err_msg=key)
    assert logs["y.out"][-1, 0] == x0[0]
    assert sim.stats["ticks"] == ref.stats["ticks"]
    assert sim.solver_stats == ref.solver_stats


def test_periodic_steady_state_checks_the_period_is_whole_base_steps():
    sim = Simulator(driven_lag(False), SimulationConfig(dt=0.03, t_end=1.0, solver="RK4"))
    with pytest.raises(ModelError, match=r"period 1.0 s is not a whole number of base steps "
                                         r"dt=0.03 s \(33.3333 steps\)"):
        periodic_steady_state(sim, 1.0)


def test_periodic_steady_state_of_an_unstable_system_raises():
    m = Model("unstable")
    m.add(Sine("u"), Sum("e", "++"), Integrator("y", 0.0))
    m.connect("u.out", "e.in1")
    m.connect("y.out", "e.in2")
    m.connect("e.out", "y.in")          # y' = y + sin: the periodic solution repels
    sim = Simulator(m, SimulationConfig(dt=0.01, t_end=1.0, solver="RK4"))
    with pytest.raises(ConvergenceError, match="periodic_steady_state of model 'unstable'"):
        periodic_steady_state(sim, 1.0, m=0, max_iterations=10)
    assert sim.t == 0.0
