"""Runs that reuse a reference run's generated code: bit for bit a run built on its own."""

import numpy as np
import pytest

from cluster.sweep import final, grid, lhs, sweep
from cosim import CoSimulation, SimulationConfig, Simulator
from cosim.fastpath.rerun import Rerun
from cosim.fastpath.runtime import Unsupported

from tests.cluster import sweep_models as sm

CASES = {
    "pi_loop": (sm.pi_loop, sm.PI_CONFIG,
                lhs({"kp": (0.5, 4.0), "ki": (0.1, 2.0), "tau": (0.2, 1.0)}, 4, seed=7)),
    "msd_pid": (sm.msd_pid, SimulationConfig(dt=1e-3, t_end=0.3, solver="RK4"),
                lhs({"kp": (5.0, 40.0), "kd": (1.0, 10.0)}, 3, seed=2)),
    "multirate_hold": (sm.held, SimulationConfig(dt=0.01, t_end=1.0, solver="SSPRK22"),
                       grid({"gain": [0.5, 2.0], "tau": [0.1, 0.3]})),
    "step_times": (sm.timed_step, SimulationConfig(dt=0.01, t_end=0.5, solver="RK4"),
                   grid({"t_step": [0.0, 0.105], "height": [1.0, 3.5]})),
}


def own_run(factory, config, params):
    m = factory()
    m.parameters.update(params)
    return Simulator(m, config).run()


@pytest.mark.parametrize("case", list(CASES))
def test_reruns_are_bit_identical_to_runs_built_on_their_own(case):
    factory, config, points = CASES[case]
    rerun = Rerun(factory(), config)
    for params in points + points[:1]:          # the first again: nothing left over
        mine, alone = rerun.run(params), own_run(factory, config, params)
        assert sorted(mine) == sorted(alone)
        for key in alone:
            assert np.array_equal(mine[key], alone[key]), (case, params, key)
            assert np.array_equal(mine.time_of(key), alone.time_of(key))
        assert np.array_equal(mine.time, alone.time)


def test_reruns_of_a_chunked_step_function_are_bit_identical(monkeypatch):
    """A large plan's step function is split into functions with globals of their own: a
    rerun binds its constants in those too."""
    from cosim.fastpath import emitter
    monkeypatch.setattr(emitter, "CHUNK", 3)
    factory, config, points = CASES["pi_loop"]
    rerun = Rerun(factory(), config)
    assert rerun.sim.fast_path.source.count("def _rk") > 3
    for params in points:
        mine, alone = rerun.run(params), own_run(factory, config, params)
        for key in alone:
            assert np.array_equal(mine[key], alone[key]), (params, key)


def test_a_parameter_that_changes_the_structure_is_refused():
    rerun = Rerun(sm.guarded(), sm.CONFIG)
    with pytest.raises(Unsupported, match="change the structure of pid"):
        rerun.run({"kd": 0.2})                # a derivative state the reference has not


def test_a_parameter_crossing_zero_reuses_the_code():
    """``-3.0`` is lifted as ``-p__0`` (the sign stays in the kernel): the reference's
    code runs it with the parameter negated, bit for bit its own run."""
    rerun = Rerun(sm.timed_step(), sm.CONFIG)
    mine, alone = rerun.run({"height": -3.0}), own_run(sm.timed_step, sm.CONFIG,
                                                      {"height": -3.0})
    for key in alone:
        assert np.array_equal(mine[key], alone[key]), key


def test_the_interpreter_and_models_with_offsets_are_not_rerun():
    with pytest.raises(Unsupported, match=r"SimulationConfig\(fast=False\)"):
        Rerun(sm.lag(), SimulationConfig(dt=0.01, t_end=0.1, fast=False))


def test_a_sweep_through_reruns_equals_runs_built_on_their_own(tmp_path):
    points = grid({"t_step": [0.0, 0.105], "height": [1.0, -3.0, 3.5]})
    config = SimulationConfig(dt=0.01, t_end=0.5, solver="RK4")
    rows = sweep(sm.timed_step, config, points, {"y": final("plant.out")}, backend="serial")
    for row, params in zip(rows, points, strict=True):
        alone = own_run(sm.timed_step, config, params)
        assert row["status"] == "ok"
        assert row["y"] == float(alone["plant.out"][-1, 0]), params


def test_a_model_file_changed_between_studies_is_read_again(tmp_path):
    import os
    path = tmp_path / "lag.yaml"
    config = SimulationConfig(dt=0.01, t_end=0.5, solver="RK4")
    points = grid({"gain": [1.0, 2.0]})
    sm.lag().to_yaml(path)
    before = sweep(path, config, points, {"y": final("plant.out")}, backend="serial")
    changed = sm.lag()
    changed.parameters["tau"] = 0.05
    changed.to_yaml(path)
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10 ** 9))   # a coarse clock
    after = sweep(path, config, points, {"y": final("plant.out")}, backend="serial")
    for row, params in zip(after, points, strict=True):
        alone = own_run(lambda: _load(path), config, params)
        assert row["y"] == float(alone["plant.out"][-1, 0])
    assert [r["y"] for r in after] != [r["y"] for r in before]


def _load(path):
    from cosim import Model
    return Model.from_yaml(path)


def test_a_model_file_with_its_own_cosimulation_is_read_once_per_run(tmp_path, monkeypatch):
    """Its runs are built on their own (a co-simulation has no Rerun); that is found out
    once, not by building the model an extra time for every run."""
    from cluster import sweep_worker
    path = tmp_path / "loop.yaml"
    m = sm.cosim_lag()
    m.simulation = sm.COSIM_CONFIG
    m.to_yaml(path)
    reads = []
    build = sweep_worker.build
    monkeypatch.setattr(sweep_worker, "build", lambda src: reads.append(src) or build(src))
    points = grid({"gain": [1.0, 2.0, 3.0]})
    rows = sweep(path, None, points, {"y": final("plant.y")}, backend="serial")
    assert [r["status"] for r in rows] == ["ok"] * 3
    assert len(reads) == 3 + 1              # one per run, and one to find out
    for row, params in zip(rows, points, strict=True):
        alone = sm.cosim_lag()
        alone.parameters.update(params)
        sim = CoSimulation(alone, sm.COSIM_CONFIG)
        try:
            assert row["y"] == float(sim.run()["plant.y"][-1, 0]), params
        finally:
            sim.close()
