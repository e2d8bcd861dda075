"""Parameter sweeps: same results as runs done one by one, resumable, any backend."""

import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from cluster.sweep import (final, grid, integral_abs_error, lhs, listed, maximum, overshoot,
                           random_uniform, settling_time, sobol, sweep)
from cosim import Model, SimulationConfig, Simulator

from tests.cluster import sweep_models as sm

ROOT = Path(__file__).resolve().parents[2]
REDUCERS = {"y_end": final("plant.out"), "y_max": maximum("plant.out"),
            "iae": integral_abs_error("plant.out", 1.0)}


def one_by_one(factory, config, points):
    out = []
    for p in points:
        m = factory()
        m.parameters.update(p)
        logs = Simulator(m, config).run()
        out.append({k: f(logs) for k, f in REDUCERS.items()})
    return out


@pytest.fixture(scope="module")
def points():
    return lhs({"gain": (0.5, 2.0), "tau": (0.05, 0.5)}, 200, seed=3)


@pytest.mark.cluster
@pytest.mark.parametrize("backend", ["ray", "process"])
def test_sweep_equals_runs_done_one_by_one(ray_session, points, backend, tmp_path):
    rows = sweep(sm.lag, sm.CONFIG, points, REDUCERS, backend=backend, out_dir=tmp_path,
                 max_in_flight=2)
    expect = one_by_one(sm.lag, sm.CONFIG, points)
    assert [r["index"] for r in rows] == list(range(200))
    assert all(r["status"] == "ok" for r in rows)
    for row, p, e in zip(rows, points, expect):
        assert row["gain"] == p["gain"] and row["tau"] == p["tau"]
        for k in REDUCERS:
            assert row[k] == e[k], (row, e)          # bit for bit, through the CSV too


@pytest.mark.cluster
@pytest.mark.parametrize("bound", [1, None])
def test_runs_at_once_stay_within_the_bound(ray_session, bound):
    points = grid({"gain": [1.0, 1.1, 1.2, 1.3, 1.4, 1.5]})
    rows = sweep(sm.lag, sm.SLOW_CONFIG, points, {"end": sm.finished_at}, backend="ray",
                 max_in_flight=bound)
    # The most runs alive at one moment: a sweep over start (+1) and end (-1) times, ends
    # first at a tie. A run's start is read back from its end and wall time, which also
    # counts what follows the end's clock read: on a loaded machine a preemption there made
    # two consecutive runs overlap by a few ms. Runs that really ran at once overlap for most
    # of their ~0.3 s, so the first quarter of each run is slack.
    events = sorted([(r["end"] - 0.75 * r["wall_time"], 1) for r in rows] +
                    [(r["end"], -1) for r in rows])
    alive = most = 0
    for _, step in events:
        alive += step
        most = max(most, alive)
    assert 1 <= most <= (bound or 2)          # default: one per CPU of the 2-CPU cluster


def test_resume_after_sigkill_runs_only_the_missing_runs(tmp_path, monkeypatch):
    out = tmp_path / "study"
    counter = tmp_path / "count"
    env = {**os.environ, "COSIM_SWEEP_COUNTER": str(counter), "PYTHONPATH": str(ROOT)}
    script = [sys.executable, "-m", "tests.cluster.sweep_models", str(out)]
    proc = subprocess.Popen(script, env=env, cwd=ROOT)
    csv_path = out / "results.csv"
    deadline = time.time() + 60
    while time.time() < deadline:       # rows arrive in synced batches (every 0.5 s)
        if csv_path.exists() and len(csv_path.read_text().splitlines()) >= 6:
            break
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done_first = len(csv_path.read_text().splitlines()) - 1
    assert 5 <= done_first < 20, done_first
    executed_first = len(counter.read_text().splitlines())
    assert executed_first >= done_first          # runs of the unwritten batch are lost
    subprocess.run(script, env=env, cwd=ROOT, check=True, timeout=120)
    executed_second = len(counter.read_text().splitlines()) - executed_first
    assert executed_second == 20 - done_first    # only the runs missing from the table
    monkeypatch.setenv("COSIM_SWEEP_COUNTER", str(counter))
    resumed = sweep(sm.lag, sm.CONFIG, grid(sm.RESUME_DESIGN), {"y_end": sm.CountedFinal(0.05)},
                    out_dir=out, backend="serial")
    clean = sweep(sm.lag, sm.CONFIG, grid(sm.RESUME_DESIGN), {"y_end": sm.CountedFinal(0.05)},
                  out_dir=tmp_path / "clean", backend="serial")
    assert len(resumed) == 20
    strip = [{k: v for k, v in r.items() if k != "wall_time"} for r in resumed]
    assert strip == [{k: v for k, v in r.items() if k != "wall_time"} for r in clean]


def test_sweep_over_a_cosimulated_model(tmp_path):
    points = grid({"gain": [1.0, 2.0], "tau": [0.1, 0.3]})
    rows = sweep(sm.cosim_lag, sm.COSIM_CONFIG, points, {"y_end": final("plant/lag.out")},
                 backend="serial")
    assert all(r["status"] == "ok" for r in rows)
    for r, p in zip(rows, points):
        # A first-order lag after a step at 0.1 s; the co-simulation holds the step input.
        expect = p["gain"] * (1 - np.exp(-(1.0 - 0.1) / p["tau"]))
        assert abs(r["y_end"] - expect) < 1e-6


def test_failed_run_is_recorded_and_the_sweep_goes_on(tmp_path):
    rows = sweep(sm.broken, sm.CONFIG, grid({"gain": [1.0, 2.0, 3.0]}),
                 {"y_end": final("plant.out")}, backend="serial", out_dir=tmp_path)
    assert [r["status"] for r in rows] == ["ok", "failed", "ok"]
    assert "gain" in rows[1]["error"] and rows[1]["run_id"] in rows[1]["error"]
    assert np.isnan(rows[1]["y_end"]) and np.isfinite(rows[2]["y_end"])


def test_designs_are_reproducible_and_in_bounds(tmp_path):
    b = {"a": (0.0, 1.0), "b": (-2.0, 2.0)}
    for design in (random_uniform, lhs, sobol):
        p1, p2 = design(b, 16, seed=7), design(b, 16, seed=7)
        assert p1 == p2 and len(p1) == 16
        assert all(0 <= p["a"] <= 1 and -2 <= p["b"] <= 2 for p in p1)
    assert len(grid({"a": [1, 2, 3], "b": [4, 5]})) == 6
    (tmp_path / "d.csv").write_text("gain,tau\n1.0,0.1\n2.0,0.2\n")
    assert listed(tmp_path / "d.csv") == [{"gain": 1.0, "tau": 0.1}, {"gain": 2.0, "tau": 0.2}]
    (tmp_path / "d.yaml").write_text("- {gain: 1.0}\n- {gain: 3.0}\n")
    assert listed(tmp_path / "d.yaml") == [{"gain": 1.0}, {"gain": 3.0}]


def test_reducers_against_hand_computations():
    m = sm.lag()
    m.parameters.update(gain=1.0, tau=0.2)
    logs = Simulator(m, sm.CONFIG).run()
    t, y = logs.time_of("plant.out"), logs["plant.out"][:, 0]
    assert final("plant.out")(logs) == y[-1]
    assert overshoot("plant.out", 1.0)(logs) == 0.0
    ts = settling_time("plant.out", 1.0, 0.02)(logs)
    assert abs(ts - (0.1 + 0.2 * np.log(50))) < 0.011          # exp(-t/tau) = 2 %
    assert integral_abs_error("plant.out", 1.0)(logs) == pytest.approx(
        np.trapezoid(np.abs(y - 1.0), t))


def test_sweep_from_the_command_line(tmp_path):
    from cosim import SimulationConfig
    m = sm.lag()
    path = tmp_path / "lag.yaml"
    m.to_yaml(path, simulation=SimulationConfig(dt=0.01, t_end=1.0, solver="RK4"))
    out = subprocess.run([sys.executable, "-m", "cosim.cli", "sweep", str(path), "--out",
                          str(tmp_path / "s"), "--grid", "gain=1,2", "--grid", "tau=0.1,0.2",
                          "--metric", "y_end=final:plant.out", "--backend", "serial"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    together = subprocess.run([sys.executable, "-m", "cosim.cli", "sweep", str(path), "--out",
                               str(tmp_path / "e"), "--grid", "gain=1,2", "--grid",
                               "tau=0.1,0.2", "--metric", "y_end=final:plant.out",
                               "--backend", "serial", "--ensemble", "4"],
                              capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert together.returncode == 0, together.stderr
    assert "4 runs (0 failed)" in out.stdout
    lines = (tmp_path / "s" / "results.csv").read_text().splitlines()
    assert lines[0] == "run_id,index,gain,tau,status,error,wall_time,y_end,reducer_errors"
    assert len(lines) == 5

    def y_end(d):
        with (tmp_path / d / "results.csv").open() as fh:
            return [row["y_end"] for row in csv.DictReader(fh)]
    assert y_end("e") == y_end("s")                  # the ensemble's rows, bit for bit


@pytest.mark.parametrize("ensemble", [None, 2])
def test_a_study_after_another_sets_what_it_does_not_name_to_the_models_values(ensemble):
    # The worker keeps a model's first run to rerun it with other values (across studies of
    # one process): a later study that does not name tau must run with the model's tau
    # (0.2), not with the first study's first run's (0.1). Oracle: the closed form.
    sweep(sm.lag, sm.CONFIG, grid({"tau": [0.1, 0.5]}), {"y": final("plant.out")},
          backend="serial", ensemble=ensemble)
    rows = sweep(sm.lag, sm.CONFIG, grid({"gain": [1.0, 2.0]}), {"y": final("plant.out")},
                 backend="serial", ensemble=ensemble)
    for row in rows:
        assert row["y"] == pytest.approx(row["gain"] * (1 - np.exp(-0.9 / 0.2)), rel=1e-3)


def _misspelt_dead_zone():
    """A dead zone given keywords its class does not take, through parameter expressions
    (so the block is only built, and fails, when each run evaluates it)."""
    from blocks import Constant, DeadZone
    m = Model("misspelt", parameters={"w": 0.1})
    m.add(Constant("c", 1.0), DeadZone("dz", lower="=-w", upper="=w"))
    m.connect("c.out", "dz.in")
    return m


@pytest.mark.parametrize("ensemble", [None, 2])
def test_a_block_that_cannot_be_built_fails_each_run_with_its_error(ensemble):
    # Before: with ensemble=..., the sweep crashed with AttributeError ('output_names') in
    # its check of the model; one by one each run failed naming the block and its error.
    rows = sweep(_misspelt_dead_zone, SimulationConfig(dt=0.1, t_end=1.0, log=["dz.out"]),
                 [{"w": 0.1}, {"w": 0.2}], {"end": final("dz.out")}, backend="serial",
                 progress=False, ensemble=ensemble)
    assert [r["status"] for r in rows] == ["failed", "failed"]
    for r, w in zip(rows, (0.1, 0.2)):
        assert f"dz: DeadZone cannot be built from {{'lower': -{w}, 'upper': {w}}}" in r["error"]
        assert "unexpected keyword argument 'lower'" in r["error"]
