"""The macro-step engine on Ray (:mod:`cosim.master.engine`) on split models: the same numbers
as the protocol's separate requests and as in process, the same error where a unit fails,
recovery from a killed unit."""

import numpy as np
import pytest

from cosim import CoSimulation, CosimConfig, SimulationConfig
from cosim.errors import SimulationError

from tests.cluster.scenarios import crashing, failing, three_units, wide
from tests.cluster.test_ray import assert_same

pytestmark = pytest.mark.cluster


def run(model, backend, t_end=1.0, **cosim):
    sim = CoSimulation(model, SimulationConfig(dt=0.002, t_end=t_end, solver="RK4",
                                               cosim=CosimConfig(backend=backend, **cosim)))
    try:
        sim.run(duration=0.1)              # then on from a history of one macro point
        logs = sim.run()
    finally:
        sim.close()
    return sim, logs


@pytest.mark.parametrize("scenario, cosim", [
    # a loop of units (a -> b -> rest -> a) with the classic one-step delay
    (three_units, dict(H=0.02, feedthrough="delay", extrapolation=1)),
    # a feed-forward split; logs collected every 7 steps
    (wide, dict(H=0.01, partition=3, extrapolation=2, log_every=7)),
    # inputs held over the step
    (three_units, dict(H=0.02, feedthrough="delay")),
    (wide, dict(H=0.01, partition=3, log_every=7)),
])
def test_engine_steps_are_bit_identical_to_the_protocol_and_in_process(ray_session, scenario,
                                                                        cosim):
    _, local = run(scenario(), "local", **cosim)
    lockstep, ref = run(scenario(), "ray", engine=False, **cosim)
    sim, logs = run(scenario(), "ray", **cosim)
    assert sim.master.engine is not None and lockstep.master.engine is None
    # every unit in an actor steps through its connection's lane (one message per round);
    # the top-level blocks run beside the master
    assert set(sim.master.engine.lanes) == set(sim.master.names) - {"main"}
    assert_same(local, logs)
    assert_same(ref, logs)
    assert [r.t for r in sim.step_log] == [r.t for r in lockstep.step_log]
    assert sim.stats == lockstep.stats
    # every unit's steps are timed, as on the protocol path
    assert {u: len(ts) for u, (ts, _) in sim.master.calls.step_times.items()} == \
           {u: len(ts) for u, (ts, _) in lockstep.master.calls.step_times.items()}


@pytest.mark.parametrize("extrapolation", [1, 0])     
def test_a_unit_failing_raises_the_protocol_error_at_the_same_step(ray_session,
                                                                  extrapolation):
    cosim = dict(H=0.02, feedthrough="delay", extrapolation=extrapolation)
    errors = {}
    for engine in (False, True):
        sim = CoSimulation(failing(0.5), SimulationConfig(
            dt=0.002, t_end=1.0, cosim=CosimConfig(backend="ray", engine=engine, **cosim)))
        try:
            with pytest.raises(SimulationError) as err:
                sim.run()
            errors[engine] = (str(err.value), sim.t, sim.stats["macro_steps"])
            assert (sim.master.engine is not None) == engine
        finally:
            sim.close()
    assert errors[True] == errors[False]
    assert "gave up" in errors[True][0]


@pytest.mark.parametrize("extrapolation", [1, 0])     
def test_a_killed_unit_is_recreated_and_the_run_replays_identically(
        ray_session, tmp_path, extrapolation):
    cosim = dict(H=0.02, feedthrough="delay", extrapolation=extrapolation,
                 checkpoint_every=5)
    _, ref = run(three_units(), "local", **cosim)
    marker = tmp_path / "crashed"
    sim, logs = run(crashing(str(marker)), "ray", **cosim)
    assert marker.exists(), "the unit never crashed"
    assert sim.master.engine is not None and sim.stats["recoveries"] == 1
    for key in ref:
        np.testing.assert_array_equal(ref[key], logs[key], err_msg=key)
        np.testing.assert_array_equal(ref.time_of(key), logs.time_of(key))
