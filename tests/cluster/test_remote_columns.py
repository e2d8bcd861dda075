"""A unit served by another team (``cosim serve`` of its own file) or run on Ray logs every
column the in-process unit logs, with the same samples: its ports as ``unit.port`` included,
whichever of them the master receives at the top level, another unit receives, or nobody."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from blocks import Gain, Sine, Sum, UnitDelay
from blocks.continuous import Integrator
from cosim import (CoSimulation, CosimConfig, Inport, Model, Outport, SimulationConfig,
                   Subsystem)

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[2]


def ports_model() -> Model:
    """Unit ``a`` has four outputs: ``y`` into unit ``b``, ``z`` into a top-level block,
    ``d`` a discrete (10 ms) signal nobody receives, ``w`` into both ``b`` and the top level."""
    a = Subsystem("a", atomic=True, dt=0.002, solver="RK4")
    a.add(Inport("u"), Integrator("x", 0.5), Gain("g", -3.0),
          UnitDelay("del", 0.25, sample_time=0.01),
          Outport("y"), Outport("z"), Outport("d"), Outport("w"))
    a.connect("u.out", "x.in")
    a.connect("x.out", "y.in", "g.in", "del.in")
    a.connect("g.out", "z.in", "w.in")
    a.connect("del.out", "d.in")
    b = Subsystem("b", atomic=True, dt=0.004, solver="RK45")
    b.add(Inport("u"), Inport("v"), Sum("s", "+-"), Integrator("x", 0.0), Outport("y"))
    b.connect("u.out", "s.in1")
    b.connect("v.out", "s.in2")
    b.connect("s.out", "x.in")
    b.connect("x.out", "y.in")
    m = Model("ports")
    m.add(a, b, Sine("src", frequency=0.7), Sum("e", "+-"), Gain("show", 2.0),
          Gain("also", 0.5))
    m.connect("src.out", "e.in1")
    m.connect("b.y", "e.in2")
    m.connect("e.out", "a.u")
    m.connect("a.y", "b.u")
    m.connect("a.w", "b.v", "also.in")
    m.connect("a.z", "show.in")
    return m


def config(**cosim) -> SimulationConfig:
    return SimulationConfig(dt=0.002, t_end=0.4, cosim=CosimConfig(
        H=0.02, scheme="gauss-seidel", extrapolation=1, **cosim))


def run(**cosim):
    sim = CoSimulation(ports_model(), config(**cosim))
    try:
        return sim.run()
    finally:
        sim.close()


def assert_same_columns(local, other):
    assert sorted(other) == sorted(local)
    for key in local:
        np.testing.assert_array_equal(other.time_of(key), local.time_of(key), err_msg=key)
        np.testing.assert_array_equal(other[key], local[key], err_msg=key)


@pytest.fixture(scope="module")
def served_a(tmp_path_factory):
    """Unit ``a`` exported to its own file (``cosim export-unit``) and served by
    ``cosim serve``, as another team would."""
    d = tmp_path_factory.mktemp("served")
    model_file = d / "ports.yaml"
    ports_model().to_yaml(model_file, simulation=config())
    unit_file = d / "a.yaml"
    subprocess.run([sys.executable, "-m", "cosim.cli", "export-unit", str(model_file),
                    "--subsystem", "a", "-o", str(unit_file)], check=True, cwd=d,
                   capture_output=True, timeout=120)
    proc = subprocess.Popen([sys.executable, "-m", "cosim.cli", "serve", str(unit_file),
                             "--bind", "tcp://127.0.0.1:0"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=d)
    try:
        line = proc.stdout.readline()
        assert line.startswith("serving a on "), line + proc.stderr.read()
        yield line.strip().rsplit(" on ", 1)[1]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_the_local_run_logs_every_port_of_a_unit():
    logs = run()
    # The model's own keys: as the monolithic run names them.
    assert {"a.y", "a.z", "a.d", "a.w", "b.y"} <= set(logs)
    assert not [k for k in logs if k.endswith(".in") and k.rpartition(".")[0].split("/")[-1]
                in ("y", "z", "d", "w")]


def test_a_unit_served_from_its_own_file_logs_the_local_columns(served_a):
    local = run()
    remote = run(units={"a": {"address": served_a}})
    assert_same_columns(local, remote)


def test_a_served_unit_logs_the_local_columns_under_a_log_selection(served_a):
    """The served unit logs what its own file selects (everything); the master shows the
    columns its selection names, as the in-process run does."""
    chosen = ("a.y", "a.d", "b/x.out", "e.out")
    local = run_selected(chosen)
    remote = run_selected(chosen, units={"a": {"address": served_a}})
    assert sorted(local) == sorted(chosen)
    assert_same_columns(local, remote)


def run_selected(log, **cosim):
    from dataclasses import replace
    sim = CoSimulation(ports_model(), replace(config(**cosim), log=log))
    try:
        return sim.run()
    finally:
        sim.close()


@pytest.mark.slow
def test_units_on_ray_log_the_local_columns(ray_session):
    assert_same_columns(run(), run(backend="ray"))
