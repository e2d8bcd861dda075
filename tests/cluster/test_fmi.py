"""FMI: FMUs built from Python sources during the run (pythonfmu), used as blocks and units,
and subsystems exported as FMUs run by fmpy."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from blocks import Gain, Sine, Step
from blocks.continuous import Integrator
from blocks.fmu import FmuBlock
from cluster.fmu_export import export_fmu
from cosim import (CosimConfig, Inport, Model, ModelError, Outport, SimulationConfig,
                   Simulator, Subsystem)

pytest.importorskip("pythonfmu")
SOURCES = Path(__file__).with_name("fmu_sources")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def lag_fmu(tmp_path_factory):
    d = tmp_path_factory.mktemp("fmu")
    subprocess.run([sys.executable, "-m", "pythonfmu", "build", "-f", str(SOURCES / "Lag.py"),
                    "-d", str(d)], check=True, capture_output=True)
    return d / "Lag.fmu"


def test_fmu_block_matches_fmpy_simulate_fmu(lag_fmu):
    from fmpy import simulate_fmu
    m = Model("f")
    m.add(Step("u", step_time=0.0, final=1.0), FmuBlock("lag", str(lag_fmu), 0.1))
    m.connect("u.out", "lag.u")
    logs = Simulator(m, SimulationConfig(dt=0.1, t_end=1.0)).run()
    ref = simulate_fmu(str(lag_fmu), stop_time=1.0, output_interval=0.1,
                       input=np.array([(0.0, 1.0), (1.0, 1.0)],
                                      dtype=[("time", float), ("u", float)]))
    np.testing.assert_allclose(logs["lag.y"][:, 0], ref["y"], rtol=0, atol=1e-12)


def plant_model():
    m = Model("m", parameters={"k": 2.0})
    p = Subsystem("plant", atomic=True, dt=0.01, solver="RK4")
    p.add(Inport("u"), Gain("g", "=k"), Integrator("x", 0.0), Outport("y"))
    p.connect("u.out", "g.in")
    p.connect("g.out", "x.in")
    p.connect("x.out", "y.in")
    m.add(p, Sine("src", frequency=0.5, sample_time=0.05), Gain("out", 1.0))
    m.connect("src.out", "plant.u")
    m.connect("plant.y", "out.in")
    return m


@pytest.fixture(scope="module")
def plant_fmu(tmp_path_factory):
    return export_fmu(plant_model(), "plant", tmp_path_factory.mktemp("exp") / "plant.fmu")


def test_exported_subsystem_imported_back_equals_native(plant_fmu):
    cfg = SimulationConfig(dt=0.01, t_end=1.0, cosim=CosimConfig(H=0.05))
    native = Simulator(plant_model(), cfg).run()
    m = plant_model()
    m.blocks[0] = FmuBlock("plant", str(plant_fmu), 0.05)      # the FMU, as a unit
    logs = Simulator(m, cfg).run()
    # The FMU runs the same LocalUnit inside: at the macro points the outputs agree exactly
    # (the FMU interface carries float64 values unchanged).
    t = logs.time_of("plant/fmu.y")
    nat = native["plant/x.out"][:, 0]
    nat_t = native.time_of("plant/x.out")
    np.testing.assert_array_equal(logs["plant/fmu.y"][:, 0],
                                  nat[np.searchsorted(nat_t, t - 1e-12)])
    np.testing.assert_array_equal(logs["main/out.out"], native["main/out.out"])


def test_fmpy_simulates_the_exported_fmu_like_the_native_run(plant_fmu):
    from fmpy import simulate_fmu
    t_in = np.arange(0.0, 1.0001, 0.05)
    res = simulate_fmu(str(plant_fmu), stop_time=1.0, step_size=0.05, output_interval=0.05,
                       input=np.array(list(zip(t_in, np.sin(np.pi * t_in))),
                                      dtype=[("time", float), ("u", float)]))
    native = Simulator(plant_model(), SimulationConfig(
        dt=0.01, t_end=1.0, cosim=CosimConfig(H=0.05))).run()
    nat_t = native.time_of("plant/x.out")
    nat = native["plant/x.out"][np.searchsorted(nat_t, res["time"] - 1e-12), 0]
    # fmpy samples its input table at the step times, so the held inputs are identical.
    np.testing.assert_allclose(res["y"], nat, rtol=0, atol=1e-12)


def test_fmu_that_cannot_save_state_is_refused_for_rollback(plant_fmu):
    m = plant_model()
    m.blocks[0] = FmuBlock("plant", str(plant_fmu), 0.05)
    with pytest.raises(ModelError, match="cannot save its state"):
        Simulator(m, SimulationConfig(dt=0.01, t_end=1.0, cosim=CosimConfig(
            H=0.05, adaptive=True))).run()


def test_corrupt_fmu_file_gives_a_clear_error(tmp_path):
    bad = tmp_path / "broken.fmu"
    bad.write_bytes(b"PK\x03\x04 this is not a zip")
    with pytest.raises(ModelError, match=r"broken\.fmu is not a valid FMU"):
        FmuBlock("b", str(bad), 0.1)


def test_export_fmu_command_line(tmp_path):
    path = tmp_path / "m.yaml"
    plant_model().to_yaml(path, simulation=SimulationConfig(dt=0.01, t_end=1.0))
    out = subprocess.run([sys.executable, "-m", "cosim.cli", "export-fmu", str(path),
                          "--subsystem", "plant", "-o", str(tmp_path / "p.fmu")],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "p.fmu").stat().st_size > 10_000
    bad = subprocess.run([sys.executable, "-m", "cosim.cli", "export-fmu", str(path),
                          "--subsystem", "nope", "-o", str(tmp_path / "x.fmu")],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert bad.returncode == 2 and "not a top-level atomic subsystem" in bad.stderr
