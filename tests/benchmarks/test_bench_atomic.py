"""Benchmark (issue 28, item 3): a monolithic run with atomic subsystems against the same
model flattened, and against the path it took before (the parent on the interpreter, each
atomic subsystem's plan on its own generated code, called twice per hit).

Two models, 10 s at a base step of 2.5 ms (4,000 ticks), RK4:

- ``loop3``: reference -> error -> discrete PI with feedthrough (10 ms) -> mass-spring-damper
  (continuous, RK4 at 2.5 ms) -> feedthrough sensor filter (5 ms) -> error; three atomic
  subsystems at three rates.
- ``nested``: the same loop, the controller an atomic subsystem (2.5 ms) holding the atomic PI
  (10 ms) and an atomic continuous actuator lag (RK4 at 2.5 ms).

"flattened" is the same model with virtual subsystems and each block at its subsystem's rate
(the continuous states on the model's RK4 at the base step, as the atomic plant's own).
Timed: ``Simulator.run()`` (initialization, code generation, the run, the final outputs and
the logs), each model built untimed; best of interleaved repeats, ratios within the run. Both
the process's CPU time and the wall time are printed: on a loaded machine a run is preempted
for milliseconds at a time, which the CPU time leaves out.

Run: python -m pytest -m bench -s tests/benchmarks/test_bench_atomic.py
"""

from __future__ import annotations

import os
import time

import pytest

from blocks import DiscreteIntegrator, Gain, Integrator, Sine, Sum, UnitDelay
from cosim import Model, SimulationConfig, Simulator
from cosim.model.diagram import Inport, Outport, Subsystem

H = 0.01
REPEAT = 15


def _sub(name, atomic, dt, **kw):
    return Subsystem(name, atomic=True, dt=dt, **kw) if atomic else Subsystem(name)


def _at(atomic, period):
    """Block options: a flattened block runs at its subsystem's rate."""
    return {} if atomic else {"sample_time": period}


def plant(atomic, options):
    p = _sub("plant", atomic, H / 4, solver="RK4", options=options)
    p.add(Inport("u"), Integrator("v", 0.0), Integrator("x", 0.1), Gain("k", -4.0),
          Gain("c", -0.4), Sum("f", "+++"), Outport("y"))
    p.connect("u.out", "f.in1")
    p.connect("k.out", "f.in2")
    p.connect("c.out", "f.in3")
    p.connect("f.out", "v.in")
    p.connect("v.out", "x.in", "c.in")
    p.connect("x.out", "k.in", "y.in")
    return p


def pi(name, atomic, options):
    st = _at(atomic, H)
    c = _sub(name, atomic, H, options=options)
    c.add(Inport("e"), Gain("kp", 2.0, **st),
          DiscreteIntegrator("i", 1.5, method="backward", **st), Sum("s", "++", **st),
          Outport("u"))
    c.connect("e.out", "kp.in", "i.in")
    c.connect("kp.out", "s.in1")
    c.connect("i.out", "s.in2")
    c.connect("s.out", "u.in")
    return c


def sensor(atomic, options):
    st = _at(atomic, H / 2)
    s = _sub("sensor", atomic, H / 2, options=options)
    s.add(Inport("x"), Gain("g", 0.9, **st), UnitDelay("d", 0.0, **st), Sum("a", "++", **st),
          Gain("h", 0.5, **st), Outport("y"))
    s.connect("x.out", "g.in", "d.in")
    s.connect("g.out", "a.in1")
    s.connect("d.out", "a.in2")
    s.connect("a.out", "h.in")
    s.connect("h.out", "y.in")
    return s


def controller(atomic, options):
    """The nested controller: an atomic PI and an atomic continuous actuator lag inside."""
    outer = _sub("ctrl", atomic, H / 4, options=options)
    act = _sub("act", atomic, H / 4, solver="RK4", options=options)
    act.add(Inport("u"), Integrator("z", 0.0), Gain("w", -20.0), Gain("b", 20.0),
            Sum("s", "++"), Outport("y"))
    act.connect("u.out", "b.in")
    act.connect("b.out", "s.in1")
    act.connect("w.out", "s.in2")
    act.connect("s.out", "z.in")
    act.connect("z.out", "w.in", "y.in")
    outer.add(Inport("e"), pi("pi", atomic, options), act, Gain("lim", 1.0), Outport("u"))
    outer.connect("e.out", "pi.e")
    outer.connect("pi.u", "act.u")
    outer.connect("act.y", "lim.in")
    outer.connect("lim.out", "u.in")
    return outer


def model(shape: str, atomic: bool, options=None):
    """``shape`` ("loop3" or "nested"); ``options``: the atomic subsystems' own config."""
    m = Model(shape)
    ctrl = pi("ctrl", atomic, options) if shape == "loop3" else controller(atomic, options)
    m.add(plant(atomic, options), ctrl, sensor(atomic, options),
          Sine("ref", frequency=0.5, sample_time=H), Sum("err", "+-", **_at(atomic, H)))
    m.connect("ref.out", "err.in1")
    m.connect("sensor.y", "err.in2")
    m.connect("err.out", "ctrl.e")
    m.connect("ctrl.u", "plant.u")
    m.connect("plant.y", "sensor.x")
    return m


#: name -> (atomic, parent on the generated path, atomic subsystems' own options)
VARIANTS = {
    "flattened": (False, True, None),
    "atomic": (True, True, None),
    "atomic, old path": (True, False, {"fast": True}),
}


#: Logs: every signal (the default: an atomic subsystem's model logs more series than its
#: flattened self, its Inports' and its outputs' own), or the same few signals in each.
LOGS = {"all": (None, None),
        "selected": (("err.out", "plant/x.out", "ctrl/s.out"), ("err.out", "plant/x.out",
                                                               "ctrl.u"))}


def _time(shape: str, variant: str, logs: str) -> tuple[float, float]:
    """``(CPU s, wall s)`` of one run."""
    atomic, fast, options = VARIANTS[variant]
    log = LOGS[logs][1 if atomic else 0]
    if shape == "nested" and log is not None:
        log = tuple(key.replace("ctrl/s.out", "ctrl/pi/s.out") for key in log)
    sim = Simulator(model(shape, atomic, options),
                    SimulationConfig(dt=H / 4, t_end=10.0, solver="RK4", fast=fast, log=log))
    c0, t0 = time.process_time(), time.perf_counter()
    sim.run()
    return time.process_time() - c0, time.perf_counter() - t0


@pytest.mark.bench
@pytest.mark.parametrize("logs", sorted(LOGS))
@pytest.mark.parametrize("shape", ["loop3", "nested"])
def test_bench_atomic_subsystems_against_flattened(shape, logs):
    cpu = dict.fromkeys(VARIANTS, float("inf"))
    wall = dict.fromkeys(VARIANTS, float("inf"))
    for _ in range(REPEAT):                 # interleaved: the machine's noise hits all alike
        for variant in VARIANTS:
            c, w = _time(shape, variant, logs)
            cpu[variant], wall[variant] = min(cpu[variant], c), min(wall[variant], w)
    print(f"\n{shape}, {logs} logged: Simulator.run(), 10 s at 2.5 ms, best of {REPEAT} "
          f"(load {os.getloadavg()[0]:.1f})")
    print(f"{'variant':<20} {'CPU s':>8} {'x flattened':>12} {'wall s':>8} {'x flattened':>12}")
    for variant in VARIANTS:
        print(f"{variant:<20} {cpu[variant]:8.4f} {cpu[variant] / cpu['flattened']:12.2f} "
              f"{wall[variant]:8.4f} {wall[variant] / wall['flattened']:12.2f}")
    print(f"atomic vs old path: CPU {cpu['atomic'] / cpu['atomic, old path']:.2f}x, "
          f"wall {wall['atomic'] / wall['atomic, old path']:.2f}x")
