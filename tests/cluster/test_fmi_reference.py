"""The Modelica Association's Reference FMUs on every path (co-simulation unit, FmuBlock,
ModelExchangeFmuBlock), FMI 2.0 and 3.0, against fmpy's ``simulate_fmu`` of the same FMU.

Opt-in: the FMUs are not part of the project. Build them (github.com/modelica/Reference-FMUs,
``cmake -DFMI_VERSION=2`` and ``=3``, then ``cmake --install``) and point
``COSIM_REFERENCE_FMUS2`` / ``COSIM_REFERENCE_FMUS3`` at the install directories; the
project's own test FMUs (``test_fmi_exchange.py``, ``test_fmi_types.py``, ...) cover the same
features in the default suite. Tolerances: a co-simulation FMU is stepped exactly as fmpy
steps it (fmpy accumulates its communication times, so a few FMUs with a fixed internal step
differ in the 8th digit); model exchange is integrated by cosim's RK45 (rtol 1e-8) against
fmpy's CVode (rtol 1e-8), so both are within their solvers' tolerance of each other.
"""

import os
from pathlib import Path

import numpy as np
import pytest

from blocks import Constant
from blocks.fmu import FmuBlock, ModelExchangeFmuBlock
from cosim import CoSimulation, CosimConfig, Model, ModelError, SimulationConfig, Simulator
from cosim.fmi.variables import number

MODELS = ["BouncingBall", "Dahlquist", "Feedthrough", "Resource", "Stair", "VanDerPol",
          "StateSpace", "Roberts", "Clocks"]
#: Relative error allowed against fmpy, per path.
RTOL = {"unit": 1e-6, "block": 1e-6, "me": 1e-5}
#: Experiments other than the FMU's default (Roberts: 1e8 s without a step).
EXPERIMENT = {"Roberts": (0.4, 40.0)}
SOLVER = {"Roberts": "BDF"}


def _input_value(t: str) -> float:
    """A value of FMI type ``t`` every type holds exactly (inputs of Feedthrough)."""
    return {"Boolean": 1.0, "Enumeration": 2.0}.get(
        t, 1.5 if t in ("Real", "Float32", "Float64") else 3.0 if t.startswith("U") else -3.0)


def _fmu(version: str, name: str) -> Path:
    d = os.environ.get(f"COSIM_REFERENCE_FMUS{version[0]}")
    if not d:
        pytest.skip(f"set COSIM_REFERENCE_FMUS{version[0]} to the FMI {version} Reference FMUs")
    path = Path(d) / f"{name}.fmu"
    if not path.is_file():
        pytest.skip(f"{path} is not there (not a model of FMI {version})")
    return path


@pytest.mark.parametrize("path", ["unit", "block", "me"])
@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("version", ["2.0", "3.0"])
def test_reference_fmu_matches_fmpy(version, name, path):
    from fmpy import read_model_description, simulate_fmu
    fmu = _fmu(version, name)
    md = read_model_description(str(fmu))
    if md.coSimulation is None and md.modelExchange is None:
        with pytest.raises(ModelError, match="offers only FMI 3.0 Scheduled Execution"):
            FmuBlock("f", str(fmu))
        return
    de = md.defaultExperiment
    dt, t_end = EXPERIMENT.get(name, (float(de.stepSize or 0.01), float(de.stopTime or 1.0)))
    m = Model("m")
    block = ModelExchangeFmuBlock("f", str(fmu)) if path == "me" else FmuBlock("f", str(fmu), dt)
    m.add(block)
    given = {}
    for v in md.modelVariables:
        if v.causality == "input" and v.name in block.input_names and \
                v.type not in ("String", "Binary"):     # (text: test_reference_text_chain)
            values = [float(number(x, v.type)) for x in str(v.start or 0).split()]
            if name == "Feedthrough":
                values = [_input_value(v.type)]
                given[v.name] = bool(values[0]) if v.type == "Boolean" else values[0]
            m.add(Constant(f"c_{v.name}", np.array(values) if len(values) > 1 else values[0]))
            m.connect(f"c_{v.name}.out", f"f.{v.name}")
    if path == "unit":
        logs = CoSimulation(m, SimulationConfig(dt=dt, t_end=t_end,
                                                cosim=CosimConfig(H=dt))).run()
        key = "f/fmu.{}"
    else:
        logs = Simulator(m, SimulationConfig(dt=dt, t_end=t_end, solver=SOLVER.get(name, "RK45"),
                                             rtol=1e-8, atol=1e-10)).run()
        key = "f.{}"
    ref = simulate_fmu(str(fmu), fmi_type="ModelExchange" if path == "me" else "CoSimulation",
                       stop_time=t_end, output_interval=dt, step_size=dt, solver="CVode",
                       relative_tolerance=1e-8, start_values=given)
    # fmpy's rows on the output grid; after an event at one time, the last.
    rt = ref["time"]
    on = (np.abs(rt - np.round(rt / dt) * dt) < 1e-9) & np.append(rt[1:] != rt[:-1], True)
    outputs = [o for o in block.output_names if o not in block.output_kinds]
    assert outputs
    for o in outputs:
        t = logs.time_of(key.format(o))
        y = logs[key.format(o)].reshape(len(t), -1)
        assert abs(t[-1] - rt[-1]) < 1e-9, (o, t[-1], rt[-1])      # where the run ended
        r = np.asarray(ref[o], dtype=float).reshape(len(rt), -1)[on]
        rows = rt[on]
        if path == "me" and name == "Stair":
            rows, r = rows[:-1], r[:-1]     # fmpy's ME records a terminating event's row before
        i = np.searchsorted(t, rows - 1e-9)
        scale = max(float(np.abs(r).max()), 1.0)
        np.testing.assert_allclose(y[i], r, rtol=0, atol=RTOL[path] * scale, err_msg=o)


@pytest.mark.parametrize("path", ["block", "unit", "me"])
@pytest.mark.parametrize("version", ["2.0", "3.0"])
def test_reference_text_chain(version, path):
    """Two Reference Feedthrough FMUs, the first's String (and FMI 3.0 Binary) output wired
    to the second's input, on the co-simulation block, unit and model-exchange paths: every
    sample is what fmpy's instances of the same FMUs pass along."""
    from fmpy import extract, read_model_description
    from fmpy.fmi2 import FMU2Slave
    from fmpy.fmi3 import FMU3Slave
    fmu = _fmu(version, "Feedthrough")
    md = read_model_description(str(fmu))
    vr = {v.name: v.valueReference for v in md.modelVariables}
    given = {"String_input": "hello, wörld"} | (
        {"Binary_input": b"\x00\x01\xff"} if version == "3.0" else {})
    m = Model("m")
    if path == "me":
        m.add(ModelExchangeFmuBlock("a", str(fmu), given), ModelExchangeFmuBlock("b", str(fmu)))
    else:
        m.add(FmuBlock("a", str(fmu), 0.1, given), FmuBlock("b", str(fmu), 0.1))
    m.connect("a.String_output", "b.String_input")
    if version == "3.0":
        m.connect("a.Binary_output", "b.Binary_input")
    cfg = SimulationConfig(dt=0.1, t_end=1.0, cosim=CosimConfig(H=0.1) if path == "unit"
                           else None)
    logs = (CoSimulation if path == "unit" else Simulator)(m, cfg).run()
    key = "{}/fmu.{}" if path == "unit" else "{}.{}"
    # fmpy: the same two instances, the text passed at each communication point.
    slaves = []
    for name in ("a", "b"):
        s = (FMU2Slave if version == "2.0" else FMU3Slave)(
            guid=md.guid, unzipDirectory=extract(str(fmu)),
            modelIdentifier=md.coSimulation.modelIdentifier, instanceName=name)
        s.instantiate()
        if version == "2.0":
            s.setupExperiment(startTime=0.0)
        s.enterInitializationMode()
        s.exitInitializationMode()
        slaves.append(s)
    a, b = slaves
    a.setString([vr["String_input"]], [given["String_input"]])
    if version == "3.0":
        a.setBinary([vr["Binary_input"]], [given["Binary_input"]])
    want = {"String": [], "Binary": []}
    for k in range(11):
        (text,) = a.getString([vr["String_output"]])
        b.setString([vr["String_input"]],
                    [text.decode("utf-8") if isinstance(text, bytes) else text])
        (got,) = b.getString([vr["String_output"]])
        want["String"].append(got.decode("utf-8") if isinstance(got, bytes) else got)
        if version == "3.0":
            b.setBinary([vr["Binary_input"]], [bytes(a.getBinary([vr["Binary_output"]])[0])])
            want["Binary"].append(bytes(b.getBinary([vr["Binary_output"]])[0]))
        if k < 10:
            a.doStep(k * 0.1, 0.1)
            b.doStep(k * 0.1, 0.1)
    for s in slaves:
        s.terminate()
        s.freeInstance()
    assert want["String"] == ["hello, wörld"] * 11
    for kind in ("String", "Binary") if version == "3.0" else ("String",):
        got = logs[key.format("b", f"{kind}_output")]
        assert got.dtype == object and got[:, 0].tolist() == want[kind], kind
