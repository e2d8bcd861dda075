"""Every example runs as a user would run it (subprocess), with short horizons."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run(*args, cwd):
    out = subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_quickstart(tmp_path):
    out = run(str(ROOT / "examples" / "quickstart.py"), "--out", str(tmp_path / "r.npz"),
              cwd=tmp_path)
    assert "units: ctrl, main, motor" in out
    assert (tmp_path / "r.npz").exists()
    diff = float(out.split("max |co-simulated - monolithic| over the run: ")[1].split()[0])
    assert diff < 1e-9


@pytest.mark.slow
def test_electric_vehicle_with_plot(tmp_path):
    png = tmp_path / "ev.png"
    out = run(str(ROOT / "examples" / "electric_vehicle.py"), "--t-end", "20", "--plot",
              str(png), cwd=tmp_path)
    assert "units: battery, control, cycle, motor, vehicle" in out
    assert png.stat().st_size > 20_000
    evaluations = float(out.split("evaluated ")[1].split()[0])
    # the battery <-> motor coupling really is iterated, and solved again at each macro point
    assert evaluations >= 3


def test_electric_vehicle_model_file_is_the_python_example():
    """examples/electric_vehicle.yaml gives the Python example's co-simulation bit for bit."""
    from dataclasses import replace
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import electric_vehicle as ev
    finally:
        sys.path.pop(0)
    from cosim import CoSimulation, Model
    model = Model.from_yaml(ROOT / "examples" / "electric_vehicle.yaml")
    assert model.simulation == ev.config("local", 60.0)
    from_file = CoSimulation(model, replace(model.simulation, t_end=2.0)).run()
    from_python = CoSimulation(ev.build(), ev.config("local", 2.0)).run()
    assert sorted(from_file) == sorted(from_python)
    for key in from_python:
        assert from_file[key].tobytes() == from_python[key].tobytes(), key


@pytest.mark.cluster
@pytest.mark.slow
def test_electric_vehicle_on_ray_is_bit_identical_to_in_process(ray_session):
    import numpy as np
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import electric_vehicle as ev
    finally:
        sys.path.pop(0)
    from cosim import CoSimulation
    local = CoSimulation(ev.build(), ev.config("local", 3.0)).run()
    sim = CoSimulation(ev.build(), ev.config("ray", 3.0))
    try:
        remote = sim.run()
    finally:
        sim.close()
    assert sorted(local) == sorted(remote)
    for key in local:
        np.testing.assert_array_equal(local[key], remote[key], err_msg=key)


@pytest.mark.cluster
@pytest.mark.slow
def test_electric_vehicle_with_the_battery_served_over_zeromq(tmp_path):
    """The README's team workflow: export the battery, serve it, run against it."""
    ex = str(ROOT / "examples" / "electric_vehicle.py")
    run(ex, "--export-unit", "battery", str(tmp_path / "battery.yaml"), cwd=tmp_path)
    server = subprocess.Popen([sys.executable, "-m", "cosim.cli", "serve",
                               str(tmp_path / "battery.yaml"), "--bind", "tcp://127.0.0.1:0"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        address = server.stdout.readline().strip().rsplit(" on ", 1)[1]
        remote = run(ex, "--t-end", "3", "--remote", f"battery={address}", cwd=tmp_path)
        local = run(ex, "--t-end", "3", cwd=tmp_path)
    finally:
        server.terminate()
        server.wait(timeout=10)
    # Same numbers, printed: the summary lines agree exactly.
    assert remote.splitlines()[1:] == local.splitlines()[1:]


def test_bouncing_ball_example(tmp_path):
    out = run(str(ROOT / "examples" / "bouncing_ball.py"), cwd=tmp_path)
    errors = [float(line.split()[-1]) for line in out.splitlines()[1:]]
    assert len(errors) >= 4 and max(errors) < 1e-9


def test_model_file_example_with_the_cli(tmp_path):
    out = run("-m", "cosim.cli", "run", str(ROOT / "examples" / "servo.yaml"), "-p", "kp=1.6",
              "--out", str(tmp_path / "servo.npz"), cwd=tmp_path)
    assert "parameters: kp = 1.6" in out
    # A proportional loop around the library plant (static gain 2) settles at
    # 2 kp / (1 + 2 kp) of the setpoint (printed to 6 digits).
    final = float(out.split("plant/lag.out")[1].split()[0])
    assert abs(final - 3.2 / 4.2) < 1e-6
    assert (tmp_path / "servo.npz").exists()


def test_parameter_sweep_example(tmp_path):
    out = run(str(ROOT / "examples" / "parameter_sweep.py"), "--runs", "8", "--out",
              str(tmp_path / "s"), cwd=tmp_path)
    assert "8 runs, 8 ok" in out
    assert len((tmp_path / "s" / "results.csv").read_text().splitlines()) == 9


def test_linearize_example(tmp_path):
    out = run(str(ROOT / "examples" / "linearize.py"), cwd=tmp_path)
    assert "x = 0.500000000 m (F/k = 0.500000000)" in out


@pytest.mark.slow
def test_fmu_roundtrip_example(tmp_path):
    out = run(str(ROOT / "examples" / "fmu_roundtrip.py"), "--out", str(tmp_path / "p.fmu"),
              cwd=tmp_path)
    assert "max |diff| = 0.0e+00" in out
    assert "-0.000000" not in out                  # a value that rounds to zero shows as 0
