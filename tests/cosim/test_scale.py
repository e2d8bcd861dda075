"""Large plans (issue 17): a 100,000-block chain, a wide model and a continuous chain run,
switch from the interpreter to generated code, and match the interpreter (and for the gains an
oracle) bit for bit. Lags clipped by saturations run as vectors, clipped by tables one
statement per block."""

from dataclasses import replace

import numpy as np
import pytest

from cosim import SimulationConfig, Simulator
from cosim.run.simulator import LAZY_BLOCKS, LAZY_TICKS
from tests.benchmarks.scale_models import chain, lags, last, lookups, oracle, wide

TICKS = LAZY_TICKS + 5


@pytest.mark.slow
@pytest.mark.parametrize("make,n,vector", [(chain, 100_000, False), (wide, 10_000, True),
                                           (lags, 10_001, True), (lookups, 10_001, False)],
                         ids=["chain-100k", "wide-10k", "lags-10k", "lookups-10k"])
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
    if make in (chain, wide):
        assert all(y[k] == oracle(model, k, 0.01) for k in range(len(y)))
    elif make is lookups:
        assert sim.fast_path.source.count("def _rk") > 10    # the stages are chunked
    ref_sim = Simulator(make(n), replace(cfg, fast=False))
    ref = ref_sim.run()
    np.testing.assert_array_equal(ref_sim.state.X, sim.state.X)      # every lag's state
    np.testing.assert_array_equal(ref[last(model)], logs[last(model)])
    np.testing.assert_array_equal(ref.time_of(last(model)), logs.time_of(last(model)))
