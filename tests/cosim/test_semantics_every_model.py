"""The claims of docs/cosim-semantics.md on models built for these tests (not the examples),
against outside oracles: the monolithic Simulator run, ``solve_ivp``, closed forms and the
slopes of log(error) against log(H). Each test names the claim it holds."""

import math

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from blocks import Constant, Gain, Sine, Sum
from blocks.continuous import Integrator
from cosim import (CosimConfig, Inport, Model, ModelError, Outport, SimulationConfig,
                   Simulator, Subsystem)
from cosim.errors import ConvergenceError
from cosim.master.cosimulation import CoSimulation


def cosim(model, H, dt, t_end, solver="RK4", **cosim_options):
    """The model co-simulated at macro step ``H``; returns (CoSimulation, logs)."""
    co = CoSimulation(model, SimulationConfig(dt=dt, t_end=t_end, solver=solver,
                                              cosim=CosimConfig(H=H, **cosim_options)))
    try:
        return co, co.run()
    finally:
        co.close()


def max_difference(co, mono):
    keys = [k for k in mono if k in co]
    assert keys
    return max(float(np.max(np.abs(co[k] - mono[k]))) for k in keys)


# -- a held output inside an iterated coupling -----------------------------------------------

def held_coupling(H):
    """y1 = 0.5 u + 0.3 in a unit discrete at H; y2 = -0.8 y1 + z with z' = -z + y1 in a
    continuous unit (RK4 at H); u = y2: an algebraic coupling whose discrete output is held
    over each macro step."""
    m = Model("held")
    a = Subsystem("a", atomic=True, dt=H)
    a.add(Inport("u"), Gain("g", 0.5), Constant("c", 0.3), Sum("s", "++"), Outport("y1"))
    a.connect("u.out", "g.in")
    a.connect("g.out", "s.in1")
    a.connect("c.out", "s.in2")
    a.connect("s.out", "y1.in")
    b = Subsystem("b", atomic=True, dt=H, solver="RK4")
    b.add(Inport("y1"), Integrator("z", 0.0), Gain("k", -1.0), Sum("s", "++"),
          Gain("m", -0.8), Sum("o", "++"), Outport("y2"))
    b.connect("y1.out", "s.in1", "m.in")
    b.connect("k.out", "s.in2")
    b.connect("s.out", "z.in")
    b.connect("z.out", "k.in", "o.in2")
    b.connect("m.out", "o.in1")
    b.connect("o.out", "y2.in")
    m.add(a, b)
    m.connect("a.y1", "b.y1")
    m.connect("b.y2", "a.u")
    return m


@pytest.mark.parametrize("scheme", ["jacobi", "gauss-seidel"])
@pytest.mark.parametrize("extrapolation", [0, 2])
@pytest.mark.parametrize("H", [0.04, 0.01])
def test_a_held_output_stays_at_its_value_at_T_inside_an_iterated_coupling(scheme,
                                                                          extrapolation, H):
    # Before: the held y1 ramped to its candidate at T+H inside the step (8.8e-4 at
    # H = 0.04, falling as O(H)); the monolithic run holds it at y1(T).
    mono = Simulator(held_coupling(H), SimulationConfig(dt=H, t_end=2.0, solver="RK4",
                                                        tolerance_fpi=1e-14)).run()
    co, logs = cosim(held_coupling(H), H, H, 2.0, scheme=scheme, extrapolation=extrapolation,
                     tolerance=1e-14)
    assert co.master.couplings
    assert max_difference(logs, mono) <= 1e-12
