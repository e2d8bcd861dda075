"""Events per member in translated ensembles (issue 36): scheduled events at tick times and
inside steps, with resets, callbacks and stops, zero crossings that stop each member's run
at its own time; every member's logs (cut where its run stopped) and event log are its own
run's, bit for bit."""

import numpy as np
import pytest

from cluster.sweep import final, lhs, sweep
from cosim import SimulationConfig, Simulator
from cosim.fastpath.runtime import Unsupported

from tests.cluster import sweep_models as sm
from tests.cluster.test_ensemble import same_bits

CONFIG = SimulationConfig(dt=0.01, t_end=2.5, solver="RK4", log=["x.out", "v.out"])
POINTS = lhs({"k": (2.0, 9.0), "c": (0.1, 0.8), "x0": (0.3, 1.5)}, 6, seed=2)
BOUNCES = [{"h0": 1.0, "v0": 0.0}, {"h0": 2.5, "v0": 1.0}, {"h0": 0.4, "v0": -2.0},
           {"h0": 1.7, "v0": 3.0}]

CASES = {
    "resets at ticks and inside a step, a zero crossing": (sm.kicked, CONFIG, POINTS),
    "resets alone (fired in the ensemble)": (sm.kicked_resets, CONFIG, POINTS),
    "a scheduled event calling back": (sm.kicked_callback, CONFIG, POINTS),
    "resets at the first tick and across a watched state": (sm.kicked_at_start, CONFIG,
                                                             POINTS),
    "a scheduled stop inside a step": (sm.kicked_stop, CONFIG, POINTS),
    "a scheduled stop at a tick": (sm.kicked_resets_stop, CONFIG, POINTS),
    "a scheduled stop at the tick of a reset that crosses": (sm.kicked_lift_stop, CONFIG,
                                                             POINTS),
    "a zero crossing stopping each member at its own time": (sm.stopping, CONFIG, BOUNCES),
}


def run_alone(factory, config, params):
    m = factory()
    m.parameters.update(params)
    sim = Simulator(m, config)
    return sim.run(), sim.event_log


@pytest.mark.parametrize("case", list(CASES))
def test_every_member_fires_its_events_as_its_own_run(case):
    from cosim.fastpath.ensemble_run import run_members
    factory, config, points = CASES[case]
    m = factory()
    m.parameters.update(points[0])
    sim = Simulator(m, config)
    sim.initialize()
    events: list = []
    got = run_members(sim, m, points, events=events)
    for params, mine, fired in zip(points, got, events, strict=True):
        alone, log = run_alone(factory, config, params)
        assert fired == log and fired, (case, params)
        assert sorted(mine) == sorted(alone)
        assert same_bits(mine.time, alone.time), (case, params)
        for key in alone:
            assert same_bits(mine[key], alone[key]), (case, params, key)
            assert np.array_equal(mine.time_of(key), alone.time_of(key))


def test_stopped_members_stop_at_their_own_times():
    """The stopping model above stops each member at its own tick (not all together)."""
    ends = {len(run_alone(sm.stopping, CONFIG, p)[0].time) for p in BOUNCES}
    assert len(ends) == len(BOUNCES)


def test_the_kicks_act_and_the_crossing_fires_in_some_members():
    """The events act (a model whose events did nothing would pass the test above): every
    member is kicked and shoved, the zero crossing fires in some members and not others."""
    logs = [run_alone(sm.kicked, CONFIG, p)[1] for p in POINTS]
    assert all({"kick", "shove"} <= {n for _, n in log} for log in logs)
    assert all((0.755, "shove") in log for log in logs)
    up = [any(n == "up" for _, n in log) for log in logs]
    assert any(up) and not all(up)


def test_a_reset_at_a_tick_fires_the_crossing_it_makes_there():
    """The 'lift' reset crosses the watched position at 0.6 s in some members: their runs
    fire the crossing at that tick (the case above compares them with the ensemble's)."""
    logs = [run_alone(sm.kicked_at_start, CONFIG, p)[1] for p in POINTS]
    at_lift = [(0.6, "up") in log for log in logs]
    assert any(at_lift)
    assert all((0.0, "up") not in log for log in logs)


def test_a_sweep_with_scheduled_and_stopping_events_is_translated():
    reducers = {"x": final("x.out"), "v": final("v.out")}
    together = sweep(sm.kicked_stop, CONFIG, POINTS, reducers, backend="serial", ensemble=6)
    alone = sweep(sm.kicked_stop, CONFIG, POINTS, reducers, backend="serial")
    assert [(r["x"], r["v"]) for r in together] == [(r["x"], r["v"]) for r in alone]
    assert [e["path"] for e in together.ensembles] == ["translated"]


def test_a_crossing_of_a_signal_is_refused_naming_the_event_and_block():
    from cosim.fastpath.ensemble_run import run_members
    m = sm.watching_signal()
    sim = Simulator(m, CONFIG)
    sim.initialize()
    with pytest.raises(Unsupported, match=r"event 'floor' watches the signal 'x.out' of "
                                          r"block x"):
        run_members(sim, m, BOUNCES)
