"""A sweep's results directory cannot lie: another sweep's rows are refused, a torn row is
dropped and its run done again, and the resumed table equals an uninterrupted sweep's."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cluster.sweep import final, grid, maximum, sweep
from cosim import ModelError
from cosim.config import SimulationConfig

from tests.cluster import sweep_models as sm

ROOT = Path(__file__).resolve().parents[2]
POINTS = grid(gain=[0.5, 1.0, 2.0], tau=[0.1, 0.3])
REDUCERS = {"y_end": final("plant.out")}


def run(out, model=sm.lag, config=sm.CONFIG, points=POINTS, reducers=REDUCERS, **kw):
    return sweep(model, config, points, reducers, out_dir=out, backend="serial", **kw)


def without_wall_time(rows):
    return [{k: v for k, v in r.items() if k != "wall_time"} for r in rows]


@pytest.mark.parametrize("change, part", [
    (dict(model=sm.cosim_lag, reducers={"y_end": final("plant/lag.out")}), "model"),
    (dict(config=SimulationConfig(dt=0.01, t_end=2.0, solver="RK4")), "config"),
    (dict(points=grid(gain=[0.5, 1.0], tau=[0.1, 0.3])), "design"),
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


def test_a_sweep_killed_while_writing_a_row_resumes_to_the_uninterrupted_table(tmp_path):
    clean = run(tmp_path / "clean")
    study = tmp_path / "study"
    # A sweep process that dies (SIGKILL) in the middle of writing its fourth row.
    script = textwrap.dedent(f"""
        import os, signal
        import cluster.sweep_results as results
        from tests.cluster.test_sweep_results import run

        class Dying(results.ResultsTable):
            def add(self, row):
                if len(self.done) == 3:
                    text = ",".join(str(row[c]) for c in self.columns)
                    self._fh.write(text[: len(text) // 2])
                    self._fh.flush()
                    os.fsync(self._fh.fileno())
                    os.kill(os.getpid(), signal.SIGKILL)
                super().add(row)

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
