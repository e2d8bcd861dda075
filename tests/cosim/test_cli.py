"""The ``cosim`` command, run as a user runs it: in a subprocess, reading exit codes and output."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cosim import Model, simulation

DATA = Path(__file__).parent / "data"
SERVO = str(DATA / "servo.yaml")
FIVE = str(DATA / "five_problems.yaml")


def cosim(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cosim.cli", *args], capture_output=True,
                          text=True, timeout=120, cwd=cwd)


def test_run_with_overrides_saves_the_logs(tmp_path):
    out = tmp_path / "results.npz"
    r = cosim("run", SERVO, "-p", "kp=2", "-p", "setpoint=0.5*3", "--t-end", "1.5",
              "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert "model 'servo'" in r.stdout and "150 steps" in r.stdout
    assert "kp = 2" in r.stdout and "setpoint = =0.5*3" in r.stdout
    assert f"saved {out}" in r.stdout
    # The file holds what the same run gives in Python, bit for bit.
    model = Model.from_yaml(SERVO)
    model.parameters.update(kp=2, setpoint="=0.5*3")
    from dataclasses import replace
    logs = simulation(model, replace(model.simulation, t_end=1.5)).run()
    with np.load(out) as npz:
        np.testing.assert_array_equal(npz["time"], logs.time)
        for key in logs:
            assert npz[f"values/{key}"].tobytes() == logs[key].tobytes()
        assert npz["values/ref.out"][-1, 0] == 1.5


@pytest.mark.parametrize("args, needle", [
    (["-p", "kq=1"], "-p kq: not a parameter of model 'servo'; did you mean kp?"),
    (["-p", "kp"], "write NAME=VALUE"),
    (["-p", "kp=2*+"], "-p kp=2*+: syntax error"),
    (["-p", "kp=__import__('os')"], "not allowed"),
    (["-p", "kp=2*kpp"], "undefined name 'kpp' (did you mean 'kp'?)"),
    (["--t-end", "-1"], "t_end (-1.0) is before t0"),
])
def test_bad_overrides_are_usage_errors(args, needle):
    r = cosim("run", SERVO, *args)
    assert r.returncode == 2
    assert needle in r.stderr and "Traceback" not in r.stderr
    assert r.stdout == ""


def test_plan_prints_the_table_and_writes_dot(tmp_path):
    dot = tmp_path / "plan.dot"
    r = cosim("plan", SERVO, "--dot", str(dot))
    assert r.returncode == 0, r.stderr
    header = r.stdout.splitlines()[0].split()
    assert header == ["#", "level", "block", "type", "period", "offset", "feedthrough"]
    assert "plant/lag" in r.stdout and "FirstOrderLag" in r.stdout
    assert dot.read_text().startswith('digraph "servo"')


def test_check_good_model_and_library_file():
    r = cosim("check", SERVO)
    assert r.returncode == 0 and r.stdout.startswith("OK: ") and r.stderr == ""
    r = cosim("check", str(DATA / "plant_lib.yaml"))
    assert r.returncode == 0 and "library file (subsystem 'plant'" in r.stdout


def test_co_simulated_model_runs_and_shows_its_units(tmp_path):
    model = str(DATA / "cosim_pair.yaml")
    r = cosim("check", model)
    assert r.returncode == 0 and "co-simulation units: plant, ctrl, main" in r.stdout
    r = cosim("plan", model, "--blocks")
    assert r.returncode == 0 and "AtomicSubsystem" in r.stdout
    assert "co-simulation of 'atomic_pair': 3 units, macro step H = 0.05 s, jacobi" in r.stdout
    out = tmp_path / "co.npz"
    r = cosim("run", model, "--backend", "local", "-p", "kp=1.2", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert "3 units, co-simulated (H = 0.05 s, jacobi, backend local)" in r.stdout
    with np.load(out) as npz:
        assert "values/ctrl/kp.out" in npz.files


def test_check_bad_model_lists_every_problem_without_traceback():
    r = cosim("check", FIVE)
    assert r.returncode == 2
    assert r.stdout == ""
    assert "has 5 problems" in r.stderr
    located = [line for line in r.stderr.splitlines() if "five_problems.yaml:" in line]
    assert [int(line.split("five_problems.yaml:")[1].split(":")[0]) for line in located] == \
        [7, 8, 9, 12, 20]
    assert "Traceback" not in r.stderr


def test_compile_errors_found_after_loading_are_reported_too(tmp_path):
    path = tmp_path / "unconnected.yaml"
    path.write_text("model: u\nblocks:\n  g: {type: Gain}\nsimulation: {dt: 0.1, t_end: 1}\n")
    r = cosim("check", str(path))
    assert r.returncode == 2 and "g.in is not connected" in r.stderr


def test_debug_shows_the_traceback():
    r = cosim("check", FIVE, "--debug")
    assert r.returncode == 2
    assert "Traceback (most recent call last)" in r.stderr and "CompileError" in r.stderr
    assert "has 5 problems" in r.stderr


@pytest.mark.parametrize("debug", [False, True])
def test_simulation_failure_exits_1(debug):
    r = cosim("run", str(DATA / "sim_failure.yaml"), *(["--debug"] if debug else []))
    assert r.returncode == 1
    assert "simulation failed: SimulationError: [block 'f', t=0]" in r.stderr
    assert ("Traceback" in r.stderr) is debug


def test_blocks_lists_the_library_from_the_declarations():
    r = cosim("blocks")
    assert r.returncode == 0, r.stderr
    text = r.stdout
    for name in ("Gain  (blocks.math)", "Integrator  (blocks.continuous)",
                 "Inport  (cosim.model.diagram)", "Goto  (cosim.model.diagram)"):
        assert name in text
    r = cosim("blocks", "Sum", "Lookup1D")
    sum_, lookup = r.stdout.split("Lookup1D  ")
    assert "inputs:       set by the parameters (in1, in2 with the defaults)" in sum_
    assert "parameters:   signs='++', sample_time=None" in sum_
    assert "feedthrough:  yes" in sum_
    assert "parameters:   breakpoints, table, extrapolation='clip', sample_time=None" in lookup


@pytest.mark.parametrize("args, status, needle", [
    ([], 2, "choose a command"),
    (["run"], 2, "the following arguments are required: model"),
    (["run", "nowhere.yaml"], 2, "no such model file: nowhere.yaml"),
    (["run", SERVO, "--backend", "mpi"], 2,
     "invalid choice: 'mpi' (choose from 'local', 'ray', 'remote', 'zmq')"),
    (["run", SERVO, "--monolithic", "--cosim", "0.01"], 2, "--monolithic cannot be combined"),
    (["blocks", "Gian"], 2, "unknown block type 'Gian'; did you mean Gain?"),
    (["frobnicate"], 2, "invalid choice: 'frobnicate'"),
])
def test_usage_errors(args, status, needle):
    r = cosim(*args)
    assert r.returncode == status
    assert needle in r.stderr and "Traceback" not in r.stderr


def test_help_and_backend_option():
    r = cosim("run", "--help")
    assert r.returncode == 0 and "--backend {local,ray,remote,zmq}" in r.stdout
    r = cosim("run", SERVO, "--backend", "local")
    assert r.returncode == 0, r.stderr


def test_console_script_is_installed():
    from importlib.metadata import entry_points
    (ep,) = [e for e in entry_points(group="console_scripts") if e.name == "cosim"]
    assert ep.value == "cosim.cli:main"


def test_import_cosim_stays_light():
    code = ("import sys, cosim, cosim.cli; "
            "print(sorted(m for m in ('ray', 'zmq', 'yaml', 'jsonschema') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=60)
    assert r.stdout.strip() == "[]", r.stderr


def test_cosimulate_resume_and_plot_from_the_command_line(tmp_path):
    pair = str(DATA / "cosim_pair.yaml")
    mono = cosim("run", pair, "--monolithic", "--out", str(tmp_path / "mono.npz"))
    assert mono.returncode == 0, mono.stderr
    co = cosim("run", pair, "--cosim", "0.05", "--out", str(tmp_path / "co.npz"),
               "--plot", str(tmp_path / "co.png"))
    assert co.returncode == 0, co.stderr
    assert (tmp_path / "co.png").stat().st_size > 10_000
    with np.load(tmp_path / "co.npz") as z:
        # Units' signals are keyed "unit/block.port".
        assert "values/plant/x.out" in z.files and "values/ctrl/z.out" in z.files
    # A checkpoint written half way through (Python API) is resumed by the CLI.
    from cosim import CoSimulation, CosimConfig, Model, SimulationConfig
    model = Model.from_yaml(pair)
    cfg = SimulationConfig(dt=model.simulation.dt, t_end=model.simulation.t_end,
                           cosim=CosimConfig(H=0.05))
    sim = CoSimulation(model, cfg)
    sim.run(t_end=model.simulation.t_end / 2)
    sim.save_checkpoint(tmp_path / "half")
    full = CoSimulation(Model.from_yaml(pair), cfg).run()
    res = cosim("run", pair, "--cosim", "0.05", "--resume", str(tmp_path / "half"),
                "--out", str(tmp_path / "rest.npz"))
    assert res.returncode == 0, res.stderr
    with np.load(tmp_path / "rest.npz") as z:
        rest = z["values/plant/x.out"]
    np.testing.assert_array_equal(full["plant/x.out"][-len(rest):], rest)


def test_generated_block_reference_is_current():
    """docs/blocks.md is generated from the classes (`cosim blocks --markdown`): no drift."""
    from cosim.cli import block_reference
    text = (Path(__file__).resolve().parents[2] / "docs" / "blocks.md").read_text()
    assert text == block_reference(markdown=True), \
        "regenerate with: cosim blocks --markdown > docs/blocks.md"


def test_final_values_never_show_a_negative_zero(tmp_path):
    """-1 * 0.0 is -0.0 in IEEE arithmetic: logged as such (bit for bit the run), shown as 0."""
    from blocks import Constant, Gain, Mux
    from cosim import SimulationConfig
    m = Model("signs")
    m.add(Constant("zero", 0.0), Gain("neg", -1.0), Constant("small", -2.5e-7),
          Mux("both", 2))
    m.connect("zero.out", "neg.in")
    m.connect("neg.out", "both.in1")
    m.connect("small.out", "both.in2")
    path = tmp_path / "signs.yaml"
    m.to_yaml(path, simulation=SimulationConfig(dt=0.1, t_end=0.2))
    logs = simulation(Model.from_yaml(path), SimulationConfig(dt=0.1, t_end=0.2)).run()
    assert np.signbit(logs["neg.out"][-1, 0])          # the run itself keeps IEEE's sign
    r = cosim("run", str(path))
    assert r.returncode == 0, r.stderr
    shown = {line.split()[0]: line.split(None, 1)[1] for line in r.stdout.splitlines()
             if line.startswith("  ") and "." in line.split()[0]}
    assert shown["neg.out"] == "0"
    assert shown["small.out"] == "-2.5e-07"                 # a real negative keeps its sign
    assert shown["both.out"] == "[ 0.0e+00, -2.5e-07]"
    assert "-0 " not in r.stdout + " " and "-0]" not in r.stdout and "[-0." not in r.stdout
