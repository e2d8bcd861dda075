"""The compiled exchange of in-process units against the protocol path: bit for bit.

Every co-simulation here runs twice, ``CosimConfig(compiled=True)`` (the default: plain macro
steps of in-process units through one generated loop) and ``compiled=False`` (every exchange
through the protocol, the reference), and every logged sample, step record, statistic and
error must be identical.
"""

import numpy as np
import pytest

from blocks import Gain, Product, Sine, Step, Sum
from blocks.continuous import Integrator
from cosim import (CosimConfig, Inport, Model, Outport, SimulationConfig, SimulationError,
                   Subsystem)
from cosim.master.cosimulation import CoSimulation
from tests.cluster import scenarios
from tests.cluster.scenarios import DT, motor_pi


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


def test_stepping_by_hand_checkpoints_and_resuming(tmp_path):
    config = motor("gauss-seidel", 2, steps=400, checkpoint_every=30, log_every=11)

    def drive(cs):
        for _ in range(5):
            cs.step()                                   # protocol steps first
        cs.run(t_end=0.2)
        cs.save_checkpoint(tmp_path / f"cp{cs.master.compiled is not None}")
        return cs.run()

    a, b = run_both(motor_pi, config, drive)
    assert_identical(a, b)
    for compiled in (True, False):                      # resumed from the file: the same
        other = CoSimulation(motor_pi(), SimulationConfig(**{
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
        # step, so the master stays at its start (the protocol path had accepted it).
        t, stats, records = states[1]
        assert states[2][0] == pytest.approx(t - H) and states[2][2] == records[:-1]
