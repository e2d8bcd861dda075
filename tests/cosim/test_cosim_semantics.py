"""What a co-simulation computes, against outside references (docs/cosim-semantics.md).

- Exactness: with every discrete unit sampling at the macro step H, continuous units fed only
  by outputs held over a step, and feedthrough resolved at macro points, Jacobi and
  Gauss–Seidel at every extrapolation order give bit for bit the monolithic run of the same
  model (its units as atomic subsystems, base step H). Jacobi with extrapolation 0 does so for
  any model whose units all step at H.
- Orders: on two coupled oscillators against ``solve_ivp``, the error falls as H^(e+1) for
  extrapolation e = 0, 1, 2 under both schemes.
- Classic delayed feedthrough (``feedthrough="delay"``) is the textbook Jacobi loop of FMI
  masters, written here by hand on the units themselves: bit for bit; a chain of feedthrough
  units lags one macro step per unit, analytically.
"""

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from blocks import (DiscreteIntegrator, DiscretePID, Gain, Saturation, Sine, Step, Sum,
                    UnitDelay)
from blocks.continuous import Integrator
from cosim import (CosimConfig, Inport, Model, ModelError, Outport, SimulationConfig,
                   Simulator, Subsystem)
from cosim.master.cosimulation import CoSimulation
from cosim.master.local_unit import LocalUnit
from cosim.model.evaluate import evaluate
from tests.cluster.scenarios import DT, motor_pi


def assert_same_logs(co, mono, keys=None):
    for key in keys or co:
        np.testing.assert_array_equal(co[key], mono[key], err_msg=key, strict=True)
        np.testing.assert_array_equal(co.time_of(key), mono.time_of(key), err_msg=key)


# -- exactness -----------------------------------------------------------------------------

def servo_chain(H):
    """Four units: a continuous plant (RK4, a quarter of H), a sensor (discrete gain and unit
    delay at H, no feedthrough), a controller (PI with its own error sum, feedthrough) and an
    actuator (saturation, feedthrough): two refresh levels; the reference, sampled faster than
    H, in the top-level unit."""
    m = Model("servo")
    plant = Subsystem("plant", atomic=True, dt=H / 4, solver="RK4")
    plant.add(Inport("f"), Integrator("v", 0.0), Integrator("x", 0.0), Gain("c", -0.8),
              Gain("k", -2.0), Sum("acc", "+++"), Outport("x_"))
    plant.connect("f.out", "acc.in1")
    plant.connect("c.out", "acc.in2")
    plant.connect("k.out", "acc.in3")
    plant.connect("acc.out", "v.in")
    plant.connect("v.out", "x.in", "c.in")
    plant.connect("x.out", "k.in", "x_.in")
    sensor = Subsystem("sensor", atomic=True, dt=H)
    sensor.add(Inport("x"), Gain("g", 1.02), UnitDelay("d", 0.0), Outport("y"))
    sensor.connect("x.out", "g.in")
    sensor.connect("g.out", "d.in")
    sensor.connect("d.out", "y.in")
    ctrl = Subsystem("ctrl", atomic=True, dt=H)
    ctrl.add(Inport("ref"), Inport("y"), Sum("e", "+-"), Gain("kp", 6.0),
             DiscreteIntegrator("ei", gain=4.0, sample_time=H), Sum("u", "++"), Outport("u_"))
    ctrl.connect("ref.out", "e.in1")
    ctrl.connect("y.out", "e.in2")
    ctrl.connect("e.out", "kp.in", "ei.in")
    ctrl.connect("kp.out", "u.in1")
    ctrl.connect("ei.out", "u.in2")
    ctrl.connect("u.out", "u_.in")
    act = Subsystem("act", atomic=True, dt=H)
    act.add(Inport("u"), Saturation("sat", lower=-3.0, upper=3.0), Outport("f"))
    act.connect("u.out", "sat.in")
    act.connect("sat.out", "f.in")
    m.add(plant, sensor, ctrl, act, Step("ref", step_time=0.1, final=1.0))
    m.connect("ref.out", "ctrl.ref")
    m.connect("plant.x_", "sensor.x")
    m.connect("sensor.y", "ctrl.y")
    m.connect("ctrl.u_", "act.u")
    m.connect("act.f", "plant.f")
    return m


def speed_loop(H):
    """The quickstart's loop: a continuous motor (RK4, 1 ms) and a discrete PI controller
    (at H) without an error sum of its own; the error sum is in the top-level unit, so the
    unit graph is a cycle broken by the motor, and the top-level unit must be refreshed
    before the controller."""
    m = Model("speed", parameters={"K": 2.0, "tau": 0.5})
    motor = Subsystem("motor", atomic=True, dt=0.001, solver="RK4")
    motor.add(Inport("v"), Gain("kv", "=K/tau"), Gain("loss", "=-1/tau"), Sum("acc", "++"),
              Integrator("w", 0.0), Outport("speed"))
    motor.connect("v.out", "kv.in")
    motor.connect("kv.out", "acc.in1")
    motor.connect("loss.out", "acc.in2")
    motor.connect("acc.out", "w.in")
    motor.connect("w.out", "loss.in", "speed.in")
    ctrl = Subsystem("ctrl", atomic=True, dt=H)
    ctrl.add(Inport("e"), DiscretePID("pi", kp=0.8, ki=2.0, kd=0.0, sample_time=H),
             Outport("v"))
    ctrl.connect("e.out", "pi.in")
    ctrl.connect("pi.out", "v.in")
    m.add(motor, ctrl, Step("ref", step_time=0.1, final=100.0), Sum("err", "+-"))
    m.connect("ref.out", "err.in1")
    m.connect("motor.speed", "err.in2")
    m.connect("err.out", "ctrl.e")
    m.connect("ctrl.v", "motor.v")
    return m


#: case -> (model builder, H, base step of both runs, t_end, signals of a unit that samples a
#: continuous output within the step: equal at the macro points only). The monolithic run's
#: base step is its fastest unit's (an atomic subsystem's step must be a multiple of it).
CASES = {"motor_pi": (lambda H: motor_pi(True), DT, DT, 1.0, ()),
         "servo_chain": (servo_chain, 0.01, 0.0025, 3.0, ()),
         "speed_loop": (speed_loop, 0.01, 0.001, 2.0, ("err.out", "motor.speed"))}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("scheme", ["jacobi", "gauss-seidel"])
@pytest.mark.parametrize("extrapolation", [0, 1, 2])
@pytest.mark.parametrize("compiled", [True, False])
def test_units_sampling_at_H_reproduce_the_monolithic_run(case, scheme, extrapolation,
                                                          compiled):
    build, H, dt, T, within = CASES[case]
    mono = Simulator(build(H), SimulationConfig(dt=dt, t_end=T, solver="RK4")).run()
    co = CoSimulation(build(H), SimulationConfig(dt=dt, t_end=T, solver="RK4", cosim=CosimConfig(
        H=H, scheme=scheme, extrapolation=extrapolation, compiled=compiled)))
    logs = co.run()
    # The same keys in both runs (the top-level unit's without a prefix).
    shared = [k for k in logs if k in mono]
    assert len(shared) >= 8 and any("/" not in k for k in shared)
    for k in shared:
        every = round(H / dt) if k in within else 1
        np.testing.assert_array_equal(logs[k][::every], mono[k][::every], err_msg=k,
                                      strict=True)
        np.testing.assert_array_equal(logs.time_of(k), mono.time_of(k), err_msg=k)
    if case == "servo_chain":
        assert co.master.refresh_levels == [["ctrl"], ["act"]]
    if case == "speed_loop":
        # The error (top-level unit) before the controller: in both orders.
        assert co.master.refresh_levels == [["main"], ["ctrl"]]
        assert co.master.order == ["motor", "main", "ctrl"]


def test_jacobi_without_extrapolation_is_the_monolithic_run_when_H_is_the_units_step():
    # Continuous units coupled through continuous outputs, H their step: only the held
    # (order 0) exchange is what a monolithic run with atomic subsystems computes (above
    # their step it is not: test_semantics_every_model).
    from tests.cluster.scenarios import three_units
    H = 0.002
    model = lambda: three_units(True, solvers=("RK4", "RK4"))     # noqa: E731
    mono = Simulator(model(), SimulationConfig(dt=H, t_end=1.0)).run()
    logs = CoSimulation(model(), SimulationConfig(dt=H, t_end=1.0, cosim=CosimConfig(
        H=H, extrapolation=0))).run()
    assert_same_logs(logs, mono, ["a/x.out", "b/x.out", "a/y.out" if "a/y.out" in mono else
                                  "a/x.out"])


# -- orders ----------------------------------------------------------------------------------

K1, K2, KC = 4.0, 9.0, 2.0


def oscillators(dt):
    """Two oscillators coupled through their positions: x1'' = -K1 x1 + KC (x2 - x1), x2''
    likewise; each a unit (RK4 at ``dt``), neither with direct feedthrough."""
    m = Model("osc")
    for name, k, x0 in (("a", K1, 1.0), ("b", K2, 0.0)):
        s = Subsystem(name, atomic=True, dt=dt, solver="RK4")
        s.add(Inport("u"), Integrator("v", 0.0), Integrator("x", x0), Gain("kx", -(k + KC)),
              Gain("ku", KC), Sum("acc", "++"), Outport("y"))
        s.connect("x.out", "kx.in", "y.in")
        s.connect("u.out", "ku.in")
        s.connect("kx.out", "acc.in1")
        s.connect("ku.out", "acc.in2")
        s.connect("acc.out", "v.in")
        s.connect("v.out", "x.in")
        m.add(s)
    m.connect("a.y", "b.u")
    m.connect("b.y", "a.u")
    return m


@pytest.fixture(scope="module")
def exact_oscillators():
    def rhs(t, z):
        x1, v1, x2, v2 = z
        return [v1, -(K1 + KC) * x1 + KC * x2, v2, -(K2 + KC) * x2 + KC * x1]
    return solve_ivp(rhs, (0, 2.0), [1.0, 0.0, 0.0, 0.0], rtol=1e-12, atol=1e-13,
                     dense_output=True).sol


def coupling_errors(scheme, e, Hs, exact, order=None):
    errs = []
    for H in Hs:
        logs = CoSimulation(oscillators(1e-3), SimulationConfig(dt=1e-3, t_end=2.0, cosim=CosimConfig(
            H=H, scheme=scheme, extrapolation=e, order=order))).run()
        t = logs.time_of("a/x.out")
        z = exact(t)
        errs.append(max(np.max(np.abs(logs["a/x.out"][:, 0] - z[0])),
                        np.max(np.abs(logs["b/x.out"][:, 0] - z[2]))))
    return np.array(errs)


@pytest.mark.parametrize("scheme", ["jacobi", "gauss-seidel"])
@pytest.mark.parametrize("e", [0, 1, 2])
def test_the_error_falls_at_order_extrapolation_plus_one(exact_oscillators, scheme, e):
    Hs = np.array([0.04, 0.02, 0.01])
    errs = coupling_errors(scheme, e, Hs, exact_oscillators)
    slope = np.polyfit(np.log(Hs), np.log(errs), 1)[0]
    assert e + 1 - 0.1 <= slope <= e + 1 + 0.2, (errs, slope)


def test_gauss_seidel_interpolates_more_accurately_than_jacobi_extrapolates(exact_oscillators):
    Hs = np.array([0.02])
    for e in (1, 2):
        gs = coupling_errors("gauss-seidel", e, Hs, exact_oscillators)
        jac = coupling_errors("jacobi", e, Hs, exact_oscillators)
        assert gs[0] < 0.6 * jac[0], (e, gs, jac)
    # Degree 0 holds the value at T under both schemes: the same run.
    np.testing.assert_array_equal(coupling_errors("gauss-seidel", 0, Hs, exact_oscillators),
                                  coupling_errors("jacobi", 0, Hs, exact_oscillators))


def test_a_gauss_seidel_order_can_be_given_and_is_checked(exact_oscillators):
    Hs = np.array([0.02])
    derived = coupling_errors("gauss-seidel", 1, Hs, exact_oscillators)
    same = coupling_errors("gauss-seidel", 1, Hs, exact_oscillators, order=("a", "b"))
    other = coupling_errors("gauss-seidel", 1, Hs, exact_oscillators, order=("b", "a"))
    np.testing.assert_array_equal(derived, same)
    assert other[0] != derived[0]
    with pytest.raises(ModelError, match=r"unknown unit\(s\) 'c'.*missing 'b'.*units: a, b"):
        CoSimulation(oscillators(1e-3), SimulationConfig(dt=1e-3, t_end=0.1, cosim=CosimConfig(
            H=0.01, scheme="gauss-seidel", order=("a", "c")))).run()


# -- classic delayed feedthrough ---------------------------------------------------------------

def chain_of_gains(H):
    """A source unit and two gain units (direct feedthrough) in a chain, plus a continuous
    unit fed back from the last gain (so outputs also drive a state)."""
    m = Model("chain")
    src = Subsystem("src", atomic=True, dt=H)
    src.add(Sine("s", frequency=1.5), Outport("y"))
    src.connect("s.out", "y.in")
    g1 = Subsystem("g1", atomic=True, dt=H)
    g1.add(Inport("u"), Gain("g", 2.0), Outport("y"))
    g1.connect("u.out", "g.in")
    g1.connect("g.out", "y.in")
    g2 = Subsystem("g2", atomic=True, dt=H / 2)
    g2.add(Inport("u"), Inport("x"), Gain("g", 3.0), Sum("s", "+-"), Outport("y"))
    g2.connect("u.out", "g.in")
    g2.connect("g.out", "s.in1")
    g2.connect("x.out", "s.in2")
    g2.connect("s.out", "y.in")
    lag = Subsystem("lag", atomic=True, dt=H / 4, solver="RK4")
    lag.add(Inport("u"), Integrator("x", 0.0), Gain("k", -1.0), Sum("s", "++"), Outport("x_"))
    lag.connect("u.out", "s.in1")
    lag.connect("k.out", "s.in2")
    lag.connect("s.out", "x.in")
    lag.connect("x.out", "k.in", "x_.in")
    m.add(src, g1, g2, lag)
    m.connect("src.y", "g1.u")
    m.connect("g1.y", "g2.u")
    m.connect("g2.y", "lag.u")
    m.connect("lag.x_", "g2.x")
    return m


def textbook_jacobi(model, H, T):
    """The classic fixed-step Jacobi master of FMI tools, by hand on the units: every unit
    gets the outputs the others reported at the end of the previous step, steps, reports.
    Co-initialization at t0 refreshes the units in dependency order once (the chain is
    acyclic). Returns each unit's logs."""
    evaluate(model)
    names = [b.name for b in model.blocks]
    units = {n: LocalUnit(model[n], SimulationConfig(dt=model[n].dt, t_end=T,
                                                     solver=model[n].solver or "RK4"))
             for n in names}
    drives = {}                                     # (unit, input) -> (unit, output)
    for c in model.connections:
        (su, sp), (du, dp) = c.src.split("."), c.dst.split(".")
        drives[(du, dp)] = (su, sp)
    for u in units.values():
        u.initialize(0.0)
    y = {(n, p): v for n, u in units.items() for p, v in u.get_outputs().items()}
    for n in ("src", "lag", "g1", "g2"):            # dependency order at t0
        u = units[n]
        u.set_inputs({p: y[drives[(n, p)]] for p in u.inports})
        u.refresh_outputs()
        y.update({(n, p): v for p, v in u.get_outputs().items()})
    steps = round(T / H)
    for k in range(steps):
        new = {}
        for n, u in units.items():
            u.set_inputs({p: y[drives[(n, p)]] for p in u.inports})
            u.do_step(k * H, H)
            u.refresh_outputs()                     # the end-of-step sample, as reported
            new.update({(n, p): v for p, v in u.get_outputs().items()})
        y = new
    return {n: u.sim.logs for n, u in units.items()}


@pytest.mark.parametrize("compiled", [True, False])
def test_delayed_feedthrough_is_the_textbook_jacobi_loop(compiled):
    H, T = 0.02, 1.0
    ref = textbook_jacobi(chain_of_gains(H), H, T)
    logs = CoSimulation(chain_of_gains(H), SimulationConfig(dt=H / 4, t_end=T, cosim=CosimConfig(
        H=H, feedthrough="delay", compiled=compiled))).run()
    n = 0
    for unit, ulogs in ref.items():
        for key in ulogs:
            np.testing.assert_array_equal(logs[f"{unit}/{key}"], ulogs[key], err_msg=key,
                                          strict=True)
            np.testing.assert_array_equal(logs.time_of(f"{unit}/{key}"), ulogs.time_of(key))
            n += 1
    assert n == 11                                  # every signal of every unit


def test_a_chain_of_feedthrough_units_lags_one_macro_step_per_unit_only_when_delayed():
    H, T = 0.02, 1.0
    for feedthrough, lag in (("resolve", 0), ("delay", 2)):
        logs = CoSimulation(chain_of_gains(H), SimulationConfig(dt=H / 4, t_end=T, cosim=CosimConfig(
            H=H, feedthrough=feedthrough))).run()
        t = logs.time_of("g2/g.out")[::2]           # g2 runs at H/2: its macro points
        got = logs["g2/g.out"][::2, 0]
        want = 6.0 * np.sin(2 * np.pi * 1.5 * np.maximum(t - lag * H, 0.0))
        np.testing.assert_allclose(got[lag:], want[lag:], rtol=0, atol=1e-12)
        assert not np.allclose(got[lag + 1:], 6.0 * np.sin(2 * np.pi * 1.5 * (
            t[lag + 1:] - (lag + 1) * H)), atol=1e-6)


@pytest.mark.parametrize("scheme", ["jacobi", "gauss-seidel"])
@pytest.mark.parametrize("extrapolation", [0, 1, 2])
def test_an_iterated_coupling_reproduces_the_monolithic_loop_solution(scheme, extrapolation):
    # Two discrete feedthrough units in an algebraic loop: the master iterates the coupling,
    # the monolithic run solves the loop; both to ~1e-14, so they agree to 1e-12.
    from tests.cluster.scenarios import algebraic
    mono = Simulator(algebraic(), SimulationConfig(dt=0.01, t_end=2.0,
                                                   tolerance_fpi=1e-14)).run()
    co = CoSimulation(algebraic(), SimulationConfig(dt=0.01, t_end=2.0, cosim=CosimConfig(
        H=0.01, scheme=scheme, extrapolation=extrapolation, tolerance=1e-14)))
    logs = co.run()
    assert co.master.couplings == [["a", "b"]] or co.master.couplings == [["b", "a"]]
    assert sorted(logs) == sorted(mono)     # the units' ports a.y, b.y included
    for key in mono:
        np.testing.assert_allclose(logs[key], mono[key], rtol=0, atol=1e-12, err_msg=key)


def test_an_output_that_ignores_its_units_inputs_closes_no_algebraic_loop():
    """The top-level unit drives a feedthrough unit with a constant and takes its output
    back through a gain (feedthrough): a cycle of units, but no port waits for itself. It is
    no coupling (nothing to iterate, no rollback asked of the units) and the run is the
    monolithic one, bit for bit, under both schemes."""
    from blocks import Constant

    def model():
        m = Model("m")
        a = Subsystem("a", atomic=True, dt=0.01)
        a.add(Inport("u"), Gain("g", 3.0), Outport("y"))
        a.connect("u.out", "g.in")
        a.connect("g.out", "y.in")
        b = Subsystem("b", atomic=True, dt=0.01, solver="RK4")
        b.add(Inport("u"), Integrator("x", 0.0), Outport("y"))
        b.connect("u.out", "x.in")
        b.connect("x.out", "y.in")
        m.add(Constant("c", 2.0), a, Gain("k", 0.5), b)
        m.connect("c.out", "a.u")
        m.connect("a.y", "k.in")
        m.connect("k.out", "b.u")
        return m

    cfg = dict(dt=0.01, t_end=0.5, solver="RK4")
    mono = Simulator(model(), SimulationConfig(**cfg)).run()
    for scheme in ("jacobi", "gauss-seidel"):
        co = CoSimulation(model(), SimulationConfig(**cfg, cosim=CosimConfig(H=0.01,
                                                                             scheme=scheme)))
        logs = co.run()
        assert co.master.couplings == []
        assert co.master.refresh_levels == [["a"], ["main"]]
        np.testing.assert_array_equal(logs["b/x.out"], mono["b/x.out"])
        np.testing.assert_allclose(logs["b/x.out"][-1, 0], 0.5 * 3.0 * 2.0 * 0.5, rtol=1e-12)
