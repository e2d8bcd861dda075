"""The compiled exchange of in-process units against the protocol path: bit for bit.

Every co-simulation here runs twice, ``CosimConfig(compiled=True)`` (the default: the
macro-step program of in-process units written as one generated loop) and ``compiled=False``
(and, where named, ``engine=False``: every exchange through the protocol, the reference), and
every logged sample, step record, statistic and error must be identical — for every scheme,
extrapolation order, feedthrough mode, refresh level (the relog level too) and iterated
coupling, on models built here and the engine's; and where the co-simulation is exact, equal
to the monolithic run.
"""

import numpy as np
import pytest

from blocks import Constant, Gain, Product, Sine, Step, Sum, UnitDelay
from blocks.continuous import Integrator
from cosim import (CosimConfig, Inport, Model, Outport, SimulationConfig, SimulationError,
                   Simulator, Subsystem)
from cosim.errors import ConvergenceError
from cosim.master import inlined
from cosim.master.cosimulation import CoSimulation
from tests.cluster import scenarios
from tests.cluster.scenarios import DT, motor_pi
from tests.cosim.test_engine import MODELS, coupled
from tests.cosim.test_semantics_every_model import held_coupling, max_difference


def run_both(build, config: SimulationConfig, drive=None):
    """``(compiled, protocol)`` co-simulations of ``build()`` run by ``drive`` (default:
    ``run()``), each with its logs."""
    out = []
    for compiled in (True, False):
        cs = CoSimulation(build(), SimulationConfig(**{
            **config.__dict__, "cosim": CosimConfig(**{**config.cosim.__dict__,
                                                      "compiled": compiled})}))
        logs = drive(cs) if drive else cs.run()
        out.append((cs, logs))
    return out


def assert_identical(a, b):
    (ca, la), (cb, lb) = a, b
    assert set(la) == set(lb)
    for key in la:
        np.testing.assert_array_equal(la[key], lb[key], err_msg=key, strict=True)
        np.testing.assert_array_equal(la.time_of(key), lb.time_of(key), err_msg=key)
    assert ca.step_log == cb.step_log
    assert ca.stats == cb.stats
    assert ca.t == cb.t
    ma, mb = ca.master, cb.master
    assert ma.values.keys() == mb.values.keys()
    for key in ma.values:
        np.testing.assert_array_equal(ma.values[key], mb.values[key], strict=True)
    assert {k: [(t, float(v[0])) for t, v in p] for k, p in ma.history.points.items()} == \
        {k: [(t, float(v[0])) for t, v in p] for k, p in mb.history.points.items()}


def motor(scheme, extrapolation, steps=600, **kw):
    return SimulationConfig(dt=DT, t_end=steps * DT, cosim=CosimConfig(
        H=DT, scheme=scheme, extrapolation=extrapolation, **kw))


@pytest.mark.parametrize("scheme", ["jacobi", "gauss-seidel"])
@pytest.mark.parametrize("extrapolation", [0, 1, 2])
def test_motor_pi_is_bit_identical_to_the_protocol(scheme, extrapolation):
    a, b = run_both(motor_pi, motor(scheme, extrapolation))
    assert_identical(a, b)
    assert a[0].master.compiled.steps > 590          # it did run compiled
    assert b[0].master.compiled is None


def chain():
    """A plant (integrator, no feedthrough) closed through two feedthrough units in a chain:
    two refresh levels, a multirate unit (its step half the others'), held and continuous
    outputs."""
    m = Model("chain")
    plant = Subsystem("plant", atomic=True, dt=0.002, solver="RK4")
    plant.add(Inport("u"), Integrator("x", 1.0), Gain("k", -0.5), Sum("s", "++"),
              Outport("y"))
    plant.connect("u.out", "s.in1")
    plant.connect("x.out", "k.in", "y.in")
    plant.connect("k.out", "s.in2")
    plant.connect("s.out", "x.in")
    f1 = Subsystem("f1", atomic=True, dt=0.001)
    f1.add(Inport("u"), Inport("w"), Gain("g", 2.0), Sum("s", "+-"), Outport("y"))
    f1.connect("u.out", "g.in")
    f1.connect("g.out", "s.in1")
    f1.connect("w.out", "s.in2")
    f1.connect("s.out", "y.in")
    f2 = Subsystem("f2", atomic=True, dt=0.002)
    f2.add(Inport("u"), Gain("g", -0.7), Outport("y"))
    f2.connect("u.out", "g.in")
    f2.connect("g.out", "y.in")
    m.add(plant, f1, f2, Sine("src", frequency=3.0))
    m.connect("plant.y", "f1.u")
    m.connect("src.out", "f1.w")
    m.connect("f1.y", "f2.u")
    m.connect("f2.y", "plant.u")
    return m


@pytest.mark.parametrize("scheme", ["jacobi", "gauss-seidel"])
@pytest.mark.parametrize("extrapolation", [0, 1, 2])
def test_refresh_levels_multirate_and_a_short_last_step(scheme, extrapolation):
    # H = 4 ms (2 and 4 ticks per unit); t_end 0.502 s ends with a 2 ms macro step (0.503
    # is off the units' common 2 ms grid: refused, as no unit could stop there).
    config = SimulationConfig(dt=0.001, t_end=0.502, cosim=CosimConfig(
        H=0.004, scheme=scheme, extrapolation=extrapolation, log_every=7))
    a, b = run_both(chain, config)
    assert a[0].master.graph.refresh_levels == [["f1"], ["f2"]]
    assert a[0].step_log[-1].H != 0.004                 # the last step was the short one
    assert_identical(a, b)
    assert a[0].master.compiled.steps >= 120


@pytest.mark.parametrize("model", ["motor", "coupled"])
def test_stepping_by_hand_checkpoints_and_resuming(tmp_path, model):
    config = motor("gauss-seidel", 2, steps=400, checkpoint_every=30, log_every=11)
    make = motor_pi
    if model == "coupled":
        make = coupled
        config = SimulationConfig(dt=0.0025, t_end=1.0, cosim=CosimConfig(
            H=0.01, extrapolation=2, checkpoint_every=30, log_every=11))

    def drive(cs):
        for _ in range(5):
            cs.step()                                   # protocol steps first
        cs.run(t_end=0.2)
        cs.save_checkpoint(tmp_path / f"cp{cs.master.compiled is not None}")
        return cs.run()

    a, b = run_both(make, config, drive)
    assert_identical(a, b)
    assert a[0].master.compiled.steps > 50
    for compiled in (True, False):                      # resumed from the file: the same
        other = CoSimulation(make(), SimulationConfig(**{
            **config.__dict__, "cosim": CosimConfig(**{**config.cosim.__dict__,
                                                      "compiled": compiled})}))
        other.load_checkpoint(tmp_path / f"cp{a[0].master.compiled is not None}")
        logs = other.run()
        for key in logs:
            n = len(logs[key])
            np.testing.assert_array_equal(logs[key], a[1][key][-n:], err_msg=key)


def test_units_not_on_the_generated_path_fall_back_to_the_protocol():
    # The interpreter (fast=False) and an adaptive solver leave the generated path.
    for config in (SimulationConfig(dt=0.002, t_end=0.3, fast=False,
                                    cosim=CosimConfig(H=0.004, extrapolation=1)),
                   SimulationConfig(dt=0.002, t_end=0.3,
                                    cosim=CosimConfig(H=0.004, extrapolation=1))):
        a, b = run_both(lambda: scenarios.three_units(solvers=("RK4", "RK45")), config)
        assert_identical(a, b)
        assert a[0].master.compiled.steps == 0


def divider(step_time, inside):
    """A unit dividing by a step signal that falls to zero at ``step_time``
    (ZeroDivisionError in the generated code): its own (``inside``), else its input, which
    changes at a macro point (the error is then the unit's refresh there)."""
    m = Model("div")
    d = Subsystem("d", atomic=True, dt=0.001)
    d.add(Inport("u", initial=1.0), Product("p", "/"), Sum("y_", "++"), Outport("y"))
    d.connect("p.out", "y_.in1")
    d.connect("y_.out", "y.in")
    src = Step("s", step_time=step_time, initial=1.0, final=0.0)
    if inside:
        d.add(src)
        d.connect("s.out", "p.in1")
        d.connect("u.out", "y_.in2")
        m.add(d, Sine("src", frequency=2.0))
        m.connect("src.out", "d.u")
    else:
        d.add(Sine("src", frequency=2.0))
        d.connect("u.out", "p.in1")
        d.connect("src.out", "y_.in2")
        m.add(d, src)
        m.connect("s.out", "d.u")
    m.add(Gain("g", 1.0))
    m.connect("d.y", "g.in")
    return m


@pytest.mark.parametrize("H,step_time,inside,call", [(0.002, 0.1, True, "DoStep"),
                                                     (0.004, 0.101, True, "DoStep"),
                                                     (0.002, 0.1, False, "RefreshOutputs")])
def test_an_error_in_a_unit_is_the_protocol_paths_error(H, step_time, inside, call):
    errors, states = [], []
    for compiled, engine in ((True, True), (False, False), (False, True)):
        cs = CoSimulation(divider(step_time, inside), SimulationConfig(
            dt=0.001, t_end=0.3, cosim=CosimConfig(H=H, compiled=compiled, engine=engine)))
        with pytest.raises(SimulationError) as info:
            cs.run()
        errors.append((str(info.value), info.value.t))
        states.append((cs.t, cs.stats, list(cs.step_log)))
    assert errors[0] == errors[1] == errors[2]
    assert f"unit 'd', {call}" in errors[0][0] and "ZeroDivisionError" in errors[0][0]
    assert states[0] == states[2]               # the generated loop runs the engine's program
    if call == "DoStep":
        assert states[2] == states[1]
    else:
        # The program refreshes within the macro step: a failing refresh fails the macro
        # step, so the master stays at its start (the protocol path had accepted it; neither
        # records the step, whose record is complete only once it is refreshed).
        t, stats, records = states[1]
        assert states[2][0] == pytest.approx(t - H) and states[2][2] == records


def mixed(H=0.01):
    """Every kind of unit at once: a continuous plant (RK4, no feedthrough, at H/4) fed by a
    top-level Sine through a feedthrough unit at H/2 (a refresh level), two feedthrough units
    coupled algebraically (one with a state), and a discrete unit at H (a held output, a unit
    delay and a feedthrough gain) closing the loop back into the plant."""
    m = Model("mixed")
    plant = Subsystem("plant", atomic=True, dt=H / 4, solver="RK4")
    plant.add(Inport("u"), Integrator("x", 0.5), Gain("k", -2.0), Sum("s", "++"), Outport("y"))
    plant.connect("u.out", "s.in1")
    plant.connect("x.out", "k.in", "y.in")
    plant.connect("k.out", "s.in2")
    plant.connect("s.out", "x.in")
    pre = Subsystem("pre", atomic=True, dt=H / 2)
    pre.add(Inport("a"), Inport("b"), Gain("g", 1.5), Sum("s", "+-"), Outport("y"))
    pre.connect("a.out", "g.in")
    pre.connect("g.out", "s.in1")
    pre.connect("b.out", "s.in2")
    pre.connect("s.out", "y.in")
    c1 = Subsystem("c1", atomic=True, dt=H / 4, solver="RK4")
    c1.add(Inport("u"), Inport("v"), Gain("g", 0.6), Integrator("z", 0.0), Sum("s", "+++"),
           Outport("y"))
    c1.connect("u.out", "s.in1", "z.in")
    c1.connect("v.out", "g.in")
    c1.connect("g.out", "s.in2")
    c1.connect("z.out", "s.in3")
    c1.connect("s.out", "y.in")
    c2 = Subsystem("c2", atomic=True, dt=H / 4)
    c2.add(Inport("u"), Gain("g", -0.5), Outport("y"))
    c2.connect("u.out", "g.in")
    c2.connect("g.out", "y.in")
    d = Subsystem("d", atomic=True, dt=H)
    d.add(Inport("u"), UnitDelay("z", 0.1), Gain("g", 0.3), Sum("s", "++"), Outport("y"))
    d.connect("u.out", "z.in", "g.in")
    d.connect("z.out", "s.in1")
    d.connect("g.out", "s.in2")
    d.connect("s.out", "y.in")
    m.add(plant, pre, c1, c2, d, Sine("src", frequency=1.1))
    m.connect("plant.y", "pre.a")
    m.connect("src.out", "pre.b")
    m.connect("pre.y", "c1.u")
    m.connect("c2.y", "c1.v")
    m.connect("c1.y", "c2.u", "d.u")
    m.connect("d.y", "plant.u")
    return m


def nested_loop(H=0.01):
    """Two units coupled algebraically, one holding an atomic subsystem (a continuous lag
    inlined into its generated code: its state is kept and restored with the unit's), the
    other a unit delay."""
    m = Model("nested")
    a = Subsystem("a", atomic=True, dt=H / 4, solver="RK4")
    lag = Subsystem("lag", atomic=True, dt=H / 4, solver="RK4")
    lag.add(Inport("u"), Integrator("z", 0.2), Gain("w", -5.0), Sum("s", "++"), Outport("y"))
    lag.connect("u.out", "s.in1")
    lag.connect("w.out", "s.in2")
    lag.connect("s.out", "z.in")
    lag.connect("z.out", "w.in", "y.in")
    a.add(Inport("u"), lag, Gain("k", 0.5), Sum("y", "++"), Outport("y_"))
    a.connect("u.out", "lag.u", "k.in")
    a.connect("lag.y", "y.in2")
    a.connect("k.out", "y.in1")
    a.connect("y.out", "y_.in")
    b = Subsystem("b", atomic=True, dt=H / 4)
    b.add(Inport("u"), Gain("k", -0.6), UnitDelay("d", 0.3), Sum("y", "++"), Outport("y_"))
    b.connect("u.out", "k.in", "d.in")
    b.connect("k.out", "y.in1")
    b.connect("d.out", "y.in2")
    b.connect("y.out", "y_.in")
    m.add(a, b)
    m.connect("a.y_", "b.u")
    m.connect("b.y_", "a.u")
    return m


SHAPES = {**MODELS, "mixed": (mixed, 0.01), "nested": (nested_loop, 0.01)}


def both(make, H, **options):
    """The co-simulation of ``make()`` over 40 macro steps through the generated loop and
    through the protocol's separate requests (``engine=False``)."""
    out = []
    for compiled in (True, False):
        cs = CoSimulation(make(), SimulationConfig(dt=H / 4, t_end=40 * H, cosim=CosimConfig(
            H=H, compiled=compiled, engine=compiled, **options)))
        out.append((cs, cs.run()))
    return out


@pytest.mark.parametrize("model", sorted(SHAPES))
@pytest.mark.parametrize("scheme", ["jacobi", "gauss-seidel"])
@pytest.mark.parametrize("extrapolation", [0, 1, 2])
@pytest.mark.parametrize("feedthrough", ["resolve", "delay"])
@pytest.mark.parametrize("inline", ["small", "all"])
def test_every_shape_takes_the_generated_loop_bit_for_bit(model, scheme, extrapolation,
                                                          feedthrough, inline, monkeypatch):
    """``inline``: the small units' step functions inlined into the loop (the default), or
    every one that can be."""
    if inline == "all":
        monkeypatch.setattr(inlined, "SMALL", 10**9)
    make, H = SHAPES[model]
    a, b = both(make, H, scheme=scheme, extrapolation=extrapolation, feedthrough=feedthrough,
                log_every=7)
    assert_identical(a, b)
    # Only the started-up first step of an order-2 run (and the steps before the history
    # is long enough to extrapolate) go through the engine; and a unit holding atomic
    # subsystems that is logged at T+H as its step left it (delayed feedthrough): those log
    # their final outputs only through RefreshOutputs (DirectStep.refreshes).
    steps = a[0].master.compiled.steps
    assert steps == 0 if (model, feedthrough) == ("nested", "delay") else \
        steps >= 40 - extrapolation


@pytest.mark.parametrize("small", [None, 0, 10**9])
def test_small_units_are_inlined_into_the_loop_except_coupled_ones(small, monkeypatch):
    """A generated unit whose macro step runs few statements has them in the loop itself
    (no call of its step function), but for the units of an iterated coupling (rolled back
    on their side between iterations); bit for bit the protocol path either way."""
    if small is not None:
        monkeypatch.setattr(inlined, "SMALL", small)
    a, b = both(mixed, 0.01, extrapolation=1)
    assert_identical(a, b)
    ex = a[0].master.compiled
    assert ex.coupled and ex.steps >= 39
    seen = set()
    for i, u in enumerate(ex.names):
        d = ex.units[u].direct()
        inline = u not in ex.coupled and \
            inlined.InlinedUnit.of(i, ex.units[u], d, round(ex.H / d.dt)) is not None
        if small == 10**9:
            assert inline == (u not in ex.coupled), u
        seen.add(inline)
        assert (f" = f{i}(" in ex.source) != inline, u
        assert (f"u{i}_k += 1" in ex.source) == inline, u
    assert seen == ({False} if small == 0 else {True, False})


def test_the_mixed_model_iterates_refreshes_and_relogs():
    (cs, _), _ = both(mixed, 0.01, scheme="gauss-seidel", extrapolation=1)
    m = cs.master
    assert m.couplings == [["c1", "c2"]] and m.refresh_levels
    assert cs.stats["iterations"] > 2 * cs.stats["macro_steps"]


@pytest.mark.parametrize("acceleration", ["none", "aitken", "anderson", "newton"])
def test_iterated_coupling_accelerations(acceleration):
    a, b = both(coupled, 0.01, acceleration=acceleration, extrapolation=1, relaxation=0.9,
                tolerance=1e-9)
    assert_identical(a, b)
    assert a[0].stats["iterations"] > a[0].stats["macro_steps"] and \
        a[0].master.compiled.steps >= 39


def test_an_uniterated_coupling_records_its_residual():
    with pytest.warns(UserWarning, match="without iteration"):
        a, b = both(coupled, 0.01, iterate=False, extrapolation=2)
    assert_identical(a, b)
    assert {r.status.value for r in a[0].step_log} == {"uniterated"}
    assert all(r.residual > 0 for r in a[0].step_log[2:])


def stiffening(H=0.01):
    """A feedthrough unit (y = u + 0.2) coupled to one whose gain grows with time (y = -2t
    u): plain fixed-point iteration converges ever more slowly, until it cannot within
    ``max_iterations`` (the loop gain passes -1 at t = 0.5)."""
    m = Model("stiffening")
    a = Subsystem("a", atomic=True, dt=H / 4)
    a.add(Inport("u"), Constant("c", 0.2), Sum("s", "++"), Outport("y"))
    a.connect("u.out", "s.in1")
    a.connect("c.out", "s.in2")
    a.connect("s.out", "y.in")
    b = Subsystem("b", atomic=True, dt=H / 4, solver="RK4")
    b.add(Inport("u"), Constant("two", 2.0), Integrator("g", 0.0), Product("p", "**"),
          Gain("n", -1.0), Outport("y"))
    b.connect("two.out", "g.in")
    b.connect("u.out", "p.in1")
    b.connect("g.out", "p.in2")
    b.connect("p.out", "n.in")
    b.connect("n.out", "y.in")
    m.add(a, b)
    m.connect("a.y", "b.u")
    m.connect("b.y", "a.u")
    return m


def test_a_coupling_that_does_not_converge_is_the_protocol_paths():
    a, b = both(coupled, 0.01, on_nonconvergence="continue", max_iterations=2,
                tolerance=1e-15, extrapolation=1)
    assert_identical(a, b)
    assert {r.status.value for r in a[0].step_log} == {"continued"}
    errors = []
    for compiled in (True, False):
        cs = CoSimulation(stiffening(), SimulationConfig(dt=0.0025, t_end=1.0, cosim=CosimConfig(
            H=0.01, compiled=compiled, engine=compiled, extrapolation=1, acceleration="none")))
        with pytest.raises(ConvergenceError) as info:
            cs.run()
        errors.append((str(info.value), info.value.t, cs.t, cs.stats, list(cs.step_log)))
        if compiled:
            assert cs.master.compiled.steps > 20
    assert errors[0] == errors[1]
    assert "a <-> b" in errors[0][0] and 0.2 < errors[0][1] < 1.0


def test_an_exact_iterated_coupling_is_the_monolithic_run():
    # A unit discrete at H coupled algebraically to a continuous one: the co-simulation
    # holds the discrete output over each macro step as the monolithic run does, so the
    # iterated coupling reproduces it (to the iteration's tolerance).
    H = 0.01
    mono = Simulator(held_coupling(H), SimulationConfig(dt=H, t_end=1.0, solver="RK4",
                                                        tolerance_fpi=1e-14)).run()
    for scheme in ("jacobi", "gauss-seidel"):
        co = CoSimulation(held_coupling(H), SimulationConfig(
            dt=H, t_end=1.0, solver="RK4", cosim=CosimConfig(H=H, scheme=scheme,
                                                             tolerance=1e-14)))
        logs = co.run()
        assert co.master.compiled.steps == 100
        assert max_difference(logs, mono) <= 1e-12


class Watch:
    """An observer of every chunk (a dashboard's place)."""

    stride = 10

    def __init__(self):
        self.seen = 0

    def observe(self, master):
        self.seen += 1


def test_step_times_per_unit_when_observed():
    cs = CoSimulation(coupled(), SimulationConfig(dt=0.0025, t_end=0.4, cosim=CosimConfig(
        H=0.01, extrapolation=1)))
    cs.master.initialize()
    watch = cs.master.observer = Watch()
    cs.run()
    m = cs.master
    assert m.compiled.steps == 39 and watch.seen >= 4
    times = m.calls.step_times
    # One entry per step call: each coupling evaluation of a and b, each step of c (the
    # engine's first step too), each at its macro step's start.
    assert len(times["c"][0]) == 40
    assert len(times["a"][0]) == len(times["b"][0]) == cs.stats["iterations"]
    assert sorted(set(times["c"][0])) == [r.t for r in cs.step_log]
    assert all(s > 0 for _, secs in times.values() for s in secs)


@pytest.mark.parametrize("log_every", [1, 7, 8, 40, 100])
@pytest.mark.parametrize("by_hand", [False, True])
def test_logs_are_collected_as_between_protocol_steps(log_every, by_hand):
    # In the held coupling the unit refreshed at T+H in the last iteration logs the
    # candidate there, which Master.finish replaces by the refresh for the outputs: a
    # sample already collected stays as collected, so the generated loop must collect
    # where the protocol path does (its chunks end at the last log_every count before a
    # short tail), whether the run goes to its end or is advanced by hand.
    def drive(cs):
        if not by_hand:
            return cs.run()
        cs.master.advance(until=0.23)
        cs.master.advance(until=0.4)
        return cs.master.finish()

    a, b = run_both(lambda: held_coupling(0.01), SimulationConfig(
        dt=0.01, t_end=0.4, solver="RK4", cosim=CosimConfig(H=0.01, log_every=log_every)),
        drive)
    assert_identical(a, b)
    assert a[0].master.compiled.steps == 40
