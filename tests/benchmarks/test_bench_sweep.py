"""Benchmark: sweep throughput of short runs on 2 Ray workers vs serially in one process.

Target (issue): >= 1.7x on 2 cores. Measured, printed, not asserted.
Run: python -m pytest -m bench -s tests/benchmarks/test_bench_sweep.py
"""

import time

import pytest

from cluster.sweep import final, lhs, sweep
from cosim import SimulationConfig

from tests.cluster import sweep_models as sm


#: A short run: 2 s at 1 ms on the interpreter, tens of milliseconds each.
CONFIG = SimulationConfig(dt=1e-3, t_end=2.0, solver="RK4", fast=False)


@pytest.mark.bench
def test_bench_sweep_throughput(ray_session, tmp_path):
    points = lhs({"gain": (0.5, 2.0), "tau": (0.05, 0.5)}, 60, seed=1)
    reducers = {"y_end": final("plant.out")}
    sweep(sm.lag, CONFIG, points[:4], reducers, backend="ray")  # warm-up
    # Interleaved repeats, best of each: the machine's speed drifts between runs.
    t_serial = t_ray = float("inf")
    for _ in range(2):
        t0 = time.perf_counter()
        serial = sweep(sm.lag, CONFIG, points, reducers, backend="serial")
        t_serial = min(t_serial, time.perf_counter() - t0)
        t0 = time.perf_counter()
        par = sweep(sm.lag, CONFIG, points, reducers, backend="ray")
        t_ray = min(t_ray, time.perf_counter() - t0)
        assert [r["y_end"] for r in serial] == [r["y_end"] for r in par]
    n = len(points)
    print(f"\nsweep of {n} short runs (best of 2): serial {n / t_serial:.1f} runs/s, "
          f"Ray (2 workers) {n / t_ray:.1f} runs/s, speed-up {t_serial / t_ray:.2f}x")
