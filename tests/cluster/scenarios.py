"""Co-simulation scenarios shared by the backend tests (built fresh for every run)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import numpy as np

from blocks import DiscreteIntegrator, Gain, Saturation, Sine, Step, Sum
from blocks.continuous import Integrator
from cosim import Block, Inport, Model, Outport, Subsystem
from cosim.model.registry import register_block_type


#: Base step of :func:`motor_pi`'s units (s).
DT = 0.001


def motor_pi(atomic: bool = True) -> Model:
    """DC motor under PI speed control; ``atomic`` makes motor and controller units."""
    m = Model("dc_motor_pi", parameters={"R": 1.0, "L": 0.5, "Kt": 0.01, "Ke": 0.01,
                                          "J": 0.01, "b": 0.1})
    motor = Subsystem("motor", atomic=atomic, dt=DT if atomic else None,
                      solver="RK4" if atomic else None)
    motor.add(Inport("v"), Inport("load"), Sum("vsum", "+--"), Gain("ke", "=Ke"),
              Gain("rl", "=R"), Gain("invL", "=1/L"), Integrator("i", 0.0), Gain("kt", "=Kt"),
              Sum("tsum", "+--"), Gain("bw", "=b"), Gain("invJ", "=1/J"), Integrator("w", 0.0),
              Outport("speed"))
    motor.connect("v.out", "vsum.in1")
    motor.connect("ke.out", "vsum.in2")
    motor.connect("rl.out", "vsum.in3")
    motor.connect("vsum.out", "invL.in")
    motor.connect("invL.out", "i.in")
    motor.connect("i.out", "rl.in", "kt.in")
    motor.connect("kt.out", "tsum.in1")
    motor.connect("bw.out", "tsum.in2")
    motor.connect("load.out", "tsum.in3")
    motor.connect("tsum.out", "invJ.in")
    motor.connect("invJ.out", "w.in")
    motor.connect("w.out", "ke.in", "bw.in", "speed.in")
    ctrl = Subsystem("ctrl", atomic=atomic, dt=DT if atomic else None)
    ctrl.add(Inport("ref"), Inport("meas"), Sum("e", "+-"), Gain("kp", 100.0),
             DiscreteIntegrator("ei", gain=200.0, sample_time=DT), Sum("u", "++"),
             Saturation("sat", lower=-24.0, upper=24.0), Outport("v"))
    ctrl.connect("ref.out", "e.in1")
    ctrl.connect("meas.out", "e.in2")
    ctrl.connect("e.out", "kp.in", "ei.in")
    ctrl.connect("kp.out", "u.in1")
    ctrl.connect("ei.out", "u.in2")
    ctrl.connect("u.out", "sat.in")
    ctrl.connect("sat.out", "v.in")
    m.add(motor, ctrl, Step("ref", step_time=0.05, final=1.0),
          Step("load", step_time=0.5, final=0.005))
    m.connect("ref.out", "ctrl.ref")
    m.connect("motor.speed", "ctrl.meas")
    m.connect("ctrl.v", "motor.v")
    m.connect("load.out", "motor.load")
    return m


def three_units(atomic=True, solvers=("RK4", "RK45")):
    """Plant a (x' = u - x), integrator b, and the remaining blocks (source, error sum).

    ``solvers`` of a and b, each with a 2 ms step; None: both take the run's configuration.
    ``atomic=False`` makes a and b virtual (the monolithic reference).
    """
    own = [dict(dt=0.002, solver=s) if atomic and solvers else {} for s in solvers or (0, 0)]
    m = Model("three")
    a = Subsystem("a", atomic=atomic, **own[0])
    a.add(Inport("u"), Integrator("x", 1.0), Gain("k", -1.0), Sum("s", "++"), Outport("y"))
    a.connect("u.out", "s.in1")
    a.connect("x.out", "k.in", "y.in")
    a.connect("k.out", "s.in2")
    a.connect("s.out", "x.in")
    b = Subsystem("b", atomic=atomic, **own[1])
    b.add(Inport("u"), Integrator("x", 0.0), Outport("y"))
    b.connect("u.out", "x.in")
    b.connect("x.out", "y.in")
    m.add(a, b, Sine("src", frequency=0.3), Sum("e", "+-"))
    m.connect("src.out", "e.in1")
    m.connect("b.y", "e.in2")
    m.connect("e.out", "a.u")
    m.connect("a.y", "b.u")
    return m


def algebraic():
    """Two static units in a feedthrough loop (an algebraic coupling, iterated)."""
    m = Model("alg")
    for name, gain, phase in (("a", 0.5, 0.0), ("b", -0.8, np.pi / 2)):
        s = Subsystem(name, atomic=True, dt=0.01)
        s.add(Inport("u"), Gain("g", gain), Sine("s", frequency=1 / (2 * np.pi), phase=phase),
              Sum("y_", "++"), Outport("y"))
        s.connect("u.out", "g.in")
        s.connect("g.out", "y_.in1")
        s.connect("s.out", "y_.in2")
        s.connect("y_.out", "y.in")
        m.add(s)
    m.connect("a.y", "b.u")
    m.connect("b.y", "a.u")
    return m


@register_block_type
class Crash(Block):
    """Passes its input through; kills its own process once, at ``t_crash``.

    The marker file makes the crash happen once: after the unit is recreated, it runs on.
    """

    def __init__(self, name, t_crash=0.5, marker=""):
        super().__init__(name)
        self.t_crash = t_crash
        self.marker = marker

    def output_update(self, t, dt):
        if t >= self.t_crash and self.marker and not Path(self.marker).exists():
            Path(self.marker).write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
        self.outputs["out"] = self.inputs["in"]


def crashing(marker: str):
    """``three_units`` whose unit b dies (SIGKILL) at t = 0.5 the first time."""
    m = three_units()
    b = m["b"]
    b.connections = [c for c in b.connections if c.dst != "y.in"]
    b.add(Crash("crash", 0.5, marker))
    b.connect("x.out", "crash.in")
    b.connect("crash.out", "y.in")
    return m


def crashing_algebraic(marker: str, t_crash: float = 0.5):
    """``algebraic`` whose unit b dies (SIGKILL) at ``t_crash`` the first time, in the
    middle of its coupling's iterations (its output passes a :class:`Crash`)."""
    m = algebraic()
    b = m["b"]
    b.connections = [c for c in b.connections if c.dst != "y.in"]
    b.add(Crash("crash", t_crash, marker))
    b.connect("y_.out", "crash.in")
    b.connect("crash.out", "y.in")
    return m


@register_block_type
class Pace(Block):
    """Passes its input through; sleeps ``delay`` s of wall time once per ``every`` s of
    simulated time from ``start`` on (a unit slow enough to lose its node mid-run; the
    numbers unchanged)."""

    def __init__(self, name, delay=0.1, every=0.02, start=0.0):
        super().__init__(name)
        self.delay = delay
        self.every = every
        self.start = start
        self.last = -1

    def output_update(self, t, dt):
        k = int(round(t / self.every, 9))
        if k != self.last and t >= self.start:
            self.last = k
            time.sleep(self.delay)
        self.outputs["out"] = self.inputs["in"]


def paced(delay: float, start: float = 0.0) -> Model:
    """``three_units`` whose unit a takes ``delay`` s of wall time per 20 ms simulated (from
    ``start`` on)."""
    m = three_units()
    a = m["a"]
    a.connections = [c for c in a.connections if c.dst != "y.in"]
    a.add(Pace("pace", delay, start=start))
    a.connect("x.out", "pace.in")
    a.connect("pace.out", "y.in")
    return m


@register_block_type
class Fail(Block):
    """Passes its input through; raises from ``t_fail`` on (a simulation error)."""

    def __init__(self, name, t_fail=0.5):
        super().__init__(name)
        self.t_fail = t_fail

    def output_update(self, t, dt):
        if t >= self.t_fail:
            raise ValueError("the pass-through gave up")
        self.outputs["out"] = self.inputs["in"]


def failing(t_fail: float) -> Model:
    """``three_units`` whose unit b raises from ``t_fail`` on."""
    m = three_units()
    b = m["b"]
    b.connections = [c for c in b.connections if c.dst != "y.in"]
    b.add(Fail("fail", t_fail))
    b.connect("x.out", "fail.in")
    b.connect("fail.out", "y.in")
    return m


def wide(chains: int = 6, length: int = 6) -> Model:
    """A source feeding ``chains`` parallel chains of gains and lags (a model to split)."""
    from blocks import FirstOrderLag
    m = Model("wide")
    m.add(Sine("src", amplitude=1.0, frequency=0.5))
    for c in range(chains):
        s = Subsystem(f"c{c}")
        s.add(Inport("u"), Outport("y"))
        prev = "u.out"
        for i in range(length // 2):
            s.add(Gain(f"k{i}", 1.0 + 0.1 * c), FirstOrderLag(f"lag{i}", tau=0.05 + 0.01 * i))
            s.connect(prev, f"k{i}.in")
            s.connect(f"k{i}.out", f"lag{i}.in")
            prev = f"lag{i}.out"
        s.connect(prev, "y.in")
        m.add(s)
        m.connect("src.out", f"c{c}.u")
    return m
