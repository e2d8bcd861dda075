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
