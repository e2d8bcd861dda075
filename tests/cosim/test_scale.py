"""Large plans (issue 17): a 100,000-block chain and a wide model run, switch from the
interpreter to generated code, and match the interpreter and an oracle bit for bit."""

from dataclasses import replace

import numpy as np
import pytest

from cosim import SimulationConfig, Simulator
from cosim.run.simulator import LAZY_BLOCKS, LAZY_TICKS
from tests.benchmarks.scale_models import chain, last, oracle, wide

TICKS = LAZY_TICKS + 5


@pytest.mark.slow
@pytest.mark.parametrize("make,n,vector", [(chain, 100_000, False), (wide, 10_000, True)],
                         ids=["chain-100k", "wide-10k"])
def test_large_model_runs_and_matches_the_interpreter(make, n, vector):
    model = make(n)
    assert len(model.blocks) == n >= LAZY_BLOCKS
    cfg = SimulationConfig(dt=0.01, t_end=TICKS * 0.01, log=[last(model)])
    sim = Simulator(model, cfg)
    sim.initialize()
    sim.advance_to(1)
    assert sim.fast_path is None          # the first ticks run on the interpreter
    logs = sim.run()
    assert sim.fast_path is not None and sim.fast_path.vector is vector
    y = logs[last(model)][:, 0]
    assert len(y) == TICKS + 1
    assert all(y[k] == oracle(model, k, 0.01) for k in range(len(y)))
    ref = Simulator(make(n), replace(cfg, fast=False)).run()
    np.testing.assert_array_equal(ref[last(model)], logs[last(model)])
    np.testing.assert_array_equal(ref.time_of(last(model)), logs.time_of(last(model)))
