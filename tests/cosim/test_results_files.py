"""Results files: every format gives back every signal's samples and time vector exactly, as
read by the library the format belongs to; the co-simulated run's keys are the monolithic
run's."""

import csv

import numpy as np
import pytest

from blocks import Constant, Gain, Sine
from blocks.discrete import UnitDelay
from cosim import CoSimulation, CosimConfig, Logs, Model, SimulationConfig, Simulator
from tests.cluster.scenarios import DT, motor_pi


def multirate_logs():
    """A multirate run with a signal of shape (3,) and one of shape (2, 2)."""
    m = Model("mr")
    m.add(Sine("s", frequency=2.0), Gain("g", [[1.0], [-2.0], [0.5]]),
          UnitDelay("d", 0.0, sample_time=0.03), Constant("m", [[1.0, 2.0], [3.0, 4.5]]))
    m.connect("s.out", "g.in", "d.in")
    return Simulator(m, SimulationConfig(dt=0.01, t_end=0.2)).run()


def assert_same(a, b):
    assert sorted(a) == sorted(b)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key, strict=True)
        np.testing.assert_array_equal(a.time_of(key), b.time_of(key), err_msg=key)


@pytest.mark.parametrize("suffix", [".csv", ".parquet", ".h5", ".mat", ".npz"])
def test_every_format_round_trips_exactly(tmp_path, suffix):
    logs = multirate_logs()
    assert logs["g.out"].shape[1:] == (3,) and logs["m.out"].shape[1:] == (2, 2)
    assert len(logs.time_of("d.out")) < len(logs.time_of("s.out"))       # multirate
    path = logs.save(tmp_path / f"r{suffix}")
    assert_same(Logs.load(path), logs)


def test_the_files_read_as_their_own_libraries_read_them(tmp_path):
    import h5py
    import pyarrow.parquet as pq
    from scipy.io import loadmat
    logs = multirate_logs()
    t, s, d = logs.time_of("s.out"), logs["s.out"][:, 0], logs["d.out"][:, 0]
    with open(logs.to_csv(tmp_path / "r")) as fh:
        rows = list(csv.DictReader(fh))
    assert [float(r["time"]) for r in rows] == list(t)
    assert [float(r["s.out"]) for r in rows] == list(s)
    assert [float(r["d.out"]) for r in rows if r["d.out"]] == list(d)
    assert {"g.out[0]", "g.out[2]", "m.out[1,0]"} <= set(rows[0])
    table = pq.read_table(logs.to_parquet(tmp_path / "r"))
    assert table.column("s.out").to_pylist() == list(s)
    assert table.column("d.out").null_count == len(t) - len(d)
    with h5py.File(logs.to_hdf5(tmp_path / "r"), "r") as f:
        np.testing.assert_array_equal(f["signals/d.out/values"][()], logs["d.out"])
        np.testing.assert_array_equal(f["signals/d.out/time"][()], logs.time_of("d.out"))
    m = loadmat(logs.to_mat(tmp_path / "r"), simplify_cells=True)
    sig = m["signals"]["m_out"]
    assert sig["key"] == "m.out"
    np.testing.assert_array_equal(sig["values"], logs["m.out"].reshape(len(t), 4))


def test_a_signal_sampled_twice_at_one_time_is_refused_by_tables_only(tmp_path):
    t = np.array([0.0, 0.5, 0.5, 1.0])
    logs = Logs({"x.out": np.arange(4.0)[:, None]}, {"x.out": t}, np.array([0.0, 0.5, 1.0]))
    with pytest.raises(ValueError, match=r"x\.out has two samples at one time.*write \.h5"):
        logs.to_csv(tmp_path / "r")
    assert_same(Logs.load(logs.to_hdf5(tmp_path / "r")), logs)


def test_unknown_suffix_names_the_formats(tmp_path):
    with pytest.raises(ValueError, match=r"unknown results format '\.xlsx'; use one of \.csv"):
        multirate_logs().save(tmp_path / "r.xlsx")


def test_cosimulated_and_monolithic_runs_have_the_same_keys():
    mono = Simulator(motor_pi(True), SimulationConfig(dt=DT, t_end=0.05, solver="RK4")).run()
    co = CoSimulation(motor_pi(True), SimulationConfig(dt=DT, t_end=0.05, cosim=CosimConfig(
        H=DT))).run()
    assert "ref.out" in co and "load.out" in co and "motor/w.out" in co
    # The subsystem blocks' own ports too ("motor.speed", "ctrl.v"): a unit logs a port only
    # another unit receives itself, as its Outport's input.
    assert set(co) == set(mono)
    for key in co:
        np.testing.assert_array_equal(co[key], mono[key], err_msg=key)


def test_a_units_output_feeding_top_level_blocks_has_the_monolithic_key():
    from tests.cosim.test_cosim_semantics import speed_loop
    mono = Simulator(speed_loop(0.01), SimulationConfig(dt=0.001, t_end=0.5)).run()
    co = CoSimulation(speed_loop(0.01), SimulationConfig(dt=0.001, t_end=0.5, cosim=CosimConfig(
        H=0.01))).run()
    assert "motor.speed" in co and not any("__" in k for k in co)
    assert set(co) == set(mono)
    # ctrl.v feeds only the motor unit: ctrl logs it at its own rate, the macro step.
    np.testing.assert_array_equal(co["ctrl.v"], mono["ctrl.v"])
    # The top-level unit (1 ms) sees it held between macro points (docs/cosim-semantics.md):
    # equal at the macro points.
    np.testing.assert_array_equal(co["motor.speed"][::10], mono["motor.speed"][::10])
    np.testing.assert_array_equal(co.time_of("motor.speed"), mono.time_of("motor.speed"))


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".mat", ".h5"])
def test_cosim_run_out_chooses_the_format_by_suffix(tmp_path, suffix):
    import subprocess
    import sys
    from pathlib import Path
    from cosim import Model, simulation
    servo = str(Path(__file__).parent / "data" / "servo.yaml")
    out = tmp_path / f"results{suffix}"
    r = subprocess.run([sys.executable, "-m", "cosim.cli", "run", servo, "--out", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert f"saved {out}" in r.stdout
    model = Model.from_yaml(servo)
    assert_same(Logs.load(out), simulation(model, model.simulation).run())


def _cosim_run(*args):
    import subprocess
    import sys
    from pathlib import Path
    servo = str(Path(__file__).parent / "data" / "servo.yaml")
    return subprocess.run([sys.executable, "-m", "cosim.cli", "run", servo, *args],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("where, message", [
    ("{tmp}/", "is a directory; give a file name"),
    ("{tmp}/missing/r.npz", "no directory"),
    ("{tmp}/file/r.npz", "no directory"),
])
def test_an_unusable_results_path_is_refused_before_the_run(tmp_path, where, message):
    (tmp_path / "file").write_text("")
    r = _cosim_run("--out", where.format(tmp=tmp_path))
    assert r.returncode != 0 and message in r.stderr, r.stderr
    assert "run" not in r.stdout                       # nothing ran
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


@pytest.mark.parametrize("suffix", [".npz", ".csv"])
def test_a_failed_results_write_leaves_the_previous_file_whole(tmp_path, monkeypatch, suffix):
    import errno
    import os
    from cosim.run import results
    path = multirate_logs().save(tmp_path / f"r{suffix}")
    before = path.read_bytes()

    def full_disk(src, dst):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(results.os, "replace", full_disk)
    with pytest.raises(OSError, match="No space left"):
        Logs({"x": np.ones((3, 1))}, {"x": np.arange(3.0)}, np.arange(3.0)).save(path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == [path.name]     # no temporary left
