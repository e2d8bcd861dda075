"""Sensitivity analysis: Sobol' and Morris indices through SALib, against functions whose
indices are known exactly."""

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cluster.sensitivity import morris, saltelli
from cluster.sweep import final, sweep
from cosim import ModelError

from tests.cluster import sweep_models as sm

ROOT = Path(__file__).resolve().parents[2]

#: The Ishigami function's indices for a = 7, b = 0.1 (Ishigami & Homma 1990; Saltelli et
#: al. 2008, ch. 4), written from the closed forms below.
A, B = 7.0, 0.1
_V1 = 0.5 * (1 + B * math.pi ** 4 / 5) ** 2
_V2 = A ** 2 / 8
_V13 = B ** 2 * math.pi ** 8 * (1 / 18 - 1 / 50)
_V = _V1 + _V2 + _V13
ISHIGAMI_S1 = [_V1 / _V, _V2 / _V, 0.0]
ISHIGAMI_ST = [(_V1 + _V13) / _V, _V2 / _V, _V13 / _V]


def test_the_closed_forms_are_the_published_values():
    assert np.round(ISHIGAMI_S1, 4).tolist() == [0.3139, 0.4424, 0.0]
    assert np.round(ISHIGAMI_ST, 4).tolist() == [0.5576, 0.4424, 0.2437]


def ishigami_rows(design):
    x = design.matrix
    y = np.sin(x[:, 0]) + A * np.sin(x[:, 1]) ** 2 + B * x[:, 2] ** 4 * np.sin(x[:, 0])
    names = list(design.bounds)
    return [{"run_id": f"{i:06d}", "index": i, "status": "ok", **dict(zip(names, row)),
             "y": float(v)} for i, (row, v) in enumerate(zip(x.tolist(), y))]


def test_sobol_indices_of_the_ishigami_function_within_their_confidence_intervals():
    bounds = {f"x{i}": (-math.pi, math.pi) for i in (1, 2, 3)}
    design = saltelli(bounds, 4096, seed=11)
    assert len(design) == 4096 * 5
    table = design.analyze(ishigami_rows(design), "y", resamples=500)
    for row, s1, st in zip(table, ISHIGAMI_S1, ISHIGAMI_ST):
        assert abs(row["S1"] - s1) <= row["S1_conf"], row
        assert abs(row["ST"] - st) <= row["ST_conf"], row
        # Sampling error, not bias: the intervals are narrow at this size.
        assert row["S1_conf"] < 0.05 and row["ST_conf"] < 0.05, row


def test_sobol_and_morris_of_a_model_run_through_sweep(tmp_path):
    # y = 2 x1 + x2 - 0.5 x3, each x uniform on its range: S1 = ST = a_i^2 var_i / sum.
    bounds = {"x1": (0.0, 1.0), "x2": (0.0, 2.0), "x3": (-1.0, 1.0)}
    var = np.array([4 * 1 / 12, 1 * 4 / 12, 0.25 * 4 / 12])
    expect = var / var.sum()
    design = saltelli(bounds, 128, seed=3)
    rows = sweep(sm.linear, sm.LINEAR_CONFIG, design, {"y": final("y.out")}, backend="serial",
                 out_dir=tmp_path / "sobol")
    for row, s in zip(design.analyze(rows, "y", resamples=300), expect):
        assert abs(row["S1"] - s) <= row["S1_conf"], row
        assert abs(row["ST"] - s) <= row["ST_conf"], row
    # Morris: a linear function's elementary effects are its slopes times the ranges, exactly.
    screen = morris(bounds, 10, seed=3)
    rows = sweep(sm.linear, sm.LINEAR_CONFIG, screen, {"y": final("y.out")}, backend="serial")
    table = screen.analyze(rows, "y", resamples=200)
    slopes_times_range = [2.0 * 1.0, 1.0 * 2.0, 0.5 * 2.0]
    for row, e in zip(table, slopes_times_range):
        assert row["mu_star"] == pytest.approx(e, rel=1e-12) and row["sigma"] < 1e-12, row


def test_a_table_that_is_not_the_designs_is_refused():
    bounds = {"x1": (0.0, 1.0), "x2": (0.0, 1.0), "x3": (0.0, 1.0)}
    design = saltelli(bounds, 8)
    with pytest.raises(ModelError, match="the table has 80 runs, the sobol design 40"):
        design.analyze(ishigami_rows(saltelli(bounds, 16)), "y")
    with pytest.raises(ModelError, match="parameter values are not the sobol design's"):
        design.analyze(ishigami_rows(saltelli(bounds, 8, seed=1)), "y")
    rows = ishigami_rows(design)
    rows[3]["status"] = "failed"
    with pytest.raises(ModelError, match=r"1 run\(s\) have no y \(failed or NaN\), e.g. 000003"):
        design.analyze(rows, "y")


def test_a_metric_that_never_varies_has_no_sobol_indices():
    design = saltelli({"x1": (0.0, 1.0), "x2": (0.0, 1.0), "x3": (0.0, 1.0)}, 8)
    rows = [{**r, "y": 2.5} for r in ishigami_rows(design)]
    with pytest.raises(ModelError, match=r"y is 2.5 in every run: it does not vary, so its "
                                         r"Sobol' indices .* are undefined"):
        design.analyze(rows, "y")


@pytest.mark.parametrize("make, message", [
    (lambda: saltelli({"x": (0.0, 1.0)}, 100), r"n must be a power of two .* got 100; try 128"),
    (lambda: morris({"x": (0.0, 1.0)}, 1), r"at least 2 trajectories"),
    (lambda: morris({"x": (0.0, 1.0)}, 4, levels=3), r"levels must be even"),
])
def test_bad_designs_are_refused(make, message):
    with pytest.raises(ModelError, match=message):
        make()


def test_sensitivity_from_the_command_line(tmp_path):
    from cosim import SimulationConfig
    path = tmp_path / "linear.yaml"
    sm.linear().to_yaml(path, simulation=SimulationConfig(dt=0.1, t_end=0.1))
    out = subprocess.run([sys.executable, "-m", "cosim.cli", "sweep", str(path), "--out",
                          str(tmp_path / "s"), "--sensitivity", "sobol", "64",
                          "--range", "x1=0:1", "--range", "x2=0:2", "--range", "x3=-1:1",
                          "--metric", "y=final:y.out", "--backend", "serial"],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "320 runs (0 failed)" in out.stdout
    lines = (tmp_path / "s" / "sensitivity_y.csv").read_text().splitlines()
    assert lines[0] == "parameter,S1,S1_conf,ST,ST_conf"
    assert [line.split(",")[0] for line in lines[1:]] == ["x1", "x2", "x3"]
    assert "x1" in out.stdout and "ST" in out.stdout
