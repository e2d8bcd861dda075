"""SSP packages: systems of FMUs read into models and written back. Oracles: fmpy's own SSP
simulator on the same package, the same system assembled by hand in Python, and fmpy's
validation of what save_ssp writes against the SSP 1.0 schemas."""

import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from blocks import Constant, Gain, Sum
from blocks.fmu import FmuBlock
from blocks.ssp import load_ssp, save_ssp
from cosim import CoSimulation, CosimConfig, Model, ModelError, SimulationConfig

pytestmark = pytest.mark.slow

SOURCES = Path(__file__).resolve().parents[1] / "cluster" / "fmu_sources"
ROOT = Path(__file__).resolve().parents[2]
H, T = 0.01, 1.0

HEAD = ('<?xml version="1.0" encoding="UTF-8"?>\n<ssd:SystemStructureDescription '
        'xmlns:ssd="http://ssp-standard.org/SSP1/SystemStructureDescription" '
        'xmlns:ssc="http://ssp-standard.org/SSP1/SystemStructureCommon" '
        'xmlns:ssv="http://ssp-standard.org/SSP1/SystemStructureParameterValues" '
        'name="{name}" version="1.0">')
LAG_CONNECTORS = ('<ssd:Connectors><ssd:Connector name="u" kind="input"><ssc:Real{u}/>'
                  '</ssd:Connector><ssd:Connector name="y" kind="output"><ssc:Real{y}/>'
                  '</ssd:Connector></ssd:Connectors>')


def ssv(values: dict) -> str:
    params = "".join(f'<ssv:Parameter name="{k}"><ssv:Real value="{v!r}"/></ssv:Parameter>'
                     for k, v in values.items())
    return ('<?xml version="1.0" encoding="UTF-8"?><ssv:ParameterSet xmlns:ssv='
            '"http://ssp-standard.org/SSP1/SystemStructureParameterValues" version="1.0" '
            f'name="p"><ssv:Parameters>{params}</ssv:Parameters></ssv:ParameterSet>')


def lag(name, units=("", ""), bindings=""):
    u, y = (f' unit="{x}"' if x else "" for x in units)
    return (f'<ssd:Component name="{name}" type="application/x-fmu-sharedlibrary" '
            f'source="resources/Lag.fmu">{LAG_CONNECTORS.format(u=u, y=y)}{bindings}'
            '</ssd:Component>')


def package(path: Path, ssd: str, lag_fmu: Path, files: dict | None = None) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("SystemStructure.ssd", ssd)
        z.write(lag_fmu, "resources/Lag.fmu")
        for name, text in (files or {}).items():
            z.writestr(name, text)
    return path


@pytest.fixture(scope="module")
def lag_fmu(tmp_path_factory):
    d = tmp_path_factory.mktemp("fmu")
    subprocess.run([sys.executable, "-m", "pythonfmu", "build", "-f", str(SOURCES / "Lag.py"),
                    "-d", str(d)], check=True, capture_output=True)
    return d / "Lag.fmu"


def chain_ssd(name="chain"):
    """r -> A -> B -> y; A.tau bound three times (component 5.0, system inline 0.3 later
    than a system file 0.9: the system wins over the component, the later over the earlier),
    B.tau from its own file; one name that matches nothing."""
    a_binding = ('<ssd:ParameterBindings><ssd:ParameterBinding><ssd:ParameterValues>'
                 + ssv({"tau": 5.0}).split("?>", 1)[1] +
                 '</ssd:ParameterValues></ssd:ParameterBinding></ssd:ParameterBindings>')
    b_binding = ('<ssd:ParameterBindings><ssd:ParameterBinding source="resources/B.ssv"/>'
                 '</ssd:ParameterBindings>')
    return (HEAD.format(name=name) +
            '<ssd:System name="root"><ssd:Connectors>'
            '<ssd:Connector name="r" kind="input"><ssc:Real/></ssd:Connector>'
            '<ssd:Connector name="y" kind="output"><ssc:Real/></ssd:Connector>'
            '</ssd:Connectors><ssd:ParameterBindings>'
            '<ssd:ParameterBinding source="resources/sys.ssv"/>'
            '<ssd:ParameterBinding><ssd:ParameterValues>'
            + ssv({"A.tau": 0.3, "A.nope": 1.0}).split("?>", 1)[1] +
            '</ssd:ParameterValues></ssd:ParameterBinding></ssd:ParameterBindings>'
            '<ssd:Elements>' + lag("A", bindings=a_binding) + lag("B", bindings=b_binding) +
            '</ssd:Elements><ssd:Connections>'
            '<ssd:Connection startConnector="r" endElement="A" endConnector="u"/>'
            '<ssd:Connection startElement="A" startConnector="y" endElement="B" '
            'endConnector="u"/>'
            '<ssd:Connection startElement="B" startConnector="y" endConnector="y"/>'
            '</ssd:Connections></ssd:System>'
            f'<ssd:DefaultExperiment startTime="0" stopTime="{T}"/>'
            '</ssd:SystemStructureDescription>')


def by_hand(lag_fmu, tau_a, tau_b, between=None, source=1.0):
    """The chain assembled in Python: Constant -> A -> [between] -> B."""
    m = Model("hand")
    m.add(Constant("r", source), FmuBlock("A", str(lag_fmu), H, {"tau": tau_a}),
          FmuBlock("B", str(lag_fmu), H, {"tau": tau_b}))
    m.connect("r.out", "A.u")
    if between is None:
        m.connect("A.y", "B.u")
    else:
        k, b = between
        m.add(Gain("k", k), Constant("b", b), Sum("s", "++"))
        m.connect("A.y", "k.in")
        m.connect("k.out", "s.in1")
        m.connect("b.out", "s.in2")
        m.connect("s.out", "B.u")
    return m


def cosim(model):
    return CoSimulation(model, SimulationConfig(dt=H, t_end=T, cosim=CosimConfig(H=H))).run()


def test_a_chain_of_fmus_runs_as_fmpy_simulates_the_package(lag_fmu, tmp_path):
    path = package(tmp_path / "chain.ssp", chain_ssd(), lag_fmu,
                   {"resources/B.ssv": ssv({"tau": 0.7}),
                    "resources/sys.ssv": ssv({"A.tau": 0.9})})
    with pytest.warns(UserWarning, match=r"matching no variable.*A\.nope"):
        model = load_ssp(path, step=H, inputs={"r": 1.0})
    assert model.simulation.t_end == T and model.simulation.cosim.H == H
    logs = CoSimulation(model, model.simulation).run()

    # fmpy's SSP simulator (a Jacobi loop; bindings given as its parameter set)
    from fmpy.ssp.simulation import simulate_ssp
    from fmpy.ssp.ssd import read_ssv
    (tmp_path / "p.ssv").write_text(ssv({"A.tau": 0.3, "B.tau": 0.7}))
    ref = simulate_ssp(str(path), stop_time=T - H / 2, step_size=H,
                       parameter_set=read_ssv(str(tmp_path / "p.ssv")),
                       input={"r": lambda t: 1.0})
    # fmpy applies every connection after the step, the root input's too: its whole run
    # is one step late (row k, labelled t_k, holds what cosim has at t_k)
    assert len(ref) == round(T / H)
    for key, col in (("A/fmu.y", "A.y"), ("B/fmu.y", "B.y")):
        t = logs.time_of(key)
        np.testing.assert_allclose(t[:len(ref)], ref["time"], rtol=0, atol=1e-12)
        np.testing.assert_allclose(logs[key][:len(ref), 0], ref[col], rtol=0, atol=1e-15)
    assert abs(logs["B/fmu.y"][-1, 0]) > 0.1              # the signal went through the chain

    # the same system assembled by hand, bit for bit
    hand = cosim(by_hand(lag_fmu, 0.3, 0.7))
    for key in ("A/fmu.y", "B/fmu.y"):
        np.testing.assert_array_equal(logs[key], hand[key], err_msg=key)


def units_ssd():
    units = ('<ssd:Units><ssc:Unit name="m"><ssc:BaseUnit m="1"/></ssc:Unit>'
             '<ssc:Unit name="km"><ssc:BaseUnit m="1" factor="1000"/></ssc:Unit>'
             '<ssc:Unit name="degC"><ssc:BaseUnit K="1" offset="273.15"/></ssc:Unit>'
             '<ssc:Unit name="K"><ssc:BaseUnit K="1"/></ssc:Unit></ssd:Units>')
    return (HEAD.format(name="units") + '<ssd:System name="root"><ssd:Elements>'
            + lag("A", ("", "m")) + lag("B", ("km", "")) + lag("C", ("", "degC"))
            + lag("D", ("K", "")) + '</ssd:Elements><ssd:Connections>'
            '<ssd:Connection startElement="A" startConnector="y" endElement="B" '
            'endConnector="u"><ssc:LinearTransformation factor="2" offset="0.5"/>'
            '</ssd:Connection>'
            '<ssd:Connection startElement="C" startConnector="y" endElement="D" '
            'endConnector="u"/>'
            '</ssd:Connections></ssd:System>' + units +
            f'<ssd:DefaultExperiment stopTime="{T}"/></ssd:SystemStructureDescription>')


def test_units_are_converted_and_linear_transformations_applied(lag_fmu, tmp_path):
    path = package(tmp_path / "units.ssp", units_ssd(), lag_fmu)
    model = load_ssp(path, step=H)
    logs = CoSimulation(model, model.simulation).run()
    # m -> km is 1/1000, then 2 v + 0.5; degC -> K is v + 273.15 (A.u and C.u undriven:
    # their start value 0, so the chain is driven by the offsets alone)
    hand = Model("hand")
    hand.add(*(FmuBlock(n, str(lag_fmu), H) for n in "ABCD"),
             Constant("a0", 0.0), Constant("c0", 0.0), Gain("k", 2 * 0.001),
             Constant("b", 0.5), Sum("s", "++"), Gain("kc", 1.0), Constant("bc", 273.15),
             Sum("sc", "++"))
    hand.connect("a0.out", "A.u")
    hand.connect("c0.out", "C.u")
    hand.connect("A.y", "k.in")
    hand.connect("k.out", "s.in1")
    hand.connect("b.out", "s.in2")
    hand.connect("s.out", "B.u")
    hand.connect("C.y", "kc.in")
    hand.connect("kc.out", "sc.in1")
    hand.connect("bc.out", "sc.in2")
    hand.connect("sc.out", "D.u")
    ref = cosim(hand)
    for key in ("B/fmu.y", "D/fmu.y"):
        np.testing.assert_array_equal(logs[key], ref[key], err_msg=key)
    # and physically: D follows 273.15 K through a lag of tau 0.5 (10 Euler substeps)
    assert 273.15 * 0.8 < logs["D/fmu.y"][-1, 0] < 273.15


def nested_ssd():
    """A -> S(C) -> B with S a subsystem; C.tau bound in S (0.2) and at the root (0.4)."""
    inner = ('<ssd:System name="S"><ssd:Connectors>'
             '<ssd:Connector name="u" kind="input"><ssc:Real/></ssd:Connector>'
             '<ssd:Connector name="y" kind="output"><ssc:Real/></ssd:Connector>'
             '</ssd:Connectors><ssd:ParameterBindings><ssd:ParameterBinding prefix="C.">'
             '<ssd:ParameterValues>' + ssv({"tau": 0.2}).split("?>", 1)[1] +
             '</ssd:ParameterValues></ssd:ParameterBinding></ssd:ParameterBindings>'
             '<ssd:Elements>' + lag("C") + '</ssd:Elements><ssd:Connections>'
             '<ssd:Connection startConnector="u" endElement="C" endConnector="u"/>'
             '<ssd:Connection startElement="C" startConnector="y" endConnector="y"/>'
             '</ssd:Connections></ssd:System>')
    return (HEAD.format(name="nested") + '<ssd:System name="root"><ssd:ParameterBindings>'
            '<ssd:ParameterBinding><ssd:ParameterValues>'
            + ssv({"S.C.tau": 0.4, "A.u": 1.0}).split("?>", 1)[1] +
            '</ssd:ParameterValues></ssd:ParameterBinding></ssd:ParameterBindings>'
            '<ssd:Elements>' + lag("A") + inner + lag("B") + '</ssd:Elements>'
            '<ssd:Connections>'
            '<ssd:Connection startElement="A" startConnector="y" endElement="S" '
            'endConnector="u"/>'
            '<ssd:Connection startElement="S" startConnector="y" endElement="B" '
            'endConnector="u"/></ssd:Connections></ssd:System>'
            f'<ssd:DefaultExperiment stopTime="{T}"/></ssd:SystemStructureDescription>')


def test_a_nested_system_is_flattened_and_the_outer_binding_wins(lag_fmu, tmp_path):
    path = package(tmp_path / "nested.ssp", nested_ssd(), lag_fmu)
    model = load_ssp(path, step=H)
    assert {b.name for b in model.blocks if isinstance(b, FmuBlock)} == {"A", "S_C", "B"}
    assert model["S_C"].start_values == {"tau": 0.4}
    logs = CoSimulation(model, model.simulation).run()
    hand = Model("hand")
    hand.add(Constant("a0", 1.0), FmuBlock("A", str(lag_fmu), H),
             FmuBlock("S_C", str(lag_fmu), H, {"tau": 0.4}), FmuBlock("B", str(lag_fmu), H))
    hand.connect("a0.out", "A.u")
    hand.connect("A.y", "S_C.u")
    hand.connect("S_C.y", "B.u")
    ref = cosim(hand)
    for key in ("A/fmu.y", "S_C/fmu.y", "B/fmu.y"):
        np.testing.assert_array_equal(logs[key], ref[key], err_msg=key)


def test_save_ssp_writes_a_valid_package_that_loads_back_to_the_same_run(lag_fmu, tmp_path):
    model = by_hand(lag_fmu, 0.3, 0.7)
    model.add(Gain("g", 2.5))
    model.connections = [c for c in model.connections if c.dst != "B.u"]
    model.connect("A.y", "g.in")
    model.connect("g.out", "B.u")
    sim = SimulationConfig(dt=H, t_end=T, cosim=CosimConfig(H=H))
    ref = CoSimulation(model, sim).run()
    path = save_ssp(model, tmp_path / "out.ssp", simulation=sim)

    from fmpy.ssp.ssd import read_ssd
    ssd = read_ssd(str(path), validate=True)        # the SSP 1.0 schemas
    assert sorted(e.name for e in ssd.system.elements) == ["A", "B"]

    back = load_ssp(path)
    assert back.simulation.cosim.H == H and back.simulation.t_end == T
    logs = CoSimulation(back, back.simulation).run()
    for key in ("A/fmu.y", "B/fmu.y"):
        np.testing.assert_array_equal(logs[key], ref[key], err_msg=key)


def test_every_problem_of_a_package_is_reported_at_once(lag_fmu, tmp_path):
    ssd = (HEAD.format(name="bad") + '<ssd:System name="root"><ssd:Connectors>'
           '<ssd:Connector name="r" kind="input"><ssc:Real/></ssd:Connector></ssd:Connectors>'
           '<ssd:Elements>' + lag("A") +
           '<ssd:Component name="M" source="resources/Missing.fmu"/>'
           '<ssd:Component name="N" type="application/x-ssp-package" source="x.ssp"/>'
           '</ssd:Elements><ssd:Connections>'
           '<ssd:Connection startElement="A" startConnector="y" endElement="A" '
           'endConnector="u"><ssc:BooleanMappingTransformation/></ssd:Connection>'
           '</ssd:Connections></ssd:System></ssd:SystemStructureDescription>')
    path = package(tmp_path / "bad.ssp", ssd, lag_fmu)
    with pytest.raises(ModelError) as info:
        load_ssp(path, step=H, inputs={"q": 1.0})
    text = str(info.value)
    assert "5 problem(s)" in text, text
    for part in ("'M': its FMU 'resources/Missing.fmu' is not in the package",
                 "'N': type 'application/x-ssp-package' is not supported",
                 "BooleanMappingTransformation is not supported",
                 "'q' is not an input connector", "system input 'r' has no value"):
        assert part in text, (part, text)


def test_cosim_run_takes_an_ssp(lag_fmu, tmp_path):
    model = by_hand(lag_fmu, 0.3, 0.7)
    sim = SimulationConfig(dt=H, t_end=T, cosim=CosimConfig(H=H))
    path = save_ssp(model, tmp_path / "sys.ssp", simulation=sim)
    out = tmp_path / "res.npz"
    done = subprocess.run([sys.executable, "-m", "cosim.cli", "run", str(path), "--out", str(out)],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    ref = CoSimulation(model, sim).run()
    from cosim.run.logs import Logs
    logs = Logs.load(out) if hasattr(Logs, "load") else Logs.from_npz(out)
    np.testing.assert_array_equal(logs["B/fmu.y"], ref["B/fmu.y"])
