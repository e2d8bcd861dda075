"""Benchmark: a model split into units, co-simulated in process at H = dt, against its own
monolithic run (same model, virtual subsystems), measured in the same run — with the
compiled exchange (the default for in-process units) and through the protocol.

The model: a DC motor (continuous, RK4, 1 ms; current and speed integrators) and a discrete PI
speed controller (1 ms, its own error sum, integrator and saturation) as two atomic subsystems,
with the reference and a load step at the top level (the third unit). Also: what each unit
costs per macro step through the protocol (SetInputs + DoStep + GetOutputs) above the ticks
of its own generated step function. Run: python -m pytest -m bench -s tests/benchmarks
"""

import time

import numpy as np
import pytest

from cosim import CoSimulation, CosimConfig, SimulationConfig, Simulator
from cosim.master import protocol as P
from cosim.master.local_unit import LocalUnit
from cosim.model.evaluate import evaluate
from tests.cluster.scenarios import DT, motor_pi

STEPS = 4000


def run_us(cosim: str | None, compiled: bool = True) -> float:
    """µs per step of one run (build and initialize untimed); ``compiled=False`` sends every
    exchange through the protocol (no compiled exchange)."""
    if cosim is None:
        sim = Simulator(motor_pi(False), SimulationConfig(dt=DT, t_end=STEPS * DT, solver="RK4"))
    else:
        sim = CoSimulation(motor_pi(True), SimulationConfig(
            dt=DT, t_end=STEPS * DT, cosim=CosimConfig(H=DT, scheme=cosim, extrapolation=1,
                                                       compiled=compiled)))
    sim.initialize()
    t0 = time.perf_counter()
    sim.run()
    return (time.perf_counter() - t0) / STEPS * 1e6


def unit_us(name: str) -> tuple[float, float]:
    """(protocol µs per macro step of unit ``name`` alone, µs per tick of its own ticks)."""
    m = motor_pi(True)
    evaluate(m)
    sub = m[name]
    unit = LocalUnit(sub, SimulationConfig(dt=DT, t_end=1e9, solver="RK4"))
    ins = {p: np.ones(1) for p in sub.input_names}
    best = float("inf")
    for _ in range(3):
        unit.initialize(0.0)
        t0 = time.perf_counter()
        for k in range(STEPS):
            unit.handle(P.SetInputs(ins, {}))
            unit.handle(P.DoStep(k * DT, DT))
            unit.handle(P.GetOutputs())
        best = min(best, (time.perf_counter() - t0) / STEPS * 1e6)
    own = float("inf")
    for _ in range(3):
        unit.sim.initialize(0.0)
        t0 = time.perf_counter()
        unit.sim.advance_to(STEPS)
        own = min(own, (time.perf_counter() - t0) / STEPS * 1e6)
    return best, own


@pytest.mark.bench
def test_bench_units_in_process_against_monolithic():
    runs = {"monolithic": (None, True), "jacobi": ("jacobi", True),
            "gauss-seidel": ("gauss-seidel", True), "jacobi, protocol": ("jacobi", False),
            "g-s, protocol": ("gauss-seidel", False)}
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(5):                           # interleaved repeats, best of each
        for key, (scheme, compiled) in runs.items():
            best[key] = min(best[key], run_us(scheme, compiled))
    mono = best["monolithic"]
    print(f"\nDC motor + PI, 3 units at H = dt = 1 ms, {STEPS} steps (best of 5, interleaved)")
    for key, us in best.items():
        print(f"{key:>17}: {us:8.1f} us/step  ({us / mono:5.2f}x monolithic)")
    owns = 0.0
    for name in ("motor", "ctrl"):
        proto, own = unit_us(name)
        owns += own
        print(f"unit {name:>5}: {proto:6.1f} us per macro step through the protocol, its own "
              f"ticks {own:5.2f} us -> overhead {proto - own:5.1f} us")
    print(f"compiled exchange: {(best['jacobi'] - owns) / 3:5.1f} us per unit and macro step "
          f"above the motor's and controller's own ticks (Jacobi; 3 units, one refresh)")
    assert all(np.isfinite(v) and v > 0 for v in best.values())
