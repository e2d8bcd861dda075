"""Benchmarks (issue: core engine): cosim vs pySimBlocks and hand-written numpy.

1. A discrete chain of N first-order lags ``y[k+1] = a y[k] + (1-a) u[k]`` (N = 10, 100, 1000),
   driven by a sine, in cosim (DiscreteStateSpace 1x1 blocks: generated fast path, batched for
   large N; and the reference interpreter), pySimBlocks (LinearStateSpace blocks) and numpy
   (one vectorised update per step).
2. A multirate controller: a discrete second-order plant at 10 ms, a PI controller at 50 ms,
   a step reference.

Run: python -m pytest -m bench -s tests/benchmarks/test_bench_discrete.py
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from blocks import DiscretePID, DiscreteStateSpace, Sine, Step, Sum
from cosim import Model, SimulationConfig, Simulator

from tests.benchmarks.timing import best_us_per_step, table

A = 0.9
W = 2 * math.pi * 0.5


def chain_cosim(n, steps, fast=True):
    m = Model("chain")
    m.add(Sine("src", 1.0, 0.5))
    prev = "src.out"
    for i in range(n):
        m.add(DiscreteStateSpace(f"l{i}", [[A]], [[1 - A]], [[1.0]]))
        m.connect(prev, f"l{i}.in")
        prev = f"l{i}.out"
    sim = Simulator(m, SimulationConfig(dt=0.01, t_end=steps * 0.01, fast=fast, log=[prev]))
    sim.initialize()
    return sim


def chain_numpy(n, steps):
    """Outputs are states (y = x); the input of lag i is lag i-1's output at the same tick."""
    x = np.zeros(n)
    u = np.empty(n)
    for k in range(steps):
        u[0] = math.sin(W * (k * 0.01))
        u[1:] = x[:-1]
        x = A * x + (1 - A) * u
    return x[-1]


def chain_pysimblocks(n, steps):
    from pySimBlocks.blocks.sources.sinusoidal import Sinusoidal
    from pySimBlocks.blocks.systems.linear_state_space import LinearStateSpace
    from pySimBlocks.core.config import SimulationConfig as PConfig
    from pySimBlocks.core.model import Model as PModel
    from pySimBlocks.core.simulator import Simulator as PSimulator
    m = PModel("chain")
    m.add_block(Sinusoidal("src", 1.0, 0.5))
    prev, port = "src", "out"
    for i in range(n):
        m.add_block(LinearStateSpace(f"l{i}", [[A]], [[1 - A]], [[1.0]]))
        m.connect(prev, port, f"l{i}", "u")
        prev, port = f"l{i}", "y"
    sim = PSimulator(m, PConfig(dt=0.01, T=steps * 0.01, logging=[f"{prev}.outputs.y"]))
    return sim, f"{prev}.outputs.y"


@pytest.mark.bench
@pytest.mark.parametrize("n", [10, 100, 1000])
def test_bench_discrete_lag_chain(n):
    steps = 2000
    sim = chain_cosim(n, steps)
    y = sim.run()[f"l{n - 1}.out"]
    assert sim.fast_path is not None
    # The last tick logged is steps (inclusive); numpy ran `steps` updates: same value.
    assert abs(y[-1, 0] - chain_numpy(n, steps)) < 1e-12
    rows = [("cosim (fast path)", best_us_per_step(lambda: chain_cosim(n, steps).run, steps)),
            ("numpy (vectorised loop)",
             best_us_per_step(lambda: (lambda: chain_numpy(n, steps)), steps))]
    ref_steps = 200 if n <= 100 else 40
    rows.append(("cosim (reference interpreter)",
                 best_us_per_step(lambda: chain_cosim(n, ref_steps, False).run, ref_steps,
                                  repeat=1)))
    psb_steps = 200 if n <= 100 else 20
    psb_us = best_us_per_step(lambda: chain_pysimblocks(n, psb_steps)[0].run, psb_steps,
                              repeat=1)
    psim, key = chain_pysimblocks(n, psb_steps)       # a fresh one: run() continues a run
    psb_y = np.asarray(psim.run()[key]).ravel()
    cos_y = chain_cosim(n, psb_steps).run()[f"l{n - 1}.out"][:, 0]
    # Same convention (output from the current state), same arithmetic up to rounding.
    np.testing.assert_allclose(psb_y, cos_y[:len(psb_y)], rtol=0, atol=1e-12)
    rows.append(("pySimBlocks", psb_us))
    table(f"discrete chain of {n} first-order lags (us per step)", rows,
          reference="cosim (fast path)")
    cos, npy = rows[0][1], rows[1][1]
    print(f"n={n}: pySimBlocks / cosim = {psb_us / cos:.0f}x, cosim / numpy = {cos / npy:.2f}x, "
          f"cosim us per block evaluation = {cos / n:.3f}")


def multirate_cosim(steps, fast=True):
    m = Model("multirate")
    m.add(Step("ref", step_time=0.05, final=1.0), Sum("e", "+-"),
          DiscretePID("pi", kp=0.8, ki=2.0, sample_time=0.05),
          DiscreteStateSpace("plant", [[1.0, 0.01], [-0.02, 0.97]], [[0.0], [0.01]],
                             [[1.0, 0.0]], sample_time=0.01))
    m.connect("ref.out", "e.in1")
    m.connect("plant.out", "e.in2")
    m.connect("e.out", "pi.in")
    m.connect("pi.out", "plant.in")
    sim = Simulator(m, SimulationConfig(dt=0.01, t_end=steps * 0.01, fast=fast,
                                        log=["plant.out"]))
    sim.initialize()
    return sim


def multirate_python(steps):
    """The same model as a hand-written loop (plain floats; PI forward Euler at 50 ms)."""
    x1 = x2 = 0.0
    integ = 0.0
    u = 0.0
    for k in range(steps):
        y = x1
        if k % 5 == 0:
            e = (1.0 if k * 0.01 >= 0.05 - 1e-12 else 0.0) - y
            u = 0.8 * e + 2.0 * integ
            integ = integ + 0.05 * e
        x1, x2 = x1 + 0.01 * x2, -0.02 * x1 + 0.97 * x2 + 0.01 * u
    return x1


def multirate_pysimblocks(steps):
    from pySimBlocks.blocks.controllers.pid import Pid
    from pySimBlocks.blocks.operators.sum import Sum as PSum
    from pySimBlocks.blocks.sources.step import Step as PStep
    from pySimBlocks.blocks.systems.linear_state_space import LinearStateSpace
    from pySimBlocks.core.config import SimulationConfig as PConfig
    from pySimBlocks.core.model import Model as PModel
    from pySimBlocks.core.simulator import Simulator as PSimulator
    m = PModel("multirate")
    m.add_block(PStep("ref", value_before=0.0, value_after=1.0, start_time=0.05))
    m.add_block(PSum("e", "+-"))
    m.add_block(Pid("pi", controller="PI", Kp=0.8, Ki=2.0, sample_time=0.05))
    m.add_block(LinearStateSpace("plant", [[1.0, 0.01], [-0.02, 0.97]], [[0.0], [0.01]],
                                 [[1.0, 0.0]], sample_time=0.01))
    m.connect("ref", "out", "e", "in1")
    m.connect("plant", "y", "e", "in2")
    m.connect("e", "out", "pi", "e")
    m.connect("pi", "u", "plant", "u")
    return PSimulator(m, PConfig(dt=0.01, T=steps * 0.01, logging=["plant.outputs.y"]))


@pytest.mark.bench
def test_bench_multirate_controller():
    steps = 5000
    rows = [("cosim (fast path)", best_us_per_step(lambda: multirate_cosim(steps).run, steps)),
            ("cosim (reference interpreter)",
             best_us_per_step(lambda: multirate_cosim(1000, False).run, 1000)),
            ("python loop (hand-written)",
             best_us_per_step(lambda: (lambda: multirate_python(steps)), steps))]
    sim = multirate_cosim(steps)
    assert sim.fast_path is not None
    y = sim.run()["plant.out"][:, 0]
    try:
        rows.append(("pySimBlocks", best_us_per_step(lambda: multirate_pysimblocks(1000).run,
                                                     1000, repeat=1)))
        psb_y = np.asarray(multirate_pysimblocks(1000).run()["plant.outputs.y"]).ravel()
        n = min(len(psb_y), len(y))
        print(f"max |pySimBlocks - cosim| over 10 s: {np.max(np.abs(psb_y[:n] - y[:n])):.2e}")
    except Exception as err:  # noqa: BLE001 - a peer API mismatch must not hide our numbers
        print(f"pySimBlocks multirate model not run: {type(err).__name__}: {err}")
    table("multirate controller (plant 10 ms, PI 50 ms), us per 10 ms step", rows,
          reference="cosim (fast path)")
