"""Benchmark (issue 17, item 1): how building and running a plan grows with its size.

Four shapes at 1,000 / 10,000 / 100,000 blocks: a chain of gains (one block per level: the
scalar strategy, its step function split into chunks), a wide model of parallel
100-block chains (1,000 chains at 100k: the vector strategy, one numpy operation per level),
a continuous chain of lags and saturations (two levels: the vector strategy with inline
SSPRK22 stages) and the same chain clipped by tables (the scalar strategy with inline SSPRK22
stages, each stage split into chunks too).
For each it prints

- compile: ``Simulator(model, config)`` and ``initialize()`` (s);
- first step: the first tick (s) — plans of 5,000 blocks or more start on the interpreter;
- switch: ticks 2..10 plus generating the code (s, large plans only);
- µs per block-step of the generated code at steady state (best of interleaved repeats);
- memory per block, measured in a fresh process (:mod:`tests.benchmarks.scale_memory`):
  what building the model, compiling it and running its first ten ticks allocated and still
  holds — the model's blocks included — as tracemalloc counts it (the target's measure, KB
  per block), its peak during the same, and the growth of the resident set size (RSS, which
  adds the allocator's overhead); and the RSS growth of the same run on the interpreter only
  (the model, plan and run state without generated code: RSS interp).

Every run checks the logged output against an oracle: the gains applied in series in Python
floats, or for the lags and lookups the interpreter's run of the same model (its first ticks, bit for
bit: the generated code runs from the second tick on). Run: python -m pytest -m bench -s tests/benchmarks/test_bench_scale.py
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from cosim import SimulationConfig, Simulator
from cosim.run.simulator import LAZY_TICKS
from tests.benchmarks.scale_models import chain, lags, last, lookups, oracle, wide

DT = 0.01
SIZES = (1_000, 10_000, 100_000)
SHAPES = {"chain": chain, "wide": wide, "lags": lags, "lookups": lookups}


def build(model, fast=True):
    return Simulator(model, SimulationConfig(dt=DT, t_end=1e6, log=[last(model)], fast=fast))


def timed(shape: str, n: int) -> dict:
    model = SHAPES[shape](n)
    gc.collect()
    t0 = time.perf_counter()
    sim = build(model)
    sim.initialize()
    t1 = time.perf_counter()
    sim.advance_to(1)
    t2 = time.perf_counter()
    sim.advance_to(LAZY_TICKS + 1)
    t3 = time.perf_counter()
    assert sim.fast_path is not None
    steps = max(20, 2_000_000 // n)
    best = float("inf")
    for _ in range(3):
        k = sim.k
        t = time.perf_counter()
        sim.advance_to(k + steps)
        best = min(best, time.perf_counter() - t)
    y = sim.logs[last(model)][:, 0]
    if shape in ("lags", "lookups"):
        ref = Simulator(SHAPES[shape](n), replace(sim.config, fast=False))
        ref.initialize()
        ref.advance_to(LAZY_TICKS + 2)
        assert ref.fast_path is None
        assert (ref.logs[last(model)][:, 0] == y[:LAZY_TICKS + 2]).all(), (shape, n)
    else:
        for k in (0, 1, LAZY_TICKS, len(y) - 1):
            assert y[k] == oracle(model, k, DT), (shape, n, k)
    return {"compile": t1 - t0, "first": t2 - t1, "switch": t3 - t2,
            "us": best / steps / len(model.blocks) * 1e6, "blocks": len(model.blocks),
            "strategy": "vector" if sim.fast_path.vector else "scalar"}


def memory_per_block(shape: str, n: int) -> dict:
    """Held and peak bytes per block, by tracemalloc and by RSS, and the RSS of the run on the
    interpreter only, each in a fresh process."""
    out = {}
    for mode in ("trace", "rss", "interp"):
        cmd = [sys.executable, "-m", "tests.benchmarks.scale_memory", shape, str(n), mode]
        done = subprocess.run(cmd, capture_output=True, text=True, check=True,
                              cwd=Path(__file__).parents[2])
        r = json.loads(done.stdout.splitlines()[-1])
        out[mode] = (r["held"] / r["blocks"], r["peak"] / r["blocks"])
    return out


@pytest.mark.bench
@pytest.mark.parametrize("shape", list(SHAPES))
def test_bench_scale_growth(shape):
    rows = [(n, timed(shape, n), memory_per_block(shape, n)) for n in SIZES]
    lines = [f"\n{shape}: growth with the number of blocks (memory: KB per block held after ten "
             "ticks, model included; tracemalloc, its peak, and RSS growth)",
             f"{'blocks':>8} {'strategy':>8} {'compile s':>10} {'first step s':>13} "
             f"{'switch s':>9} {'us/block-step':>14} {'KB/block':>9} {'peak KB':>8} "
             f"{'RSS KB':>7} {'RSS interp KB':>14}"]
    for n, r, mem in rows:
        lines.append(f"{r['blocks']:>8} {r['strategy']:>8} {r['compile']:10.3f} "
                     f"{r['first']:13.3f} {r['switch']:9.3f} {r['us']:14.4f} "
                     f"{mem['trace'][0] / 1024:9.2f} {mem['trace'][1] / 1024:8.2f} "
                     f"{mem['rss'][0] / 1024:7.2f} {mem['interp'][0] / 1024:14.2f}")
    print("\n".join(lines))
