"""Ensembles: N runs simulated as one model, each member bit for bit its own run."""

import numpy as np
import pytest

from cluster.ensemble import ensemble_model, member
from cluster.sweep import final, grid, lhs, sweep
from cluster.sweep_design import runs_of
from cosim import ModelError, SimulationConfig, Simulator

from tests.cluster import sweep_models as sm

CASES = {
    "msd_pid_fast": (sm.msd_pid, SimulationConfig(dt=1e-3, t_end=1.0, solver="RK4"),
                     lhs({"kp": (5.0, 40.0), "ki": (1.0, 20.0), "kd": (1.0, 10.0)}, 7, seed=2)),
    "msd_pid_interpreter": (sm.msd_pid, SimulationConfig(dt=1e-2, t_end=0.5, solver="RK4",
                                                         fast=False),
                            lhs({"kp": (5.0, 40.0), "kd": (1.0, 10.0)}, 3, seed=4)),
    "multirate_hold": (sm.held, SimulationConfig(dt=0.01, t_end=1.0, solver="SSPRK22"),
                       grid({"gain": [0.5, 2.0], "tau": [0.1, 0.3]})),
}


def own_run(factory, config, params):
    m = factory()
    m.parameters.update(params)
    return Simulator(m, config).run()


@pytest.mark.parametrize("case", list(CASES))
def test_every_member_is_bit_identical_to_its_own_run(case):
    factory, config, points = CASES[case]
    runs = runs_of(points)
    logs = Simulator(ensemble_model(factory, runs), config).run()
    for r in runs:
        mine, alone = member(logs, r), own_run(factory, config, r.params)
        assert sorted(mine) == sorted(alone)
        for key in alone:
            assert np.array_equal(mine[key], alone[key]), (case, r.params, key)
            assert np.array_equal(mine.time_of(key), alone.time_of(key))


#: Models whose scalar fast path an ensemble translates (cosim.fastpath.ensemble_run).
TRANSLATED = {
    "msd_pid": (sm.msd_pid, SimulationConfig(dt=1e-3, t_end=0.5, solver="RK4"),
                lhs({"kp": (5.0, 40.0), "ki": (1.0, 20.0), "kd": (1.0, 10.0)}, 6, seed=3)),
    "pi_loop": (sm.pi_loop, sm.PI_CONFIG,
                lhs({"kp": (0.5, 4.0), "ki": (0.1, 2.0), "tau": (0.2, 1.0)}, 5, seed=1)),
    "multirate_hold": (sm.held, SimulationConfig(dt=0.01, t_end=1.0, solver="SSPRK22"),
                       grid({"gain": [0.5, 2.0], "tau": [0.1, 0.3]})),
    "step_at_member_times": (sm.timed_step, SimulationConfig(dt=0.01, t_end=0.5,
                                                             solver="RK4"),
                             grid({"t_step": [0.0, 0.105, 0.2], "height": [1.0, 3.5]})),
    "one_member": (sm.lag, sm.CONFIG, [{"gain": 1.5}]),
}


def test_translated_division_and_abs_are_bit_identical():
    from cosim.fastpath.ensemble_run import run_members
    points = [{"den": 2.0}, {"den": 0.3}, {"den": 7.0}]
    config = SimulationConfig(dt=0.01, t_end=0.3, solver="RK4")
    m = quotient()
    sim = Simulator(m, config)
    sim.initialize()
    for params, mine in zip(points, run_members(sim, m, points), strict=True):
        alone = own_run(quotient, config, params)
        for key in alone:
            assert np.array_equal(mine[key], alone[key]), (params, key)


@pytest.mark.parametrize("case", list(TRANSLATED))
def test_translated_members_are_bit_identical_to_their_own_runs(case):
    from cosim.fastpath.ensemble_run import run_members
    factory, config, points = TRANSLATED[case]
    m = factory()
    m.parameters.update(points[0])
    sim = Simulator(m, config)
    sim.initialize()
    for params, mine in zip(points, run_members(sim, m, points), strict=True):
        alone = own_run(factory, config, params)
        assert sorted(mine) == sorted(alone)
        for key in alone:
            assert np.array_equal(mine[key], alone[key]), (case, params, key)
            assert np.array_equal(mine.time_of(key), alone.time_of(key))
        assert np.array_equal(mine.time, alone.time)


def test_a_translated_ensemble_refuses_a_parameter_that_changes_structure():
    from cosim.fastpath.ensemble_run import run_members
    from cosim.fastpath.runtime import Unsupported
    m = sm.timed_step()
    sim = Simulator(m, sm.CONFIG)
    sim.initialize()
    with pytest.raises(Unsupported, match="change the structure"):
        run_members(sim, m, [{}, {"height": -3.0}])


@pytest.mark.parametrize("backend", ["serial", pytest.param("ray", marks=pytest.mark.cluster)])
def test_sweep_in_ensembles_equals_the_sweep_run_by_run(request, backend, tmp_path):
    if backend == "ray":
        request.getfixturevalue("ray_session")
    points = lhs({"kp": (5.0, 40.0), "ki": (1.0, 20.0), "kd": (1.0, 10.0)}, 10, seed=5)
    config = SimulationConfig(dt=1e-3, t_end=0.5, solver="RK4", log=["x.out"])
    reducers = {"x_end": final("x.out")}
    alone = sweep(sm.msd_pid, config, points, reducers, backend="serial")
    together = sweep(sm.msd_pid, config, points, reducers, backend=backend, ensemble=4,
                     out_dir=tmp_path / "e")
    strip = ("wall_time",)
    assert [{k: v for k, v in r.items() if k not in strip} for r in together] == \
        [{k: v for k, v in r.items() if k not in strip} for r in alone]


def test_a_model_the_translation_does_not_take_runs_as_copies(tmp_path):
    points = lhs({"kp": (5.0, 40.0), "kd": (1.0, 10.0)}, 3, seed=4)
    config = SimulationConfig(dt=1e-2, t_end=0.3, solver="RK4", fast=False)
    reducers = {"x_end": final("x.out")}
    alone = sweep(sm.msd_pid, config, points, reducers, backend="serial")
    together = sweep(sm.msd_pid, config, points, reducers, backend="serial", ensemble=3)
    assert [r["x_end"] for r in together] == [r["x_end"] for r in alone]
    assert [r["status"] for r in together] == ["ok"] * 3


def quotient():
    """A lag's output divided by a step to ``den`` at 0.1 s (a member with ``den = 0``
    divides by zero there), through an absolute value."""
    from blocks import Abs, Product, Step
    m = sm.lag()
    m.parameters["den"] = 1.0
    m.add(Step("d", step_time=0.1, initial=1.0, final="=den"), Product("q", "*/"), Abs("a"))
    m.connect("plant.out", "q.in1")
    m.connect("d.out", "q.in2")
    m.connect("q.out", "a.in")
    return m


def test_a_member_failing_while_it_steps_fails_alone():
    points = [{"den": 2.0}, {"den": 0.0}, {"den": 0.5}]
    config = SimulationConfig(dt=0.01, t_end=0.3, solver="RK4")
    reducers = {"y": final("a.out")}
    alone = sweep(quotient, config, points, reducers, backend="serial")
    together = sweep(quotient, config, points, reducers, backend="serial", ensemble=3)
    assert [r["status"] for r in together] == [r["status"] for r in alone] == \
        ["ok", "failed", "ok"]
    assert [r["y"] for r in together][::2] == [r["y"] for r in alone][::2]


def test_a_failing_member_fails_alone():
    rows = sweep(sm.broken, sm.CONFIG, grid({"gain": [1.0, 2.0, 3.0]}),
                 {"y_end": final("plant.out")}, backend="serial", ensemble=3)
    assert [r["status"] for r in rows] == ["ok", "failed", "ok"]
    assert np.isfinite(rows[0]["y_end"]) and np.isnan(rows[1]["y_end"])


@pytest.mark.parametrize("factory, config, message", [
    (sm.lag, SimulationConfig(dt=0.01, t_end=1.0, solver="RK45"),
     r"solver 'RK45' is adaptive: one step size would be chosen over all members"),
    (sm.lag, SimulationConfig(dt=0.01, t_end=1.0, solver="BDF"),
     r"solver 'BDF' is (adaptive|implicit)"),
    (sm.relay_loop, sm.CONFIG, r"block r \(Relay\) switches modes at located times"),
    (sm.cosim_lag, sm.COSIM_CONFIG, r"co-simulations run their own units"),
])
def test_what_an_ensemble_cannot_share_is_refused_before_any_run(tmp_path, factory, config,
                                                                  message):
    with pytest.raises(ModelError, match="sweep\\(ensemble=...\\) refused: " + message):
        sweep(factory, config, grid({"gain": [1.0, 2.0]}), {}, backend="serial", ensemble=2,
              out_dir=tmp_path / "s")
    assert not (tmp_path / "s").exists()
