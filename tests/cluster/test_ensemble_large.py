"""Ensembles of a large plan (issue 36): a plan whose single run's step function is split
into chunks (cosim.fastpath.chunked) is translated from one unchunked function, each member
bit for bit its own run."""

import numpy as np

from cluster.sweep import final, lhs, sweep
from cosim import Model, SimulationConfig, Simulator
from cosim.fastpath import emitter

from tests.cluster.test_ensemble import own_run, same_bits

CONFIG = SimulationConfig(dt=0.01, t_end=0.3, solver="RK4")
STAGES = 150


def lag_chain():
    """A lag (``tau`` swept) whose output goes back to its input through ``STAGES`` gains
    (``gain`` swept) and saturations, subtracted from a step: a feedthrough chain of 2 *
    STAGES + 3 blocks, recomputed at every Runge-Kutta stage (a step function of more than
    :data:`~cosim.fastpath.emitter.CHUNK` statements, on the scalar strategy)."""
    from blocks import FirstOrderLag, Gain, Saturation, Step, Sum
    m = Model("chain", parameters={"gain": 1.0, "tau": 0.2})
    m.add(Step("u", step_time=0.0, final=1.0), Sum("e", "+-"),
          FirstOrderLag("lag", tau="=tau", gain=1.0))
    m.connect("u.out", "e.in1")
    m.connect("e.out", "lag.in")
    src = "lag.out"
    for i in range(STAGES):
        m.add(Gain(f"g{i}", "=gain" if i % 2 else 1.0 / (1.0 + 0.001 * i)),
              Saturation(f"sat{i}", lower=-2.0 - 0.01 * i, upper=1.5 + 0.01 * i))
        m.connect(src, f"g{i}.in")
        m.connect(f"g{i}.out", f"sat{i}.in")
        src = f"sat{i}.out"
    m.connect(src, "e.in2")
    return m


POINTS = lhs({"gain": (0.5, 3.0), "tau": (0.05, 0.4)}, 5, seed=7)


def test_a_chunked_plan_is_translated_and_bit_identical():
    from cosim.fastpath.ensemble_run import run_members
    m = lag_chain()
    m.parameters.update(POINTS[0])
    sim = Simulator(m, CONFIG)
    sim.initialize()
    assert "def _out" in sim.fast_path.source, "the single run's function is not chunked"
    assert len(sim.fast_path.source.splitlines()) > emitter.CHUNK
    for params, mine in zip(POINTS, run_members(sim, m, POINTS), strict=True):
        alone = own_run(lag_chain, CONFIG, params)
        assert sorted(mine) == sorted(alone)
        for key in alone:
            assert same_bits(mine[key], alone[key]), (params, key)


def test_a_sweep_of_a_chunked_plan_says_translated():
    rows = sweep(lag_chain, CONFIG, POINTS, {"end": final("lag.out")},
                 backend="serial", ensemble=len(POINTS))
    alone = sweep(lag_chain, CONFIG, POINTS, {"end": final("lag.out")},
                  backend="serial")
    assert [r["end"] for r in rows] == [r["end"] for r in alone]
    assert [e["path"] for e in rows.ensembles] == ["translated"]
    assert np.isfinite([r["end"] for r in rows]).all()
