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
from cosim.fmi.export import export_fmu
from cosim import (CoSimulation, CosimConfig, Inport, Model, ModelError, Outport, SimulationConfig,
                   SimulationError, Simulator, Subsystem, simulation)

SOURCES = Path(__file__).with_name("fmu_sources")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def lag_fmu(tmp_path_factory):
    d = tmp_path_factory.mktemp("fmu")
    subprocess.run([sys.executable, "-m", "pythonfmu", "build", "-f", str(SOURCES / "Lag.py"),
                    "-d", str(d)], check=True, capture_output=True)
    return d / "Lag.fmu"


@pytest.fixture(scope="module")
def lag3_fmu(tmp_path_factory):
    """The same lag as an FMI 3.0 co-simulation FMU (pythonfmu3)."""
    d = tmp_path_factory.mktemp("fmu3")
    subprocess.run([sys.executable, "-m", "pythonfmu3", "build", "-f",
                    str(SOURCES / "Lag3.py"), "-d", str(d)], check=True, capture_output=True)
    return d / "Lag3.fmu"


@pytest.mark.parametrize("fmu, version", [("lag_fmu", "2.0"), ("lag3_fmu", "3.0")])
def test_fmu_block_matches_fmpy_simulate_fmu(fmu, version, request):
    from fmpy import read_model_description, simulate_fmu
    fmu = request.getfixturevalue(fmu)
    assert read_model_description(str(fmu)).fmiVersion == version
    m = Model("f")
    m.add(Step("u", step_time=0.0, final=1.0), FmuBlock("lag", str(fmu), 0.1))
    m.connect("u.out", "lag.u")
    logs = Simulator(m, SimulationConfig(dt=0.1, t_end=1.0)).run()
    ref = simulate_fmu(str(fmu), stop_time=1.0, output_interval=0.1,
                       input=np.array([(0.0, 1.0), (1.0, 1.0)],
                                      dtype=[("time", float), ("u", float)]))
    np.testing.assert_allclose(logs["lag.y"][:, 0], ref["y"], rtol=0, atol=1e-12)


def test_fmi3_and_fmi2_units_of_the_same_model_agree_bit_for_bit(lag_fmu, lag3_fmu):
    runs = []
    for fmu in (lag_fmu, lag3_fmu):
        m = Model("f")
        m.add(Sine("u", frequency=0.5, sample_time=0.05),
              FmuBlock("lag", str(fmu), 0.05, start_values={"tau": 0.3}), Gain("g", 2.0))
        m.connect("u.out", "lag.u")
        m.connect("lag.y", "g.in")
        runs.append(CoSimulation(m, SimulationConfig(dt=0.05, t_end=2.0,
                                                  cosim=CosimConfig(H=0.05))).run())
    fmi2, fmi3 = runs
    assert fmi3["lag/fmu.y"].shape == (41, 1)
    np.testing.assert_array_equal(fmi2["lag/fmu.y"], fmi3["lag/fmu.y"])
    np.testing.assert_array_equal(fmi2["g.out"], fmi3["g.out"])


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
    native = simulation(plant_model(), cfg).run()
    m = plant_model()
    m.blocks[0] = FmuBlock("plant", str(plant_fmu), 0.05)      # the FMU, as a unit
    logs = simulation(m, cfg).run()
    # The FMU runs the same LocalUnit inside: at the macro points the outputs agree exactly
    # (the FMU interface carries float64 values unchanged).
    t = logs.time_of("plant/fmu.y")
    nat = native["plant/x.out"][:, 0]
    nat_t = native.time_of("plant/x.out")
    np.testing.assert_array_equal(logs["plant/fmu.y"][:, 0],
                                  nat[np.searchsorted(nat_t, t - 1e-12)])
    np.testing.assert_array_equal(logs["out.out"], native["out.out"])


def test_fmpy_simulates_the_exported_fmu_like_the_native_run(plant_fmu):
    from fmpy import simulate_fmu
    t_in = np.arange(0.0, 1.0001, 0.05)
    res = simulate_fmu(str(plant_fmu), stop_time=1.0, step_size=0.05, output_interval=0.05,
                       input=np.array(list(zip(t_in, np.sin(np.pi * t_in))),
                                      dtype=[("time", float), ("u", float)]))
    native = CoSimulation(plant_model(), SimulationConfig(
        dt=0.01, t_end=1.0, cosim=CosimConfig(H=0.05))).run()
    nat_t = native.time_of("plant/x.out")
    nat = native["plant/x.out"][np.searchsorted(nat_t, res["time"] - 1e-12), 0]
    # fmpy samples its input table at the step times, so the held inputs are identical.
    np.testing.assert_allclose(res["y"], nat, rtol=0, atol=1e-12)


def test_fmu_that_cannot_save_state_is_refused_for_rollback(lag_fmu):
    m = Model("f")
    m.add(Sine("u", frequency=0.5, sample_time=0.05), FmuBlock("lag", str(lag_fmu), 0.05))
    m.connect("u.out", "lag.u")
    with pytest.raises(ModelError, match="cannot save its state"):
        CoSimulation(m, SimulationConfig(dt=0.05, t_end=1.0, cosim=CosimConfig(
            H=0.05, adaptive=True))).run()


def test_exported_fmu_rolls_back_like_the_native_unit(plant_fmu):
    from fmpy import read_model_description
    cs = read_model_description(str(plant_fmu)).coSimulation
    assert cs.canGetAndSetFMUstate and cs.canSerializeFMUstate
    cfg = SimulationConfig(dt=0.01, t_end=1.0, cosim=CosimConfig(
        H=0.2, adaptive=True, extrapolation=1, rtol=1e-5, atol=1e-6))
    native_sim = simulation(plant_model(), cfg)
    native = native_sim.run()
    m = plant_model()
    m.blocks[0] = FmuBlock("plant", str(plant_fmu), 0.01)
    sim = simulation(m, cfg)
    logs = sim.run()
    # Rejected macro steps were rolled back through the FMU's own state functions, and the
    # run retraced the native one step for step.
    assert sim.stats["rejected"] == native_sim.stats["rejected"] > 0
    assert [r.H for r in sim.step_log] == [r.H for r in native_sim.step_log]
    np.testing.assert_array_equal(logs["out.out"], native["out.out"])


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


@pytest.fixture(scope="module")
def oscillator_fmu(tmp_path_factory):
    """A model-exchange FMU compiled here from C (gcc, fmpy's FMI 2.0 headers)."""
    import shutil
    import zipfile

    import fmpy
    src = SOURCES / "oscillator"
    d = tmp_path_factory.mktemp("me")
    (d / "binaries" / "linux64").mkdir(parents=True)
    if shutil.which("gcc") is None:
        pytest.fail("gcc is needed to build the model-exchange test FMU")
    headers = Path(fmpy.__file__).parent / "c-code"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", f"-I{headers}", str(src / "oscillator.c"),
                    "-o", str(d / "binaries" / "linux64" / "oscillator.so")], check=True)
    fmu = d / "oscillator.fmu"
    with zipfile.ZipFile(fmu, "w") as z:
        z.write(src / "modelDescription.xml", "modelDescription.xml")
        z.write(d / "binaries" / "linux64" / "oscillator.so", "binaries/linux64/oscillator.so")
    return fmu


def test_model_exchange_fmu_integrated_by_cosim_matches_solve_ivp(oscillator_fmu):
    from scipy.integrate import solve_ivp

    from blocks.fmu import ModelExchangeFmuBlock
    m = Model("me")
    m.add(Sine("f", 0.5, 0.3), ModelExchangeFmuBlock("osc", str(oscillator_fmu),
                                                     {"k": 4.0, "c": 0.4}))
    m.connect("f.out", "osc.u")
    logs = Simulator(m, SimulationConfig(dt=0.01, t_end=5.0, solver="RK45", rtol=1e-11,
                                         atol=1e-13)).run()
    sol = solve_ivp(lambda t, z: [z[1], 0.5 * np.sin(2 * np.pi * 0.3 * t) - 4.0 * z[0]
                                  - 0.4 * z[1]], (0, 5.0), [1.0, 0.0], t_eval=logs.time,
                    rtol=1e-12, atol=1e-14, method="DOP853")
    # Both integrators at tolerances three orders tighter than the 1e-8 asserted.
    np.testing.assert_allclose(logs["osc.x"][:, 0], sol.y[0], rtol=0, atol=1e-8)


@pytest.mark.cluster
@pytest.mark.parametrize("backend", ["ray", "zmq-served"])
def test_fmu_unit_runs_in_a_ray_actor_and_behind_a_server(ray_session, plant_fmu, backend,
                                                          tmp_path):
    cfg = SimulationConfig(dt=0.01, t_end=0.5, cosim=CosimConfig(H=0.05))
    m = plant_model()
    m.blocks[0] = FmuBlock("plant", str(plant_fmu), 0.05)
    ref = simulation(m, cfg).run()
    m = plant_model()
    m.blocks[0] = FmuBlock("plant", str(plant_fmu), 0.05)
    server = None
    if backend == "ray":
        cosim = CosimConfig(H=0.05, backend="ray")
    else:
        unit_file = tmp_path / "fmu_unit.yaml"
        served = Model("served")
        served.add(FmuBlock("plant", str(plant_fmu), 0.05))
        served.to_yaml(unit_file, simulation=SimulationConfig(dt=0.05, t_end=0.0))
        server = subprocess.Popen([sys.executable, "-m", "cosim.cli", "serve", str(unit_file),
                                   "--bind", "tcp://127.0.0.1:0"], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, cwd=ROOT)
        address = server.stdout.readline().strip().rsplit(" on ", 1)[1]
        cosim = CosimConfig(H=0.05, backend="zmq", units={"plant": {"address": address}})
    sim = CoSimulation(m, SimulationConfig(dt=0.01, t_end=0.5, cosim=cosim))
    try:
        logs = sim.run()
    finally:
        sim.close()
        if server is not None:
            server.terminate()
            server.wait(timeout=10)
    for key in ref:
        np.testing.assert_array_equal(ref[key], logs[key], err_msg=key)


def test_exported_fmu_declares_structure_parameters_and_experiment(tmp_path):
    from fmpy import read_model_description
    from fmpy.validation import validate_fmu
    fmu = export_fmu(plant_model(), "plant", tmp_path / "plant.fmu", t_end=2.5)
    assert validate_fmu(str(fmu)) == []
    md = read_model_description(str(fmu))
    assert (md.defaultExperiment.stepSize, md.defaultExperiment.stopTime) == ("0.01", "2.5")
    params = {v.name: v for v in md.modelVariables if v.causality == "parameter"}
    assert list(params) == ["k"] and float(params["k"].start) == 2.0
    # y is the integrator's state: it depends on no input directly, and is an initial unknown.
    (out,) = md.outputs
    assert out.variable.name == "y" and out.dependencies == []
    assert [u.variable.name for u in md.initialUnknowns] == ["y"]


def test_exported_fmu_runs_in_a_python_without_cosim(plant_fmu):
    """fmpy runs the FMU in an isolated interpreter whose path holds the base site-packages
    (numpy, scipy, msgpack, fmpy) but not cosim: the FMU carries its engine."""
    import ast
    import sysconfig
    purelib = sysconfig.get_paths(vars={"base": sys.base_prefix,
                                        "platbase": sys.base_prefix})["purelib"]
    script = f"""
import sys
sys.path.append({purelib!r})    # no .pth files processed: no editable install of cosim
try:
    import cosim
except ImportError:
    pass
else:
    raise SystemExit("cosim is importable here: the test would prove nothing")
import numpy as np
from fmpy import simulate_fmu
t = np.arange(0.0, 1.0001, 0.05)
res = simulate_fmu({str(plant_fmu)!r}, stop_time=1.0, step_size=0.05, output_interval=0.05,
                   start_values={{"k": 3.0}},
                   input=np.array(list(zip(t, np.sin(np.pi * t))),
                                  dtype=[("time", float), ("u", float)]))
print(repr(res["y"].tolist()))
"""
    out = subprocess.run([sys._base_executable, "-I", "-S", "-c", script], capture_output=True,
                         text=True, timeout=300, cwd="/")
    assert out.returncode == 0, out.stderr[-3000:]
    y = np.array(ast.literal_eval(out.stdout.strip().splitlines()[-1]))
    m = plant_model()
    m.parameters["k"] = 3.0                       # the FMU's parameter, set by fmpy
    native = CoSimulation(m, SimulationConfig(dt=0.01, t_end=1.0,
                                              cosim=CosimConfig(H=0.05))).run()
    nat_t = native.time_of("plant/x.out")
    t = np.arange(0.0, 1.0001, 0.05)
    np.testing.assert_allclose(y, native["plant/x.out"][np.searchsorted(nat_t, t - 1e-12), 0],
                               rtol=0, atol=1e-12)


def test_exported_fmu_refuses_a_step_that_is_not_a_multiple_of_its_own(plant_fmu):
    m = plant_model()
    m.blocks[0] = FmuBlock("plant", str(plant_fmu), 0.033)
    m.blocks[1] = Sine("src", frequency=0.5, sample_time=0.033)
    with pytest.raises(SimulationError, match=r"FMU 'plant' \(plant\.fmu\): fmi2DoStep failed "
                       r"with status 4 \(fatal\); the FMU logged: \[error\] doStep at t=0: the "
                       r"step size 0\.033 s is not a multiple of this FMU's step 0\.01 s"):
        Simulator(m, SimulationConfig(dt=0.033, t_end=0.2)).run()


def test_exported_fmu_tells_fmpy_why_it_refuses_a_step(plant_fmu):
    """The reason reaches fmpy's logger callback as an error in category logStatusError
    (its own interpreter: fmpy keeps one logger proxy per process)."""
    script = f"""
import numpy as np
from fmpy import simulate_fmu
from fmpy.fmi1 import FMICallException
got = []
def logger(env, name, status, category, message):
    got.append((status, (category or b"").decode(), message.decode()))
try:
    simulate_fmu({str(plant_fmu)!r}, stop_time=0.2, step_size=0.033, output_interval=0.033,
                 debug_logging=True, logger=logger)
except FMICallException as err:
    print(repr((err.function, err.status, got)))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    import ast
    function, status, got = ast.literal_eval(out.stdout.strip().splitlines()[-1])
    assert (function, status) == ("fmi2DoStep", 4)
    assert (3, "logStatusError", "doStep at t=0: the step size 0.033 s is not a multiple of "
            "this FMU's step 0.01 s (use a multiple of 0.01)") in got
