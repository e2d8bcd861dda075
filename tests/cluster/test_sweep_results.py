"""A sweep's results directory cannot lie: another sweep's rows are refused, a torn row is
dropped and its run done again, and the resumed table equals an uninterrupted sweep's."""

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cluster.sweep import final, grid, lhs, maximum, sobol, sweep
from cosim import ModelError
from cosim.config import SimulationConfig

from tests.cluster import sweep_models as sm

ROOT = Path(__file__).resolve().parents[2]
POINTS = grid({"gain": [0.5, 1.0, 2.0], "tau": [0.1, 0.3]})
REDUCERS = {"y_end": final("plant.out")}


def run(out, model=sm.lag, config=sm.CONFIG, points=POINTS, reducers=REDUCERS, **kw):
    return sweep(model, config, points, reducers, out_dir=out, backend="serial", **kw)


def without_wall_time(rows):
    return [{k: v for k, v in r.items() if k != "wall_time"} for r in rows]


@pytest.mark.parametrize("change, part", [
    (dict(model=sm.cosim_lag, reducers={"y_end": final("plant/lag.out")}), "model"),
    (dict(config=SimulationConfig(dt=0.01, t_end=2.0, solver="RK4")), "config"),
    (dict(points=grid({"gain": [0.5, 1.0], "tau": [0.1, 0.3]})), "design"),
    (dict(reducers={"y_end": maximum("plant.out")}), "reducers"),
])
def test_resuming_another_sweep_is_refused_naming_what_changed(tmp_path, change, part):
    first = run(tmp_path / "study")
    with pytest.raises(ModelError, match=rf"holds the results of a sweep with another {part}\b"):
        run(tmp_path / "study", **change)
    # By explicit choice it goes beside, and the first sweep's results are untouched.
    other = run(tmp_path / "study", if_changed="new", **change)
    assert len(other) == len(change.get("points", POINTS))
    siblings = sorted(p.name for p in tmp_path.iterdir())
    assert len(siblings) == 2 and siblings[0] == "study" and siblings[1].startswith("study-")
    assert without_wall_time(run(tmp_path / "study")) == without_wall_time(first)


def test_a_torn_last_row_is_dropped_and_its_run_done_again(tmp_path):
    clean = run(tmp_path / "clean")
    study = tmp_path / "study"
    run(study)
    csv_path = study / "results.csv"
    data = csv_path.read_bytes()
    last = data.rstrip(b"\r\n").rfind(b"\n") + 1
    csv_path.write_bytes(data[:last + (len(data) - last) // 2])    # half the last row
    rows = run(study)
    assert without_wall_time(rows) == without_wall_time(clean)
    assert csv_path.read_bytes().endswith(b"\n")
    assert len(csv_path.read_text().splitlines()) == len(POINTS) + 1


def test_a_sweep_killed_while_writing_a_batch_resumes_to_the_uninterrupted_table(tmp_path):
    clean = run(tmp_path / "clean")
    study = tmp_path / "study"
    # A sweep process that dies (SIGKILL) in the middle of writing a batch of rows: the
    # first three reach the disk whole, the fourth half.
    script = textwrap.dedent(f"""
        import os, signal
        import cluster.sweep_results as results
        from tests.cluster.test_sweep_results import run

        class Dying(results.ResultsTable):
            written = 0

            def write_text(self, text):
                lines = text.splitlines(keepends=True)
                if lines[0].startswith("run_id,"):          # the header
                    return super().write_text(text)
                if self.written + len(lines) < 4:           # batches before the fatal one
                    self.written += len(lines)
                    return super().write_text(text)
                whole = 3 - self.written
                super().write_text("".join(lines[:whole]) + lines[whole][: len(lines[whole]) // 2])
                os.kill(os.getpid(), signal.SIGKILL)

        import cluster.sweep
        cluster.sweep.ResultsTable = Dying
        run({str(study)!r})
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert proc.returncode == -9
    data = (study / "results.csv").read_bytes()
    assert not data.endswith(b"\n") and data.count(b"\n") == 4          # header + 3 rows
    rows = run(study)
    assert without_wall_time(rows) == without_wall_time(clean)


# -- a table you can trust while it runs --------------------------------------------------------

def no_signal_here(logs):
    raise KeyError("plant.velocity")


def test_a_failing_reducer_marks_only_its_own_column(tmp_path):
    rows = run(tmp_path / "study", reducers={"y_end": final("plant.out"),
                                             "broken": no_signal_here,
                                             "y_max": maximum("plant.out")})
    alone = run(tmp_path / "alone", reducers={"y_end": final("plant.out"),
                                              "y_max": maximum("plant.out")})
    for r, a in zip(rows, alone):
        assert r["status"] == "ok" and r["error"] == ""
        assert r["y_end"] == a["y_end"] and r["y_max"] == a["y_max"]
        assert math.isnan(r["broken"])
        assert r["reducer_errors"] == "broken: KeyError: 'plant.velocity'"
        assert a["reducer_errors"] == ""


@pytest.mark.parametrize("reducers, config, message", [
    ({"y": final("plant.outt")}, sm.CONFIG,
     r"reducer 'y' reads 'plant.outt', which is not a signal of model 'lag'; "
     r"did you mean 'plant.out'\?"),
    ({"y": final("plant.out")}, SimulationConfig(dt=0.01, t_end=1.0, log=["u.out"]),
     r"reducer 'y' reads 'plant.out', which is not logged: add it to SimulationConfig.log"),
])
def test_reducer_signals_are_checked_before_the_first_run(tmp_path, reducers, config, message):
    with pytest.raises(ModelError, match=message):
        run(tmp_path / "study", config=config, reducers=reducers)
    assert not (tmp_path / "study").exists()          # refused before anything ran


def test_design_parameters_are_checked_before_the_first_run(tmp_path):
    with pytest.raises(ModelError, match=r"the design sets 'gian' \(did you mean 'gain'\?\)"):
        run(tmp_path / "study", points=grid({"gian": [1.0, 2.0]}))
    assert not (tmp_path / "study").exists()


def test_signals_inside_subsystems_are_known(tmp_path):
    rows = run(tmp_path / "s", model=sm.cosim_lag, config=sm.COSIM_CONFIG,
               reducers={"y_end": final("plant/lag.out")})
    assert all(r["status"] == "ok" for r in rows)
    with pytest.raises(ModelError, match=r"did you mean 'plant/lag.out'"):
        run(tmp_path / "t", model=sm.cosim_lag, config=sm.COSIM_CONFIG,
            reducers={"y_end": final("plant/lagg.out")})


@pytest.mark.parametrize("key, logged", [("plant.y", "plant/inner/lag.out"),
                                         ("plant/inner.y", "plant/inner/lag.out"),
                                         ("plant/inner.u", "u.out")])
def test_a_virtual_subsystems_port_is_refused_naming_the_signal_it_carries(tmp_path, key,
                                                                           logged):
    # Runs log real blocks' outputs; a virtual subsystem's port is a wire through it.
    with pytest.raises(ModelError, match=f"reducer 'y' reads '{key}', a port of virtual "
                                         f"subsystem '{key.rpartition('.')[0]}'.* logged as "
                                         f"'{logged}'; read that"):
        run(tmp_path / "study", model=sm.virtual_lag, reducers={"y": final(key)})
    assert not (tmp_path / "study").exists()
    rows = run(tmp_path / "ok", model=sm.virtual_lag, reducers={"y": final(logged)})
    assert all(r["status"] == "ok" and r["reducer_errors"] == "" for r in rows)


def test_progress_shows_done_failed_and_rate(tmp_path, capsys):
    sweep(sm.broken, sm.CONFIG, grid({"gain": [1.0, 2.0, 3.0]}), REDUCERS, backend="serial",
          progress=True)
    last = capsys.readouterr().err.replace("\r", "\n").strip().splitlines()[-1]
    assert "3/3" in last and "failed 1" in last and "run/s" in last, last


@pytest.mark.parametrize("design, message", [
    (lambda: grid([1.0, 2.0]), r"grid: give a dict with one entry per parameter"),
    (lambda: grid({"gain": 1.0}), r"grid: gain needs a list of values, got 1.0"),
    (lambda: lhs({"gain": (2.0, 1.0)}, 4), r"lhs: gain needs low < high, got \(2.0, 1.0\)"),
    (lambda: sobol({"gain": 1.0}, 4), r"sobol: gain needs a range \(low, high\), got 1.0"),
])
def test_every_design_takes_a_dict_and_says_what_is_wrong(design, message):
    with pytest.raises(ModelError, match=message):
        design()


def test_parquet_results_carry_the_fingerprint(tmp_path):
    import pyarrow.parquet as pq
    rows = run(tmp_path / "study")
    table = pq.read_table(tmp_path / "study" / "results.parquet")
    meta = json.loads(table.schema.metadata[b"cosim.sweep"])
    assert meta == json.loads((tmp_path / "study" / "sweep.json").read_text())
    assert set(meta) == {"model", "config", "design", "reducers"}
    assert table.column("y_end").to_pylist() == [r["y_end"] for r in rows]


def test_parameters_that_change_the_structure_are_named(tmp_path, caplog):
    design = grid({"n": [1, 2], "gain": [1.0, 2.0, 3.0]})
    with caplog.at_level("WARNING", logger="cosim.sweep"):
        rows = run(tmp_path / "s", model=sm.sized, points=design,
                   reducers={"y": final("g.out")})
    assert [r["y"] for r in rows] == [1.0, 2.0, 3.0] * 2
    assert "the runs compiled code of 2 structures" in caplog.text
    assert "parameter(s) n change it" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="cosim.sweep"):
        run(tmp_path / "t", model=sm.sized, points=grid({"gain": [1.0, 2.0, 3.0]}),
            reducers={"y": final("g.out")})
    assert "structure" not in caplog.text


def test_resuming_after_a_referenced_file_changed_is_refused(tmp_path):
    """A parameter changed in a library file the model references (or in a data file a
    block names) changes the model's fingerprint: the old rows are not returned."""
    import shutil
    for name in ("servo.yaml", "plant_lib.yaml"):
        shutil.copy(ROOT / "examples" / name, tmp_path / name)
    model = str(tmp_path / "servo.yaml")
    design = grid({"kp": [0.5, 0.8]})
    reducers = {"y_end": final("rec.in")}
    first = sweep(model, None, design, reducers, out_dir=tmp_path / "study", backend="serial")
    again = sweep(model, None, design, reducers, out_dir=tmp_path / "study", backend="serial")
    assert without_wall_time(again) == without_wall_time(first)       # unchanged: resumes
    lib = tmp_path / "plant_lib.yaml"
    lib.write_text(lib.read_text().replace("gain: 2.0", "gain: 3.0"))
    with pytest.raises(ModelError, match=r"with another model\b"):
        sweep(model, None, design, reducers, out_dir=tmp_path / "study", backend="serial")
    changed = sweep(model, None, design, reducers, out_dir=tmp_path / "study",
                    backend="serial", if_changed="new")
    assert [r["y_end"] for r in changed] != [r["y_end"] for r in first]
