"""``cosim run`` / ``plan`` on co-simulated model files, as a user runs them (subprocess):
the co-simulation flags give what the Python API gives with the same CosimConfig, ``plan``
shows what the master does, ``--plot`` chooses signals before the run, the live view redraws,
the wall time is explained, and the commands that never simulate stay light."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from cosim import CoSimulation, CosimConfig, Model

ROOT = Path(__file__).resolve().parents[2]
EV = str(ROOT / "examples" / "electric_vehicle.yaml")
PAIR = str(Path(__file__).parent / "data" / "cosim_pair.yaml")
SERVO = str(ROOT / "examples" / "servo.yaml")


def cosim(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cosim.cli", *args], capture_output=True,
                          text=True, timeout=300, cwd=cwd)


def api_run(path: str, t_end: float, **changes):
    """The same model run through the Python API with the file's cosim section changed."""
    model = Model.from_yaml(path)
    cfg = model.simulation
    cosim_cfg = replace(cfg.cosim or CosimConfig(H=cfg.dt), **changes)
    sim = CoSimulation(model, replace(cfg, t_end=t_end, cosim=cosim_cfg))
    try:
        return sim.run()
    finally:
        sim.close()


@pytest.mark.parametrize("flags, changes", [
    (["--scheme", "jacobi", "--extrapolation", "0"], {"scheme": "jacobi", "extrapolation": 0}),
    (["--acceleration", "aitken", "--tolerance", "1e-9", "--max-iterations", "30"],
     {"acceleration": "aitken", "tolerance": 1e-9, "max_iterations": 30}),
    (["--no-iterate", "--cosim", "0.02"], {"iterate": False, "H": 0.02}),
    (["--feedthrough", "delay", "--relaxation", "0.8"],
     {"feedthrough": "delay", "relaxation": 0.8}),
])
def test_cosim_flags_give_the_python_apis_run(tmp_path, flags, changes):
    out = tmp_path / "r.npz"
    r = cosim("run", EV, "--t-end", "1", *flags, "--out", str(out))
    assert r.returncode == 0, r.stderr
    expected = api_run(EV, 1.0, **changes)
    from cosim.run.logs import Logs
    got = Logs.load(out)
    assert sorted(got) == sorted(expected)
    for key in expected:
        assert got[key].tobytes() == expected[key].tobytes(), key


def test_unit_options_reach_the_config_and_bad_ones_are_named(tmp_path):
    r = cosim("run", PAIR, "--unit", "plant.proces=a")
    assert r.returncode == 2
    assert "unknown option 'proces'; did you mean 'process'?" in r.stderr
    r = cosim("run", PAIR, "--unit", "plantprocess")
    assert r.returncode == 2 and "write NAME.OPTION=VALUE" in r.stderr
    r = cosim("run", PAIR, "--unit", "plnt.process=a")
    assert r.returncode == 2 and "plnt" in r.stderr and "plant" in r.stderr
    r = cosim("run", PAIR, "--server-key", str(tmp_path / "k.key"))
    assert r.returncode == 2 and "no unit has an address" in r.stderr
    r = cosim("run", PAIR, "--unit", "plant.address=tcp://127.0.0.1:9",
              "--server-key", str(tmp_path / "missing.key"))
    assert r.returncode == 2 and "no such key file" in r.stderr and "cosim keys" in r.stderr
    r = cosim("run", PAIR, "--monolithic", "--scheme", "jacobi")
    assert r.returncode == 2 and "--monolithic cannot be combined" in r.stderr
    # Units sharing a process on the local backend: the run is the plain run.
    r = cosim("run", PAIR, "--unit", "plant.process=p", "--unit", "ctrl.process=p")
    assert r.returncode == 0, r.stderr


def test_a_top_level_cosim_key_gets_a_hint(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text("model: m\nblocks:\n  a: {type: Constant, params: {value: 1.0}}\n"
                    "cosim: {H: 0.1}\nsimulation: {dt: 0.01, t_end: 1.0}\n")
    for command in ("check", "run"):
        r = cosim(command, str(path))
        assert r.returncode == 2
        assert f"{path}:4:1: (top level): unknown key 'cosim'; it belongs inside " \
               "'simulation': write it as 'simulation: {cosim: ...}'" in r.stderr


def test_plan_shows_what_the_master_does(tmp_path):
    dot = tmp_path / "ev.dot"
    r = cosim("plan", EV, "--dot", str(dot))
    assert r.returncode == 0, r.stderr
    # The oracle: the master of the same co-simulation, initialized in this process.
    model = Model.from_yaml(EV)
    sim = CoSimulation(model, model.simulation)
    try:
        sim.initialize()
        master = sim.master
        order, groups = master.order, master.couplings
        dts = {u: d.dt for u, d in master.desc.items()}
    finally:
        sim.close()
    assert f"order (Gauss-Seidel): {' -> '.join(order)}" in r.stdout
    for g in groups:
        assert " <-> ".join(g) in r.stdout
    rows = {line.split()[1]: line.split() for line in r.stdout.splitlines()
            if re.match(r"^\d+\s", line)}
    assert set(rows) == set(order)
    for u, row in rows.items():
        assert int(row[0]) == order.index(u) + 1
        assert row[2] == f"{dts[u]:g}"
    for link in sim.partition.links:
        assert f"  {link}" in r.stdout
    text = dot.read_text()
    assert text.startswith('digraph "electric_vehicle"')
    edges = [line for line in text.splitlines() if '" -> "' in line]
    assert len(edges) == len(sim.partition.links)
    assert 'color=red' in text                     # the battery <-> motor coupling


def test_plan_names_the_solver_of_units_with_continuous_state_only(tmp_path):
    """A unit of discrete blocks (a counter at 10 ms), one with an integrator (RK45), one
    whose only dynamics is a discrete delay under a configured RK4: only the integrator's
    unit has a solver to name."""
    from blocks import Constant, Gain, Sum, UnitDelay
    from blocks.continuous import Integrator
    from cosim import Inport, Outport, SimulationConfig, Subsystem
    count = Subsystem("count", atomic=True, dt=0.01)
    count.add(Constant("one", 1.0), Sum("s", "++"), UnitDelay("z", 0.0), Outport("n"))
    count.connect("one.out", "s.in1")
    count.connect("z.out", "s.in2", "n.in")
    count.connect("s.out", "z.in")
    plant = Subsystem("plant", atomic=True, dt=0.001, solver="RK45")
    plant.add(Inport("u"), Integrator("x", 0.0), Outport("y"))
    plant.connect("u.out", "x.in")
    plant.connect("x.out", "y.in")
    held = Subsystem("held", atomic=True, dt=0.002, solver="RK4")
    held.add(Inport("u"), Gain("g", 0.5), UnitDelay("z", 0.0), Outport("y"))
    held.connect("u.out", "g.in")
    held.connect("g.out", "z.in")
    held.connect("z.out", "y.in")
    m = Model("kinds")
    m.add(count, plant, held)
    m.connect("count.n", "plant.u")
    m.connect("plant.y", "held.u")
    path = tmp_path / "kinds.yaml"
    m.to_yaml(path, simulation=SimulationConfig(dt=0.001, t_end=0.1,
                                                cosim=CosimConfig(H=0.01, scheme="gauss-seidel")))
    r = cosim("plan", str(path))
    assert r.returncode == 0, r.stderr
    solver = {line.split()[1]: line.split()[4] for line in r.stdout.splitlines()
              if re.match(r"^\d+\s", line)}
    assert solver == {"count": "discrete", "plant": "RK45", "held": "discrete"}


def test_plot_signals_are_checked_before_the_run(tmp_path):
    png = tmp_path / "p.png"
    r = cosim("run", EV, "--plot", str(png), "vehicle/speed.out", "batery/*")
    assert r.returncode == 2
    assert "'batery/*' matches no logged signal" in r.stderr
    assert "ran in" not in r.stdout and not png.exists()      # nothing was simulated


def test_plot_legends_fit_the_figure(tmp_path):
    """A 14-signal panel with long names beside a 2-signal one: every legend lies inside the
    figure and overlaps no panel."""
    import matplotlib
    matplotlib.use("Agg")
    from cosim.run.logs import Logs
    from cosim.run.plotting import plot_logs
    t = np.linspace(0.0, 1.0, 101)
    names = [f"powertrain/inverter_phase_current_{i}.out" for i in range(14)] + \
        ["battery/v.out", "battery/soc.out"]
    values = {k: np.sin((i + 1) * t)[:, None] for i, k in enumerate(names)}
    logs = Logs(values, {k: t for k in names}, t)
    fig = plot_logs(logs, ["powertrain/*", "battery/*"], path=tmp_path / "p.png")
    renderer = fig.canvas.get_renderer()
    box = fig.bbox
    legends = [ax.get_legend() for ax in fig.axes]
    assert len(legends) == 2
    for legend in legends:
        extent = legend.get_window_extent(renderer)
        assert box.x0 <= extent.x0 and extent.x1 <= box.x1
        assert box.y0 <= extent.y0 and extent.y1 <= box.y1
        for ax in fig.axes:
            assert not extent.overlaps(ax.get_window_extent(renderer))
    drawn = {t.get_text() for legend in legends for t in legend.get_texts()}
    assert drawn == set(names)


def test_live_view_redraws_while_the_run_goes():
    import matplotlib
    matplotlib.use("Agg")
    from cosim import simulation
    from cosim.run.live import LiveView
    model = Model.from_yaml(PAIR)
    cfg = replace(model.simulation, t_end=20.0)
    sim = simulation(model, cfg)
    sim.initialize()
    view = LiveView(sim, ["plant/x.out", "ctrl/z.out"], tickrate=1000.0)
    seen = []
    original = view.update

    def counting():
        original()
        seen.append(float(view.lines["plant/x.out"].get_xdata()[-1]))
    view.update = counting
    try:
        view.run()
    finally:
        view.close()
        sim.close()
    assert view.redraws == len(seen) >= 2
    assert seen == sorted(seen) and seen[-1] == pytest.approx(20.0)
    # What is drawn at the end is the run's log (the oracle: a plain run).
    plain = simulation(Model.from_yaml(PAIR), cfg)
    try:
        logs = plain.run()
    finally:
        plain.close()
    np.testing.assert_array_equal(view.lines["plant/x.out"].get_ydata(),
                                  logs["plant/x.out"][:, 0])


def test_live_from_the_command_line(tmp_path):
    r = cosim("run", SERVO, "--live", "plant/*", "--live-backend", "Agg")
    assert r.returncode == 0, r.stderr
    assert int(re.search(r"live view: (\d+) redraws", r.stdout).group(1)) >= 1
    r = cosim("run", SERVO, "--live", "plnt/*", "--live-backend", "Agg")
    assert r.returncode == 2 and "'plnt/*' matches no logged signal" in r.stderr


def test_wall_time_is_explained():
    r = cosim("run", PAIR)
    assert r.returncode == 0, r.stderr
    line = r.stdout.splitlines()[-1]
    m = re.match(r"wall time ([\d.]+) s = (.*)$", line)
    assert m, line
    parts = dict((name, float(v)) for name, v in
                 (re.match(r"(.+?) ([\d.]+) s", p.strip()).groups()
                  for p in m.group(2).split(" + ")))
    assert {"start-up", "reading the model", "compiling", "run"} <= \
        {re.sub(r" \(.*\)$", "", k) for k in parts}
    # Each part is rounded to 0.01 s or 0.001 s as printed: the sum agrees to that rounding.
    assert sum(parts.values()) == pytest.approx(float(m.group(1)), abs=0.025)
    ran = float(re.search(r"ran in ([\d.]+) s", r.stdout).group(1))
    assert parts["run"] == pytest.approx(ran, abs=0.0015)


@pytest.mark.parametrize("args", [["--help"], ["check", SERVO], ["plan", SERVO],
                                  ["check", EV], ["plan", EV]])
def test_commands_that_do_not_simulate_import_nothing_heavy(args):
    code = ("import sys, runpy; sys.argv = ['cosim', *sys.argv[1:]]\n"
            "from cosim.cli import main\n"
            "status = main(sys.argv[1:])\n"
            "heavy = sorted(m for m in ('scipy', 'matplotlib', 'ray', 'zmq', 'fmpy', "
            "'pyarrow', 'h5py') if m in sys.modules)\n"
            "print('HEAVY', heavy, file=sys.stderr); sys.exit(status)")
    r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert "HEAVY []" in r.stderr


def test_export_unit_writes_a_file_check_run_and_serve_accept(tmp_path):
    unit = tmp_path / "battery.yaml"
    r = cosim("export-unit", EV, "--subsystem", "battery", "-o", str(unit))
    assert r.returncode == 0, r.stderr
    assert "inputs: current; outputs: v_batt, soc_out" in r.stdout
    r = cosim("check", str(unit))
    assert r.returncode == 0 and r.stdout.startswith("OK: "), r.stderr
    r = cosim("run", str(unit), "--t-end", "0.01")
    assert r.returncode == 0, r.stderr
    # The unit the server would serve is the subsystem, with the unit's ports.
    from cosim.model.diagram import Subsystem
    served = Model.from_yaml(unit)
    (battery,) = [b for b in served.blocks if isinstance(b, Subsystem)]
    original = Model.from_yaml(EV)["battery"]
    assert battery.name == "battery" and battery.atomic and battery.dt == original.dt
    assert battery.input_names == original.input_names
    assert battery.output_names == original.output_names
    assert served.parameters == Model.from_yaml(EV).parameters
    for bad, needle in [("vehicl", "is not a top-level atomic subsystem of model "
                                   "'electric_vehicle' (its atomic subsystems: cycle"),
                        ("motor/limit", "is not a top-level atomic subsystem")]:
        r = cosim("export-unit", EV, "--subsystem", bad, "-o", str(tmp_path / "x.yaml"))
        assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr


def test_realtime_run_is_paced_and_logs_the_plain_run(tmp_path):
    r = cosim("run", SERVO, "--realtime", "10", "--out", str(tmp_path / "rt.npz"))
    assert r.returncode == 0, r.stderr
    # Never ahead of the wall clock: 2 simulated seconds at 10x take at least 0.2 s.
    assert float(re.search(r"ran in ([\d.]+) s", r.stdout).group(1)) >= 0.2
    plain = cosim("run", SERVO, "--out", str(tmp_path / "plain.npz"))
    assert plain.returncode == 0, plain.stderr
    from cosim.run.logs import Logs
    a, b = Logs.load(tmp_path / "rt.npz"), Logs.load(tmp_path / "plain.npz")
    assert sorted(a) == sorted(b)
    for key in a:
        assert a[key].tobytes() == b[key].tobytes(), key


@pytest.mark.parametrize("key, home", [("dt", "simulation"), ("solver", "simulation")])
def test_a_key_one_level_too_high_names_its_section(tmp_path, key, home):
    path = tmp_path / "m.yaml"
    path.write_text(f"model: m\nblocks:\n  a: {{type: Constant, params: {{value: 1.0}}}}\n"
                    f"{key}: 0.1\nsimulation: {{dt: 0.01, t_end: 1.0}}\n")
    r = cosim("check", str(path))
    assert r.returncode == 2
    assert f"unknown key {key!r}; it belongs inside {home!r}" in r.stderr
