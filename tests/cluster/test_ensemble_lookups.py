"""Lookup tables in translated ensembles (issue 36): Lookup1D with members' own breakpoints
and tables, Lookup2D with members' own tables and breakpoints, each member bit for bit its
own run (every signal), the lookups on the gathered paths (no Python loop over members)."""

import numpy as np
import pytest

from cluster.sweep import final, lhs, sweep
from cosim import Model, SimulationConfig, Simulator

from tests.cluster.test_ensemble import own_run, same_bits

CONFIG = SimulationConfig(dt=0.01, t_end=2.0, solver="RK4")
TABLE_2D = [[1.0, 0.5, -0.0, 2.0, 1.0], [0.0, -1.0, 0.5, 0.5, 3.0], [2.0, 2.0, 1.0, -2.0, 0.0],
            [0.25, 4.0, 1.5, 0.0, -1.0], [1.0, 1.0, 1.0, 2.0, 3.0]]


def _scaled(values, name: str) -> str:
    """A parameter expression: ``values`` (nested lists) each times ``name``."""
    if isinstance(values, list):
        return "=" + repr([_scaled(v, name) for v in values]).replace("'=", "").replace("'", "")
    return f"{values!r} * {name}"


def map2d(extrapolation="clip", bp="=bp"):
    """A lag driven by a Lookup2D of two sines (amplitudes ``a1``, ``a2`` reach beyond the
    grid in some members): the table scaled by ``g``, the middle breakpoint of the first
    axis ``bp`` (unless given: then the breakpoints are shared, and the members' cells are
    kept between evaluations) and the lag's time constant ``tau`` swept."""
    from blocks import FirstOrderLag, Lookup2D, Sine
    m = Model("map2d", parameters={"a1": 1.0, "a2": 1.0, "g": 1.0, "bp": 0.2, "tau": 0.3})
    m.add(Sine("s1", amplitude="=a1", frequency=0.9),
          Sine("s2", amplitude="=a2", frequency=0.4, phase=0.5),
          Lookup2D("lut", [-1.0, -0.3, bp, 0.6, 1.0], [-1.5, -0.5, 0.0, 0.5, 1.5],
                   _scaled(TABLE_2D, "g"), extrapolation),
          FirstOrderLag("lag", tau="=tau"))
    m.connect("s1.out", "lut.in1")
    m.connect("s2.out", "lut.in2")
    m.connect("lut.out", "lag.in")
    return m


def map1d_breakpoints():
    """A lag driven by a Lookup1D of a sine whose breakpoints are all the member's own
    (``w`` scales them) and whose table is scaled by ``g``."""
    from blocks import FirstOrderLag, Lookup1D, Sine
    m = Model("map1d", parameters={"a": 1.0, "w": 1.0, "g": 1.0})
    m.add(Sine("s", amplitude="=a", frequency=0.9),
          Lookup1D("lut", _scaled([-1.0, -0.4, -0.1, 0.0, 0.2, 0.7, 1.0], "w"),
                   _scaled([1.0, -0.5, 0.0, 2.0, -0.0, 1.0, 3.0], "g")),
          FirstOrderLag("lag", tau=0.2))
    m.connect("s.out", "lut.in")
    m.connect("lut.out", "lag.in")
    return m


POINTS_2D = lhs({"a1": (0.5, 1.6), "a2": (0.5, 2.0), "g": (-1.0, 2.0), "bp": (-0.2, 0.5),
                 "tau": (0.1, 0.5)}, 9, seed=3)
POINTS_1D = lhs({"a": (0.3, 1.5), "w": (0.5, 1.5), "g": (-1.0, 2.0)}, 9, seed=5)

CASES = {
    "lookup2d_clip": (map2d, POINTS_2D),
    "lookup2d_linear": (lambda: map2d("linear"), POINTS_2D),
    "lookup2d_shared_breakpoints": (lambda: map2d("linear", 0.2), POINTS_2D),
    "lookup1d_members_breakpoints": (map1d_breakpoints, POINTS_1D),
}


def logged_all(factory):
    from tests.cluster.test_ensemble import _all_logged
    return _all_logged(factory, CONFIG)


@pytest.mark.parametrize("layout", ["one table", "large: slots apart"])
@pytest.mark.parametrize("case", list(CASES))
def test_members_lookups_are_bit_identical_to_their_own_runs(case, layout, monkeypatch):
    from cosim.fastpath import ensemble_ops
    from cosim.fastpath.ensemble_run import run_members, _compiled
    if layout != "one table":
        # A table too large to repeat its shared slots per member keeps them apart.
        monkeypatch.setattr(ensemble_ops, "GATHER_MAX", 0)
    factory, points = CASES[case]
    config = logged_all(factory)
    m = factory()
    m.parameters.update(points[0])
    sim = Simulator(m, config)
    sim.initialize()
    got = run_members(sim, m, points)
    # The lookups ran on the gathered path (cells and their constants kept by a Cells),
    # not as masked branches per cell.
    source = next(tr.source for tr, _ in reversed(list(_compiled.values())))
    assert "_pw0(" in source
    for params, mine in zip(points, got, strict=True):
        alone = own_run(factory, config, params)
        assert sorted(mine) == sorted(alone)
        for key in alone:
            assert same_bits(mine[key], alone[key]), (case, params, key)


def test_some_members_leave_the_grid_and_some_do_not():
    """The clip and the edge cells act in some members only (the test above would pass on
    a model whose members all stayed in one cell)."""
    outs = [own_run(map2d, logged_all(map2d), p)["s1.out"] for p in POINTS_2D]
    beyond = [bool((np.abs(o) > 1.0).any()) for o in outs]
    assert any(beyond) and not all(beyond)


def test_a_sweep_of_a_2d_map_says_translated():
    rows = sweep(map2d, CONFIG, POINTS_2D, {"end": final("lag.out")}, backend="serial",
                 ensemble=len(POINTS_2D))
    alone = sweep(map2d, CONFIG, POINTS_2D, {"end": final("lag.out")}, backend="serial")
    assert [r["end"] for r in rows] == [r["end"] for r in alone]
    assert [e["path"] for e in rows.ensembles] == ["translated"]
