"""Benchmark: a model split into units, co-simulated in process at H = dt, against its own
monolithic run (same model, virtual subsystems), measured in the same run.

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
from cosim.master.units import LocalUnit
from cosim.model.evaluate import evaluate
from tests.cluster.scenarios import DT, motor_pi

STEPS = 4000


def run_us(cosim: str | None) -> float:
    """µs per step of one run (build and initialize untimed)."""
    if cosim is None:
        sim = Simulator(motor_pi(False), SimulationConfig(dt=DT, t_end=STEPS * DT, solver="RK4"))
    else:
        sim = CoSimulation(motor_pi(True), SimulationConfig(
            dt=DT, t_end=STEPS * DT, cosim=CosimConfig(H=DT, scheme=cosim, extrapolation=1)))
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
    best = {"monolithic": float("inf"), "jacobi": float("inf"), "gauss-seidel": float("inf")}
    for _ in range(5):                           # interleaved repeats, best of each
        for key in best:
            best[key] = min(best[key], run_us(None if key == "monolithic" else key))
    mono = best["monolithic"]
    print(f"\nDC motor + PI, 3 units at H = dt = 1 ms, {STEPS} steps (best of 5, interleaved)")
    for key, us in best.items():
        print(f"{key:>14}: {us:8.1f} us/step  ({us / mono:5.1f}x monolithic)")
    for name in ("motor", "ctrl"):
        proto, own = unit_us(name)
        print(f"unit {name:>5}: {proto:6.1f} us per macro step through the protocol, its own "
              f"ticks {own:5.2f} us -> overhead {proto - own:5.1f} us")
    assert all(np.isfinite(v) and v > 0 for v in best.values())
