"""Nothing silently accepted: a typo in a unit name or a solver name is an error that names
the valid choices."""

import pytest

from blocks import Gain, Sine
from cosim import CoSimulation, CosimConfig, Model, ModelError, SimulationConfig, Simulator
from tests.cluster.scenarios import DT, motor_pi


@pytest.mark.parametrize("options", [{"num_cpus": 1}, {"address": "tcp://127.0.0.1:5555"}])
def test_options_for_a_unit_that_does_not_exist_are_refused(options):
    with pytest.raises(ModelError, match=r"CosimConfig.units names no unit 'motr' \(did you "
                                         r"mean 'motor'\?\); the units are motor, ctrl, main"):
        CoSimulation(motor_pi(True), SimulationConfig(dt=DT, t_end=0.01, cosim=CosimConfig(
            H=DT, units={"motr": options})))


@pytest.mark.parametrize("processes", [0, 2.0, "all"])
def test_a_bad_number_of_processes_is_refused(processes):
    with pytest.raises(ModelError, match=r"processes must be an int >= 1, 'cores' or None"):
        CosimConfig(H=DT, processes=processes)


def test_processes_cores_means_this_machines_cores():
    import os
    assert CosimConfig(H=DT, processes="cores").processes == (os.cpu_count() or 1)


def test_an_unknown_solver_is_refused_even_without_continuous_state():
    m = Model("discrete")
    m.add(Sine("s", sample_time=0.1), Gain("g", 2.0))
    m.connect("s.out", "g.in")
    with pytest.raises(ModelError, match=r"unknown solver 'RK5'.*did you mean 'RK45'"):
        Simulator(m, SimulationConfig(dt=0.1, t_end=1.0, solver="RK5"))
    with pytest.raises(ModelError, match=r"unknown solver 'Nope'"):
        Simulator(m, SimulationConfig(dt=0.1, t_end=1.0, solver="Nope"))


# -- block parameters ------------------------------------------------------------------------

def _library_parameters():
    """(class, the other arguments it needs, parameter) for every numeric parameter (default
    a number or None) of every block class of the library."""
    import inspect

    import blocks
    from cosim.model.block import Block
    needs = {"StateSpace": dict(A=[[-1.0]], B=[[1.0]], C=[[1.0]]),
             "DiscreteStateSpace": dict(A=[[0.5]], B=[[1.0]], C=[[1.0]]),
             "TransferFunction": dict(num=[1.0], den=[1.0, 1.0]),
             "DiscreteTransferFunction": dict(num=[1.0], den=[1.0, -0.5]),
             "RateTransition": dict(sample_time=0.1)}
    skip = {"inputs", "outputs", "sample_time", "input_shape", "path", "title"}
    out = []
    for name in sorted(dir(blocks)):
        cls = getattr(blocks, name)
        if not (inspect.isclass(cls) and issubclass(cls, Block)) or name in (
                "ODE", "FmuBlock", "ModelExchangeFmuBlock"):
            continue                        # ODE takes callables; FMU blocks take files
        for pname, p in inspect.signature(cls.__init__).parameters.items():
            d = p.default
            if pname in skip or pname in ("self", "name") or p.kind is p.VAR_KEYWORD \
                    or isinstance(d, bool) or not (isinstance(d, (int, float)) or d is None):
                continue
            out.append(pytest.param(cls, needs.get(name, {}), pname, id=f"{name}.{pname}"))
    return out


#: Parameters where an infinity means "no limit".
UNBOUNDED = {"lower", "upper"}


@pytest.mark.parametrize("cls, given, param", _library_parameters())
def test_a_non_numeric_or_non_finite_parameter_names_the_block_and_parameter(cls, given,
                                                                              param):
    import math
    bad = ["abc", math.nan] + ([] if param in UNBOUNDED else [math.inf])
    for value in bad:
        with pytest.raises(ModelError, match=rf"{cls.__name__} 'b': .*{param}"):
            cls("b", **given, **{param: value})


def test_a_constant_may_hold_non_finite_values_on_request():
    import math
    from blocks import Constant
    with pytest.raises(ModelError, match=r"Constant 'c': value must be finite"):
        Constant("c", math.nan)
    assert math.isinf(Constant("c", math.inf, allow_nonfinite=True).value[0])


def test_cosim_check_reports_an_unknown_solver_beside_a_wrong_step(tmp_path):
    import subprocess
    import sys
    path = tmp_path / "m.yaml"
    path.write_text("model: m\nblocks:\n  s: {type: Sine}\n"
                    "simulation: {dt: -0.01, t_end: 1.0, solver: RK5}\n")
    r = subprocess.run([sys.executable, "-m", "cosim.cli", "check", str(path)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert "has 2 problems" in r.stderr
    assert f"{path}:4:18: simulation.dt" in r.stderr
    assert f"{path}:4:" in r.stderr and "unknown solver 'RK5'; did you mean 'RK45'" in r.stderr


TEN_PROBLEMS = """\
model: ten
blocks:
  src:  {type: Step, params: {step_time: 1.0, bogus: 2}}
  g:    {type: Gain, params: {k: 2.0}}
  g3:   {type: Gain, params: {k: 2.0}}
  sum:  {type: Sum, params: {signs: "+-"}}
  x:    {type: Gainn}
  lone: {type: Gain, params: {k: 1.0}}
  sub:
    type: Subsystem
    blocks:
      u:  {type: Inport}
      d:  {type: UnitDelay, params: {sample_time: 0.0015}}
      g2: {type: Gain, params: {k: =nope}}
      g4: {type: Gain, params: {k: 3}}
      g5: {type: Gain, params: {k: 3}}
      y:  {type: Outport}
    connections:
      - [u.out, d.in]
      - [d.out, y.in]
      - [g2.out, g4.in]
      - [g4.out, g5.in, nowhere.in]
  i:    {type: Integrator, params: {sample_time: 0.01}}
connections:
  - [src.out, g.in]
  - [g.out, sum.in1]
  - [sum.out, sub.u]
  - [x.out, g3.in]
  - [i.out, lone.in]
simulation: {dt: 0.001, t_end: 1.0, solver: Nope}
"""

#: (line, text) of each problem above that is not a consequence of another one. Left out on
#: purpose: g.in (its source src is broken), g3.in (from the unknown type x), sub/g4.in
#: (from g2, whose expression is broken) and sub/g5.in (its connection names a missing block).
#: A block that cannot be built (x, g2) is checked for undriven inputs once it can be: its
#: optional inputs are only known to a built block.
EXPECTED = [
    (3, "unknown parameter 'bogus'"),
    (6, "input sum.in2 is not connected"),
    (7, "unknown block type 'Gainn'"),
    (13, "block sub/d: sample time 0.0015 is not an integer multiple"),
    (14, "undefined name 'nope'"),
    (22, "no block 'nowhere'"),
    (23, "block i: it has continuous state but sample time 0.01"),
    (23, "input i.in is not connected"),
    (30, "unknown solver 'Nope'"),
]


def test_cosim_check_reports_every_problem_in_one_pass_each_at_its_line(tmp_path):
    """File problems (schema, types, parameters, connections, solver) and compile problems
    (undriven inputs, sample times, inside subsystems too) in one report, each located."""
    import subprocess
    import sys
    path = tmp_path / "ten.yaml"
    path.write_text(TEN_PROBLEMS)
    r = subprocess.run([sys.executable, "-m", "cosim.cli", "check", str(path)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert f"has {len(EXPECTED)} problems" in r.stderr, r.stderr
    lines = [ln.strip() for ln in r.stderr.splitlines()[1:]]
    assert len(lines) == len(EXPECTED)
    for line, text in EXPECTED:
        hits = [ln for ln in lines if f"{path}:{line}:" in ln and text in ln]
        assert len(hits) == 1, (line, text, lines)
    assert [int(ln.split(f"{path}:")[1].split(":")[0]) for ln in lines] == \
        sorted(line for line, _ in EXPECTED)
    # Fixing the file's own problems reveals nothing new: the compile problems were all there.
    fixed = (TEN_PROBLEMS.replace(", bogus: 2", "").replace("type: Gainn", "type: Gain")
             .replace("=nope", "2.0").replace(", nowhere.in", "").replace("Nope", "RK4"))
    path.write_text(fixed)
    r = subprocess.run([sys.executable, "-m", "cosim.cli", "check", str(path)],
                       capture_output=True, text=True, timeout=120)
    compile_phase = [e for e in EXPECTED if "not connected" in e[1] or "sample time" in e[1]]
    assert f"has {len(compile_phase) + 2} problems" in r.stderr, r.stderr
    # x and g2, now built, have undriven inputs of their own: the only new problems.
    assert f"{path}:7:3: input x.in is not connected" in r.stderr
    assert f"{path}:14:7: input sub/g2.in is not connected" in r.stderr
