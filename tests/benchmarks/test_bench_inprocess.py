"""Benchmark (issue 28): co-simulations whose units all run in this process, against their
flattened monolithic run.

Shapes: a ring of 8 unit delays (Jacobi extrapolation 0 and 1, Gauss–Seidel), a fan of 8
feedthrough units (a gain each) fed by and feeding top-level blocks (``feedthrough=
"resolve"``: refreshed at every macro point, and ``"delay"``), the same fan with a state
integrated by RK4 in each unit at half the macro step (extrapolation 1), a loop of two
feedthrough units coupled algebraically (iterated every macro step) and integrated by a third,
and the electric-vehicle showcase (examples/electric_vehicle.py, 10 s: Gauss–Seidel,
extrapolation 1, battery <-> motor iterated).

Columns (µs per macro step; the run phase: initialization untimed):

- ``generated``: the default, the compiled exchange (:mod:`cosim.master.compiled`, the
  macro-step program written as one Python loop);
- ``observed``: the same with an observer attached (each unit's step timed for the dashboard);
- ``engine``: the engine's direct calls of the units (``CosimConfig(compiled=False)``);
- ``flattened``: ``Simulator`` on the same model with every subsystem virtual (not the EV:
  see :func:`flattened`);
- ``atomic``: ``Simulator`` on the model as built, its subsystems atomic (the monolithic
  reference of docs/cosim-semantics.md).

CPU time of this process (``time.process_time``: other agents on a shared machine preempt a
run for milliseconds at a time, which wall time would count), best of interleaved repeats,
ratios within the run, the load beside them. A run's first macro steps compile and specialize
its generated code: every repeat is a new co-simulation, and the code caches
(:mod:`cosim.fastpath.cache`) serve the repeats after the first.

Run: python -m pytest -m bench -s tests/benchmarks/test_bench_inprocess.py
"""

from __future__ import annotations

import os
import time

import pytest

from blocks import Gain, Sine, Sum
from blocks.continuous import Integrator
from cosim import CoSimulation, CosimConfig, Inport, Model, Outport, SimulationConfig, Simulator
from cosim.model.diagram import Subsystem as SubsystemType
from tests.benchmarks.rings import ring
from tests.benchmarks.test_bench_shapes import fan
from tests.cosim.test_engine import fan as fan_rk4

REPEAT = 5
STEPS = 2000


def loop(H: float = 0.01) -> Model:
    """Two feedthrough units in an algebraic loop (gain -0.4 around it: the iteration
    converges), each with a state, driven by a top-level Sine and integrated by a third."""
    m = Model("loop")
    a = SubsystemType("a", atomic=True, dt=H / 4, solver="RK4")
    a.add(Inport("u"), Inport("r"), Gain("k", 0.5), Integrator("x", 1.0), Gain("d", -1.0),
          Sum("dx", "+++"), Sum("y", "++"), Outport("y_"))
    a.connect("u.out", "k.in", "dx.in1")
    a.connect("r.out", "dx.in3")
    a.connect("x.out", "d.in", "y.in2")
    a.connect("d.out", "dx.in2")
    a.connect("dx.out", "x.in")
    a.connect("k.out", "y.in1")
    a.connect("y.out", "y_.in")
    b = SubsystemType("b", atomic=True, dt=H / 4, solver="RK4")
    b.add(Inport("u"), Gain("k", -0.8), Integrator("z", 0.0), Gain("d", -1.0), Sum("dz", "++"),
          Sum("y", "++"), Outport("y_"))
    b.connect("u.out", "k.in", "dz.in1")
    b.connect("z.out", "d.in", "y.in2")
    b.connect("d.out", "dz.in2")
    b.connect("dz.out", "z.in")
    b.connect("k.out", "y.in1")
    b.connect("y.out", "y_.in")
    c = SubsystemType("c", atomic=True, dt=H / 4, solver="RK4")
    c.add(Inport("u"), Integrator("w", 0.0), Outport("w_"))
    c.connect("u.out", "w.in")
    c.connect("w.out", "w_.in")
    m.add(a, b, c, Sine("src", frequency=0.7))
    m.connect("src.out", "a.r")
    m.connect("a.y_", "b.u")
    m.connect("b.y_", "a.u", "c.u")
    return m


def ev() -> Model:
    from examples.electric_vehicle import build
    return build()


#: name -> (model, base step, macro step, options, steps)
SHAPES = {
    "ring e=0": (lambda: ring(8), 0.01, 0.01, {}, STEPS),
    "ring e=1": (lambda: ring(8), 0.01, 0.01, {"extrapolation": 1}, STEPS),
    "ring GS": (lambda: ring(8), 0.01, 0.01, {"scheme": "gauss-seidel"}, STEPS),
    "fan resolve": (fan, 0.01, 0.01, {}, STEPS),
    "fan delay": (fan, 0.01, 0.01, {"feedthrough": "delay"}, STEPS),
    "fan RK4": (lambda: fan_rk4(8), 0.005, 0.01, {"extrapolation": 1}, STEPS),
    "coupled loop": (loop, 0.0025, 0.01, {"extrapolation": 1, "tolerance": 1e-10}, STEPS),
    "EV 10 s": (ev, 0.001, 0.01, {"scheme": "gauss-seidel", "extrapolation": 1,
                                  "tolerance": 1e-10}, 1000),
}


def flattened(shape: str) -> Model | None:
    """The model of ``shape`` with every subsystem virtual (its units step at the base
    step); None for the EV, whose flattened diagram (``build(atomic=False)``) has the
    motor <-> battery loop that the monolithic loop solver starts from zero and divides by
    (``current = P / v_batt``: the unit's Inport starts it at 360 V)."""
    if shape.startswith("EV"):
        return None
    model = SHAPES[shape][0]()

    def walk(d):
        for b in d.blocks:
            if isinstance(b, SubsystemType):
                b.atomic, b.dt, b.solver, b.options = False, None, None, {}
                walk(b)
    walk(model)
    return model


class _Watch:
    """An observer that looks at nothing (what attaching a dashboard costs the loop)."""

    stride = 10**9

    def observe(self, master):
        pass


def cosim_us(shape: str, compiled: bool, observed: bool = False) -> tuple[float, object]:
    make, dt, H, options, steps = SHAPES[shape]
    cs = CoSimulation(make(), SimulationConfig(dt=dt, t_end=steps * H, solver="RK4",
                                               cosim=CosimConfig(H=H, compiled=compiled,
                                                                 **options)))
    try:
        cs.master.initialize()
        if observed:
            cs.master.observer = _Watch()
        t0 = time.process_time()
        cs.run()
        cpu = time.process_time() - t0
        return cpu / steps * 1e6, cs.master
    finally:
        cs.close()


def monolithic_us(shape: str, atomic: bool) -> float:
    """``Simulator`` on the model flattened, or as built (its subsystems atomic)."""
    make, dt, H, _, steps = SHAPES[shape]
    model = make() if atomic else flattened(shape)
    if model is None:
        return float("nan")            # (printed as nan)
    sim = Simulator(model, SimulationConfig(dt=dt, t_end=steps * H, solver="RK4"))
    sim.initialize()
    t0 = time.process_time()
    sim.run()
    return (time.process_time() - t0) / steps * 1e6


@pytest.mark.bench
def test_bench_in_process_cosimulation_against_flattened():
    rows = []
    for shape in SHAPES:
        best = dict.fromkeys(("generated", "observed", "engine", "flattened", "atomic"),
                             float("inf"))
        compiled_steps = total = 0
        for _ in range(REPEAT):             # interleaved: the machine's noise hits all alike
            us, master = cosim_us(shape, True)
            best["generated"] = min(best["generated"], us)
            compiled_steps, total = master.compiled.steps, master.stats["macro_steps"]
            best["observed"] = min(best["observed"], cosim_us(shape, True, True)[0])
            best["engine"] = min(best["engine"], cosim_us(shape, False)[0])
            flat = monolithic_us(shape, False)
            best["flattened"] = flat if flat != flat else min(best["flattened"], flat)
            best["atomic"] = min(best["atomic"], monolithic_us(shape, True))
        rows.append((shape, best, compiled_steps, total))
    print(f"\nin-process co-simulation, CPU µs per macro step (run phase), best of {REPEAT} "
          f"(load {os.getloadavg()[0]:.1f})")
    print(f"{'shape':<14} {'generated':>10} {'observed':>9} {'engine':>8} {'flattened':>10} "
          f"{'atomic':>8} {'gen/flat':>9} {'gen/atomic':>10} {'eng/flat':>9} {'eng/gen':>8} "
          f"{'obs/gen':>8} {'generated steps':>16}")
    for shape, b, n_gen, n in rows:
        print(f"{shape:<14} {b['generated']:10.1f} {b['observed']:9.1f} {b['engine']:8.1f} "
              f"{b['flattened']:10.1f} {b['atomic']:8.1f} {b['generated'] / b['flattened']:9.2f} "
              f"{b['generated'] / b['atomic']:10.2f} "
              f"{b['engine'] / b['flattened']:9.2f} {b['engine'] / b['generated']:8.1f} "
              f"{b['observed'] / b['generated']:8.2f} {f'{n_gen}/{n}':>16}")
    assert all(n_gen > 0.9 * n for _, _, n_gen, n in rows)
