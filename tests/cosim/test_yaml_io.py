"""Model files: round trips bit for bit, every problem located, hostile files refused."""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from blocks import (Constant, DiscreteStateSpace, Gain, Integrator, Lookup1D, Mux, Recorder,
                    Saturation, Sine, Step, Sum, UnitDelay)
from blocks.continuous import ODE
from cosim import Block, CompileError, Model, ModelError, SimulationConfig, simulation
from cosim.model import declarations, registry as blocktypes
from cosim import modelfile
from cosim.modelfile import reader
from cosim.config import CosimConfig
from cosim.model.events import Scheduled, ZeroCrossing
from cosim.model.library import register
from cosim.model.diagram import From, Goto, Inport, Outport, Reference, Subsystem

DATA = Path(__file__).parent / "data"


# --- models built in Python ---------------------------------------------------------------

@register("yaml_io_test_shaper")
def shaper(name):
    """Library definition (level 3): gain, saturation and a delay, parameterised by context."""
    sub = Subsystem(name, context={"gain": 1.0, "limit": "=2*gain"})
    sub.add(Inport("u"), Gain("g", "=gain"), Saturation("sat", "=-limit", "=limit"),
            UnitDelay("z", initial="=gain/10"), Outport("y"))
    sub.connect("u.out", "g.in")
    sub.connect("g.out", "sat.in")
    sub.connect("sat.out", "z.in")
    sub.connect("z.out", "y.in")
    return sub


def three_level_model():
    """Three levels of virtual subsystems, a library reference with overrides, a parameter
    overridden in a diagram context, expressions, arrays, tuples, Goto/From across levels."""
    m = Model("three_level", parameters={
        "k": 3.0, "half": 0.5, "d0": 0.25,
        "A": np.array([[0.9, 0.1], [-0.2, 0.8]]), "wn": "=2*pi*0.7"})
    outer = Subsystem("outer", context={"k2": "=k*half", "half": 0.4})   # shadows 'half'
    inner = Subsystem("inner", context={"scale": "=half*10"})
    inner.add(Inport("u"), Reference("amp", "yaml_io_test_shaper",
                                     overrides={"gain": "=k2", "limit": "=scale"}),
              From("fb", "loop"), Sum("s", "+-"), Outport("y"))
    inner.connect("u.out", "amp.u")
    inner.connect("amp.y", "s.in1")
    inner.connect("fb.out", "s.in2")
    inner.connect("s.out", "y.in")
    outer.add(Inport("u"), inner, UnitDelay("d", "=d0"),
              Goto("send", "loop", visibility="scoped"), Gain("h", "=half"), Outport("y"))
    outer.connect("u.out", "inner.u")
    outer.connect("inner.y", "d.in", "h.in")
    outer.connect("d.out", "send.in")
    outer.connect("h.out", "y.in")
    m.add(Sine("src", amplitude=1.5, frequency="=wn/(2*pi)", phase=-0.0),
          Step("step", step_time=0.5, final=2.0, sample_time=(0.02, 0.01)),
          Mux("mux", n_inputs=2),
          DiscreteStateSpace("ss", A="=A", B=np.array([[1.0, 0.0], [0.0, 1.0]]),
                             C=[[1.0, 1.0]], x0=(0.1, -0.2)),
          outer,
          Lookup1D("lut", breakpoints=np.array([-1.0, 0.0, 1.0]), table=(0.0, 0.5, 1e-300)),
          Recorder("rec", n_inputs=2))
    m.connect("src.out", "outer.u", "mux.in1")
    m.connect("step.out", "mux.in2")
    m.connect("mux.out", "ss.in")
    m.connect("outer.y", "lut.in", "rec.in1")
    m.connect("ss.out", "rec.in2")
    return m


def atomic_model():
    """Atomic subsystems at their own rates, solvers and options."""
    m = Model("atomic_pair", parameters={"kp": 0.8})
    plant = Subsystem("plant", atomic=True, dt=0.01, solver="RK4", options={"fast": False})
    plant.add(Inport("u"), Integrator("x", 1.0), Gain("c", -2.0), Sum("s", "++"), Outport("y"))
    plant.connect("u.out", "s.in1")
    plant.connect("x.out", "c.in", "y.in")
    plant.connect("c.out", "s.in2")
    plant.connect("s.out", "x.in")
    ctrl = Subsystem("ctrl", atomic=True, dt=0.05, context={"gain": "=kp"})
    ctrl.add(Inport("e"), Gain("kp", "=gain"), UnitDelay("z", 0.0), Outport("u"))
    ctrl.connect("e.out", "kp.in")
    ctrl.connect("kp.out", "z.in")
    ctrl.connect("z.out", "u.in")
    m.add(Sine("ref", frequency=0.2, sample_time=0.01), plant, ctrl, Sum("err", "+-"))
    m.connect("ref.out", "err.in1")
    m.connect("plant.y", "err.in2")
    m.connect("err.out", "ctrl.e")
    m.connect("ctrl.u", "plant.u")
    return m


def events_model():
    """A bouncing mass: a zero crossing with a state reset, a scheduled reset and a stop."""
    m = Model("bounce", parameters={"g": 9.81})
    m.add(Constant("grav", "=-g"), Integrator("v", 0.0), Integrator("x", 1.0))
    m.connect("grav.out", "v.in")
    m.connect("v.out", "x.in")
    m.add_event(ZeroCrossing("floor", "x", direction="falling", reset={"v": [4.0]}),
                Scheduled("kick", times=[0.7], reset={"v": np.array([1.5])}),
                Scheduled("halt", times=[1.75], stop=True))
    return m


MODELS = {
    "three_level": (three_level_model, SimulationConfig(dt=0.01, t_end=2.0)),
    "three_level_interpreted": (three_level_model,
                                SimulationConfig(dt=0.01, t_end=1.0, fast=False)),
    "atomic": (atomic_model, SimulationConfig(dt=0.01, t_end=1.0, solver="RK4")),
    "events": (events_model, SimulationConfig(dt=0.01, t_end=3.0, solver="RK45",
                                              log=("x.out", "v.out"))),
}


def assert_same_logs(a, b):
    assert sorted(a) == sorted(b)
    for key in a:
        x, y = np.asarray(a[key]), np.asarray(b[key])
        assert x.dtype == y.dtype and x.shape == y.shape, key
        assert x.tobytes() == y.tobytes(), f"{key} differs"   # bit for bit, -0.0 and nan too
        assert np.asarray(a.time_of(key)).tobytes() == np.asarray(b.time_of(key)).tobytes()


# --- round trips ----------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(MODELS))
def test_python_and_yaml_twin_give_bit_identical_logs(name, tmp_path):
    build, cfg = MODELS[name]
    path = tmp_path / f"{name}.yaml"
    text = build().to_yaml(path, simulation=cfg)
    assert path.read_text() == text
    twin = Model.from_yaml(path)
    assert twin.simulation == cfg
    sim_py, sim_yaml = simulation(build(), cfg), simulation(twin, twin.simulation)
    assert_same_logs(sim_py.run(), sim_yaml.run())
    assert sim_py.event_log == sim_yaml.event_log
    # Writing the twin gives the same file: nothing is lost or reformatted on the way.
    assert Model.from_yaml(path).to_yaml() == text


def test_the_documented_example_loads_and_runs(tmp_path):
    doc = modelfile.__doc__
    example = doc[doc.index("::\n\n") + 4:doc.index("\nAn entry of")]
    (tmp_path / "servo.yaml").write_text("\n".join(line[4:] for line in example.splitlines()))
    shutil.copy(DATA / "motor.yaml", tmp_path)
    model = Model.from_yaml(tmp_path / "servo.yaml")
    sim = simulation(model, model.simulation)
    sim.run()
    assert [name for _, name in sim.event_log] == ["kick", "kick", "hit"]


def test_round_trip_keeps_expressions_as_written_and_arrays_as_lists():
    text = three_level_model().to_yaml()
    assert "frequency: =wn/(2*pi)" in text
    assert "k2: =k*half" in text
    twin = Model.from_yaml(text)
    assert twin.parameters["wn"] == "=2*pi*0.7"
    assert twin.parameters["A"] == [[0.9, 0.1], [-0.2, 0.8]]
    assert twin["src"].spec()["frequency"] == "=wn/(2*pi)"
    assert twin["step"].spec()["sample_time"] == (0.02, 0.01)    # a (period, offset) tuple
    assert twin["ss"].spec()["x0"] == [0.1, -0.2]                # tuples become lists
    ref = twin["outer/inner/amp"]
    assert isinstance(ref, Reference) and ref.source == "yaml_io_test_shaper"
    assert ref.overrides == {"gain": "=k2", "limit": "=scale"}
    assert twin["outer"].context == {"k2": "=k*half", "half": 0.4}


@pytest.mark.parametrize("value, expected", [
    (0.1, 0.1), (0.1 + 0.2, 0.30000000000000004), (-0.0, -0.0), (1e-300, 1e-300),
    (5e-324, 5e-324), (1e16, 1e16), (1.7976931348623157e308, 1.7976931348623157e308),
    (math.inf, math.inf), (-math.inf, -math.inf), (7, 7), (-12, -12), (True, True),
    (None, None), ("yes", "yes"), ("1e-3", "1e-3"), ("null", "null"), ("0x10", "0x10"),
    ("", ""), ("=2*pi", "=2*pi"), ("+-", "+-"), ("a: b # c", "a: b # c"),
    (np.float64(0.3), 0.3), (np.int64(5), 5), (np.bool_(False), False),
    ((1, 2.5), [1, 2.5]), (np.array([[1.0, 2.0], [3.0, 4.0]]), [[1.0, 2.0], [3.0, 4.0]]),
    (np.arange(3), [0, 1, 2]), ({"a": [1, {"b": 2}]}, {"a": [1, {"b": 2}]}),
])
def test_values_round_trip_exactly(value, expected):
    m = Model("values", parameters={"v": value})
    back = Model.from_yaml(m.to_yaml()).parameters["v"]
    assert back == expected and type(back) is type(expected)
    if isinstance(expected, float):
        assert math.copysign(1.0, back) == math.copysign(1.0, expected)


def test_nan_round_trips():
    back = Model.from_yaml(Model("n", parameters={"v": math.nan}).to_yaml()).parameters["v"]
    assert math.isnan(back)


@pytest.mark.parametrize("text, expected", [
    ("1e-3", 1e-3), ("1E5", 1e5), (".5", 0.5), ("-.inf", -math.inf), ("0x1F", 31),
    ("0o17", 15), ("+7", 7), ("yes", "yes"), ("on", "on"), ("No", "No"), ("~", None),
    ("true", True), ("False", False), ("1:30", "1:30"), ("'12'", "12"), ("=2*pi", "=2*pi"),
])
def test_scalars_follow_the_yaml_1_2_core_schema(text, expected):
    got = Model.from_yaml(f"model: m\nparameters:\n  v: {text}\n").parameters["v"]
    assert got == expected and type(got) is type(expected)


def test_library_file_reference_by_relative_path(tmp_path, monkeypatch):
    for name in ("servo.yaml", "plant_lib.yaml"):
        shutil.copy(DATA / name, tmp_path / name)
    monkeypatch.chdir(DATA.parent)   # relative to the model file, not the working directory
    model = Model.from_yaml(tmp_path / "servo.yaml")
    ref = model["plant"]
    assert Path(ref.source) == tmp_path / "plant_lib.yaml"
    # Written elsewhere, the reference stays a path relative to the new file.
    out = tmp_path / "sub" / "copy.yaml"
    out.parent.mkdir()
    assert "plant: {reference: ../plant_lib.yaml, overrides: {tau: 0.25}}" in model.to_yaml(out)
    logs = simulation(model, model.simulation).run()
    # The plant is the library's first-order lag (gain 2) with the override tau = 0.25.
    lag = model["plant/lag"]
    assert (lag.tau, lag.gain) == (0.25, 2.0)
    assert 0.0 < logs["plant/lag.out"][-1, 0] < 1.0
    assert_same_logs(logs, simulation(Model.from_yaml(out), model.simulation).run())


LIBRARY = """\
subsystem: {name}
blocks:
  u: {{type: Inport}}
  inner: {{reference: {ref}}}
  y: {{type: Outport}}
connections:
  - [u.out, inner.u]
  - [inner.y, y.in]
"""


@pytest.mark.parametrize("files, needle", [
    ({"a.yaml": "a.yaml"}, "a.yaml -> a.yaml"),
    ({"a.yaml": "b.yaml", "b.yaml": "c.yaml", "c.yaml": "a.yaml"},
     "a.yaml -> b.yaml -> c.yaml -> a.yaml"),
])
def test_reference_cycles_between_library_files_are_located(files, needle, tmp_path):
    for name, ref in files.items():
        (tmp_path / name).write_text(LIBRARY.format(name=name[0], ref=ref))
    model = tmp_path / "m.yaml"
    model.write_text("model: m\nblocks:\n  c: {type: Constant}\n  s: {reference: a.yaml}\n"
                     "connections:\n  - [c.out, s.u]\n")
    with pytest.raises(CompileError) as exc:
        Model.from_yaml(model)
    (problem,) = exc.value.problems
    assert problem.startswith(f"{model}:4:") and needle in problem


def test_connections_to_library_files_are_checked_against_their_ports(tmp_path):
    shutil.copy(DATA / "plant_lib.yaml", tmp_path)
    text = ("model: m\nblocks:\n  c: {type: Constant}\n  p: {reference: plant_lib.yaml}\n"
            "connections:\n  - [c.out, p.in]\n")
    (tmp_path / "m.yaml").write_text(text)
    with pytest.raises(CompileError, match=r"m.yaml:6:\d+: connection 'p.in': p \(reference\) "
                                           r"has no input 'in' \(inputs: u\)"):
        Model.from_yaml(tmp_path / "m.yaml")


def test_load_subsystem_reads_library_files_and_refuses_model_files():
    sub = modelfile.load_subsystem(DATA / "plant_lib.yaml", "motor")
    assert isinstance(sub, Subsystem) and sub.name == "motor"
    assert sub.input_names == ("u",) and sub.output_names == ("y",)
    assert sub.context == {"tau": 0.5, "gain": 2.0}
    assert modelfile.load_subsystem(DATA / "plant_lib.yaml").name == "plant"
    assert isinstance(modelfile.load(DATA / "plant_lib.yaml"), Subsystem)
    assert isinstance(modelfile.load(DATA / "servo.yaml"), Model)
    with pytest.raises(CompileError, match="servo.yaml:2:1: a library file starts with"):
        modelfile.load_subsystem(DATA / "servo.yaml")
    with pytest.raises(CompileError, match=r"plant_lib.yaml:2:1: this is a library"):
        Model.from_yaml(DATA / "plant_lib.yaml")


def test_dump_subsystem_round_trip(tmp_path):
    sub = shaper("shaper")
    path = tmp_path / "shaper.yaml"
    modelfile.dump_subsystem(sub, path)
    back = modelfile.load_subsystem(path)
    assert back.context == sub.context
    assert [b.name for b in back.blocks] == [b.name for b in sub.blocks]
    assert [b.spec() for b in back.blocks] == [b.spec() for b in sub.blocks]
    assert back.connections == sub.connections


# --- problems, all of them, located ----------------------------------------------------------

def test_five_problems_are_reported_in_one_error_with_locations():
    with pytest.raises(CompileError) as exc:
        Model.from_yaml(DATA / "five_problems.yaml")
    problems = exc.value.problems
    assert len(problems) == 5, problems
    expected = [(7, "unknown block type 'Gian'; did you mean Gain?"),
                (8, "unknown parameter 'tua'; did you mean 'tau'?"),
                (9, "'=2*k +': syntax error"),
                (12, "blocks.sub.atomic: 'yes' is not of type 'boolean'"),
                (20, "connection 'sub.x': sub (Subsystem) has no input 'x' (inputs: u)")]
    for problem, (line, needle) in zip(problems, expected):
        assert re.match(rf"^.*five_problems\.yaml:{line}:\d+: ", problem), problem
        assert needle in problem
    assert "has 5 problems" in str(exc.value)


BASE = """\
model: m
parameters: {k: 2.0}
blocks:
  src: {type: Sine}
  g: {type: Gain, params: {k: =k}}
  s: {type: Sum, params: {signs: "+-"}}
"""

# (text appended to BASE, expected line of the problem, fragment of its message)
PROBLEMS = [
    ("  x: {type: Gain, parms: {k: 1}}\n", 7, "unknown key 'parms'; did you mean 'params'?"),
    ("  x: {type: Gain, overrides: {k: 1}}\n", 7,
     "'overrides' does not apply to a Gain block (its keys: type, params)"),
    ("  x: {reference: yaml_io_test_shaper, params: {k: 1}}\n", 7,
     "'params' does not apply to a reference (its keys: reference, overrides)"),
    ("  x: {type: Gain, reference: foo}\n", 7, "either 'type:'"),
    ("  x: {type: Lookup1D, params: {table: [1, 2]}}\n", 7,
     "missing required parameter breakpoints"),
    ("  x: {type: Sum, params: {signs: '+x'}}\n", 7,
     "(Sum) cannot be built from its parameters: Sum 'x': signs must be"),
    ("  x: {type: Gain, params: {k: =kk + 1}}\n", 7,
     "undefined name 'kk' (did you mean 'k'?)"),
    ("  x: {type: Gain, params: {k: =os.system}}\n", 7, "attribute access is not allowed"),
    ("  x: {type: Gain, params: {k: =__import__('os')}}\n", 7, "not allowed"),
    ("  x: {reference: no_such_definition}\n", 7,
     "'no_such_definition' is neither a registered library definition"),
    ("  x: {reference: missing.yaml}\n", 7, "library file 'missing.yaml' not found"),
    ("  x: {reference: 'os:system'}\n", 7, "nor a .yaml library file"),
    ("  x: {type: 'blocks.math.Gain'}\n", 7, "is not a valid name"),
    ("  x: {type: os}\n", 7, "unknown block type 'os'"),
    ("  1x: {type: Gain}\n", 7, "'1x' is not a valid name"),
    ("  x: {type: Subsystem, dt: 0.1}\n", 7, "dt, solver and options apply to atomic"),
    ("  x: {type: Subsystem, atomic: true, solver: RK5}\n", 7,
     "unknown solver 'RK5'; did you mean"),
    ("  x: {type: Subsystem, atomic: true, options: {fsat: false}}\n", 7,
     "option 'fsat' is not a SimulationConfig field; did you mean 'fast'?"),
    ("  g: {type: Gain}\n", 7, "duplicate key 'g' (first given on line 5)"),
    ("connections:\n  - [src.out, g.in]\n  - [s.out, g.in]\n", 9,
     "g.in is already driven by src.out (line 8)"),
    ("connections:\n  - [g.in, s.in1]\n", 8, "'in' is an input: a connection starts at an"),
    ("connections:\n  - [src.out, nope.in]\n", 8, "no block 'nope' in the model"),
    ("connections:\n  - [src.out]\n", 8, "is too short"),
    ("connections:\n  - [src.out, g]\n", 8, "'g' is not a 'block.port' reference"),
    ("events:\n  e: {type: Scheduled, watch: g.out}\n", 8,
     "'watch' does not apply to a Scheduled event"),
    ("events:\n  e: {type: Alarm}\n", 8, "'Alarm' is not one of"),
    ("simulation: {dt: 0.1, t_end: -1.0}\n", 7, "t_end (-1.0) is before t0"),
    ("simulation: {dt: 0.1}\n", 7, "'t_end' is a required property"),
    ("simulation: {dt: 0.1, t_end: 1, sovler: RK4}\n", 7,
     "unknown key 'sovler'; did you mean 'solver'?"),
    ("simulation: {dt: 0.1, t_end: 1, solver: RK44}\n", 7, "unknown solver 'RK44'"),
    ("simulation: {dt: 0.1, t_end: 1, cosim: {H: 0.1, scheme: gauss}}\n", 7,
     "'gauss' is not one of"),
    ("blockz: {}\n", 7, "unknown key 'blockz'; did you mean 'blocks'?"),
]


@pytest.mark.parametrize("extra, line, needle", PROBLEMS)
def test_each_problem_is_reported_with_its_line(extra, line, needle):
    with pytest.raises(CompileError) as exc:
        Model.from_yaml(BASE + extra)
    problems = exc.value.problems
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"<string>:{line}:"), problems[0]
    assert needle in problems[0]


def test_problems_in_files_name_the_file(tmp_path):
    path = tmp_path / "typo.yaml"
    path.write_text(BASE + "  x: {type: Gainn}\n")
    with pytest.raises(CompileError) as exc:
        Model.from_yaml(path)
    assert exc.value.problems[0].startswith(f"{path}:7:")
    assert "did you mean Gain?" in exc.value.problems[0]


def test_a_valid_file_loads_the_objects_it_describes():
    m = Model.from_yaml(BASE + "connections:\n  - [src.out, g.in, s.in1]\n  - [g.out, s.in2]\n")
    assert [type(b).__name__ for b in m.blocks] == ["Sine", "Gain", "Sum"]
    assert [str(c) for c in m.connections] == ["src.out -> g.in", "src.out -> s.in1",
                                               "g.out -> s.in2"]
    assert m.simulation is None and m.name == "m"


# --- hostile files --------------------------------------------------------------------------

def _laughs(levels: int = 9) -> str:
    lines = ["model: bomb", "parameters:", "  a0: &a0 [lol, lol, lol, lol, lol, lol, lol, "
             "lol, lol, lol]"]
    for i in range(1, levels):
        lines.append(f"  a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    return "\n".join(lines) + "\n"


HOSTILE = [
    ("python_object", "model: m\nparameters: {k: !!python/object/apply:os.system "
                      "['touch {marker}']}\n", "tag !!python/object/apply:os.system is not "
                                               "allowed"),
    ("python_name", "model: m\nparameters: {k: !!python/name:os.system ''}\n",
     "tag !!python/name:os.system is not allowed"),
    ("python_top", "--- !!python/object:os.system\nmodel: m\n", "!!python/object:os.system"),
    ("python_long_tag", "model: m\nparameters: !<tag:yaml.org,2002:python/object/new:os.system>"
                        " {args: ['touch {marker}']}\n", "is not allowed"),
    ("local_tag", "model: m\nparameters: {k: !include secrets.yaml}\n", "tag !include"),
    ("billion_laughs", _laughs(), "aliases expand the document to more than"),
    ("recursive_alias", "model: m\nparameters: &p {k: *p}\n", "recursive alias"),
    ("deep_nesting", "model: m\nparameters: {k: " + "[" * 500 + "]" * 500 + "}\n",
     "nested more than 64 levels"),
    # libyaml >= 0.2.5 as PyYAML 6.0.4 ships it refuses this itself, before cosim's limit
    ("deeper_nesting", "model: m\nparameters: {k: " + "[" * 5000 + "]" * 5000 + "}\n",
     "nest"),
    ("two_documents", "model: m\n---\nmodel: n\n", "one YAML document"),
    ("complex_key", "model: m\n? [a, b]\n: 1\n", "mapping keys must be plain names"),
    ("syntax", "model: m\nblocks: {a: [}\n", "YAML syntax error"),
]


@pytest.mark.parametrize("name, text, needle", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_files_are_refused(name, text, needle, tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / f"{name}.yaml"
    path.write_text(text.replace("{marker}", str(marker)))
    with pytest.raises(CompileError) as exc:
        Model.from_yaml(path)
    assert needle in str(exc.value)
    assert re.match(rf"^{re.escape(str(path))}:\d+:\d+: ", exc.value.problems[0])
    assert not marker.exists()


def test_huge_file_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "huge.yaml"
    with open(path, "wb") as fh:   # sparse: costs no disk and no time
        fh.write(b"model: m\n")
        fh.truncate(modelfile.MAX_BYTES + 1)
    with pytest.raises(CompileError, match="refused above 10,485,760 bytes"):
        Model.from_yaml(path)


def test_huge_text_is_refused():
    with pytest.raises(CompileError, match="larger than 10,485,760 bytes"):
        Model.from_yaml("model: m\n#" + "x" * modelfile.MAX_BYTES)


def test_too_many_values_are_refused(monkeypatch):
    monkeypatch.setattr(reader, "MAX_VALUES", 1000)
    text = "model: m\nparameters: {v: [" + "0," * 1000 + "]}\n"
    with pytest.raises(CompileError, match="more than 1,000 values; model files describe"):
        Model.from_yaml(text)


@pytest.mark.parametrize("content, needle", [
    (b"model: m\nparameters: {k: \xff}\n", "not UTF-8"),
    (b"", "the file is empty"),
    (b"- a\n- b\n", "the top level must be a mapping"),
])
def test_unreadable_files_are_explained(content, needle, tmp_path):
    path = tmp_path / "f.yaml"
    path.write_bytes(content)
    with pytest.raises(CompileError, match=needle):
        Model.from_yaml(path)


def test_missing_file_is_a_model_error():
    with pytest.raises(ModelError, match="no such file"):
        Model.from_yaml("does/not/exist.yaml")


# --- block types ----------------------------------------------------------------------------

class Doubler(Block):
    """A user block: out = 2*in."""

    def __init__(self, name, offset=0.0, **kw):
        super().__init__(name, **kw)
        self.offset = offset

    def output_update(self, t, dt):
        self.outputs["out"] = 2.0 * self.inputs["in"] + self.offset


@pytest.fixture
def doubler():
    blocktypes.register_block_type(Doubler)
    yield Doubler
    blocktypes.unregister_block_type("Doubler")


def test_user_block_classes_are_registered_not_imported(doubler):
    text = ("model: m\nblocks:\n  c: {type: Constant, params: {value: 1.5}}\n"
            "  d: {type: Doubler, params: {offset: 0.5}}\nconnections:\n  - [c.out, d.in]\n"
            "simulation: {dt: 0.1, t_end: 0.2}\n")
    m = Model.from_yaml(text)
    assert simulation(m, m.simulation).run()["d.out"][-1, 0] == 3.5
    assert blocktypes.name_of(Doubler) == "Doubler"
    assert [str(p) for p in declarations.parameters(Doubler)] == ["offset=0.0",
                                                                "sample_time=None"]


def test_unregistered_types_cannot_be_used_or_written():
    with pytest.raises(CompileError, match="unknown block type 'Doubler'"):
        Model.from_yaml("model: m\nblocks:\n  d: {type: Doubler}\n")
    m = Model("m")
    m.add(Doubler("d"))
    with pytest.raises(ModelError, match=r"Doubler is not a registered block type"):
        m.to_yaml()


@pytest.mark.parametrize("cls, name, needle", [
    (int, None, "is not a Block class"),
    (Subsystem, None, "is not a Block class"),
    (Doubler, "Subsystem", "reserved"),
    (Doubler, "Gain", "already blocks.math.Gain"),
    (Doubler, "not a name", "invalid"),
])
def test_register_refuses_bad_classes_and_names(cls, name, needle):
    with pytest.raises(ModelError, match=needle):
        blocktypes.register_block_type(cls, name=name)


def test_block_libraries_are_found_through_entry_points():
    from importlib import metadata
    entries = metadata.entry_points(group=blocktypes.ENTRY_POINT_GROUP)
    assert [(e.name, e.value) for e in entries] == [("blocks", "blocks")]
    library = blocktypes.library()
    assert library["Gain"] is Gain and library["Integrator"] is Integrator
    assert library["Inport"] is Inport


def test_registry_holds_library_and_port_blocks():
    known = blocktypes.known()
    for name in ("Gain", "Sum", "Integrator", "DiscretePID", "Inport", "Outport", "Goto",
                 "From"):
        assert name in known
    assert "AtomicSubsystem" not in known and "Block" not in known
    assert not any(n.startswith("_") for n in known)


@pytest.mark.parametrize("name, params", [
    ("Gain", ["k=1.0", "sample_time=None"]),
    ("Goto", ["tag", "visibility='local'"]),
    ("TransferFunction", ["num", "den", "x0=None", "sample_time=None"]),
    ("DiscreteTransferFunction", ["num", "den", "variable='z'", "x0=None",
                                  "sample_time=None"]),
    ("Inport", ["shape=(1,)", "initial=None", "sample_time=None"]),
])
def test_parameters_come_from_the_constructor_signatures(name, params):
    assert [str(p) for p in declarations.parameters(blocktypes.lookup(name))] == params


@pytest.mark.parametrize("name, inputs, outputs, ft_varies", [
    ("Gain", ("in",), ("out",), False),
    ("Sum", None, ("out",), False),
    ("Demux", ("in",), None, False),
    ("Integrator", ("in", "reset"), ("out",), False),
    ("StateSpace", ("in",), ("out",), True),
])
def test_declared_ports_and_feedthrough(name, inputs, outputs, ft_varies):
    d = declarations.declared(blocktypes.lookup(name))
    assert (d.inputs, d.outputs, d.feedthrough_varies) == (inputs, outputs, ft_varies)


# --- what cannot be written ------------------------------------------------------------------

def test_code_cannot_be_written_and_every_reason_is_listed():
    m = Model("code")
    m.add(ODE("ode", f=lambda t, x, u: -x, g=lambda t, x, u: x, x0=[1.0]),
          Reference("ref", shaper))
    m.add_event(Scheduled("cb", times=[1.0], callback=lambda sim, t: None),
                Scheduled("fn", times=[1.0], reset={"ode": lambda x: x}))
    with pytest.raises(ModelError) as exc:
        m.to_yaml()
    text = str(exc.value)
    for needle in ("ode.f is a function", "ode.g is a function",
                   "reference to a factory function", "'cb' has a callback",
                   "reset of 'ode' is a function"):
        assert needle in text


# --- the schema ------------------------------------------------------------------------------

def test_schema_ships_with_the_package_and_is_valid():
    import jsonschema
    schema = modelfile.schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert Path(modelfile.__file__).with_name("model_schema.json").is_file()


@pytest.mark.parametrize("name", list(MODELS))
def test_written_files_validate_against_the_schema(name):
    import jsonschema
    import yaml
    build, cfg = MODELS[name]
    data = yaml.safe_load(build().to_yaml(simulation=cfg))   # any YAML reader can read them
    jsonschema.validate(data, modelfile.schema())


def test_cosim_section_round_trips():
    cfg = SimulationConfig(dt=0.01, t_end=1.0, cosim=CosimConfig(H=0.05, scheme="gauss-seidel",
                                                                 extrapolation=1))
    twin = Model.from_yaml(atomic_model().to_yaml(simulation=cfg))
    assert twin.simulation == cfg


@pytest.mark.parametrize("path, why", [
    ("../x.png", "leaves the run's folder"),
    ("plots/../../x.png", "leaves the run's folder"),
    ("/tmp/x.png", "is an absolute path"),
    ("C:\\\\x.png", "is an absolute path"),
    ("~/x.png", "plain relative path"),
    ("=name", "plain relative path"),
])
def test_a_model_file_writes_only_inside_the_runs_folder(tmp_path, path, why):
    from cosim import ModelError
    from cosim.modelfile import load
    text = ("model: m\nblocks:\n  s: {type: Sine}\n"
            f"  sc: {{type: Scope, params: {{path: {json.dumps(path)}}}}}\n"
            "connections:\n  - [s.out, sc.in]\n")
    with pytest.raises(ModelError) as err:
        load(text)
    assert "block 'sc' (Scope): path" in str(err.value) and why in str(err.value)
    assert "writes only inside the run's folder" in str(err.value)


def test_a_model_files_scope_writes_a_relative_path_and_python_may_write_anywhere(
        tmp_path, monkeypatch):
    from blocks import Scope, Sine
    from cosim import Model, SimulationConfig, Simulator
    from cosim.modelfile import load
    monkeypatch.chdir(tmp_path)
    text = ("model: m\nblocks:\n  s: {type: Sine}\n"
            "  sc: {type: Scope, params: {path: plots/s.png}}\n"
            "connections:\n  - [s.out, sc.in]\n")
    (tmp_path / "plots").mkdir()
    Simulator(load(text), SimulationConfig(dt=0.01, t_end=0.1)).run()
    assert (tmp_path / "plots" / "s.png").is_file()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    m = Model("py")
    m.add(Sine("s"), Scope("sc", path=str(elsewhere / "s.png")))   # the user's own choice
    m.connect("s.out", "sc.in")
    Simulator(m, SimulationConfig(dt=0.01, t_end=0.1)).run()
    assert (elsewhere / "s.png").is_file()
