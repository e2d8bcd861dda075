"""Every FMI variable type and shape as ports, FMI 3.0 time-based input clocks as scheduled
events, String and Binary variables (set as start values, read as text outputs), and clear
refusals (other clock kinds, Scheduled Execution). The test FMUs are compiled here from
``fmu_sources/c``: ``types.c`` maps every input to an output (numbers doubled, booleans
negated, enumerations to the next item, strings and binaries copied), ``ticker.c`` counts
its clock's ticks."""

import dataclasses

import numpy as np
import pytest

from blocks import Constant
from blocks.fmu import FmuBlock
from cosim import (CoSimulation, CosimConfig, Model, ModelError, SimulationConfig,
                   SimulationError, Simulator)
from tests.cluster.fmu_build import Var, build_fmu
from tests.cluster.fmu_specs import TICKER, TYPES2, TYPES3

#: Input values per port (base name), chosen so that each type holds them exactly.
VALUES = {"r": 1.25, "i": -7.0, "b": 1.0, "e": 2.0, "f32": 0.375, "i8": -60.0, "u16": 30000.0,
          "i32": -2.0 ** 30, "i64": -2.0 ** 52, "u64": 2.0 ** 52, "a": [1.0, -2.0, 3.5],
          "s": [0.5, 1.5, 2.5, 3.5, 4.5]}
BASES3 = ["f32", "i8", "u16", "i32", "i64", "u64", "b", "e", "a", "s"]
#: What the FMU computes from them (its C source, types.c): the oracle.
EXPECTED = {"b": 0.0, "e": 3.0}


def expected(base: str):
    return np.atleast_1d(EXPECTED.get(base, 2.0 * np.asarray(VALUES[base])))


@pytest.fixture(scope="module")
def types_fmu(tmp_path_factory):
    return {"2.0": build_fmu(TYPES2, "2.0", tmp_path_factory.mktemp("types2")),
            "3.0": build_fmu(TYPES3, "3.0", tmp_path_factory.mktemp("types3"))}


def types_model(fmu, bases, start=None, values=None):
    m = Model("m")
    m.add(FmuBlock("f", str(fmu), 0.1, start or {}))
    for base in bases:
        m.add(Constant(f"c_{base}", (values or {}).get(base, VALUES[base])))
        m.connect(f"c_{base}.out", f"f.{base}_in")
    return m


@pytest.mark.parametrize("version, bases", [
    ("2.0", ["r", "i", "b", "e"]),
    ("3.0", BASES3)])
@pytest.mark.parametrize("cosim", [False, True], ids=["monolithic", "cosimulated"])
def test_every_type_and_shape_is_a_port(types_fmu, version, bases, cosim):
    start = {"n": 5} if version == "3.0" else {}     # the structural parameter sizes s
    m = types_model(types_fmu[version], bases, start)
    cfg = SimulationConfig(dt=0.1, t_end=0.3, cosim=CosimConfig(H=0.1) if cosim else None)
    logs = (CoSimulation if cosim else Simulator)(m, cfg).run()
    for base in bases:
        key = f"f/fmu.{base}_out" if cosim else f"f.{base}_out"
        want = expected(base)
        assert logs[key].shape[1:] == want.shape, base
        np.testing.assert_array_equal(logs[key][-1], want, err_msg=base)


def test_structural_parameter_fixes_the_array_shape_before_initialization(types_fmu):
    from cosim.fmi.unit import FmuUnit
    for n in (2, 7):
        unit = FmuUnit(types_fmu["3.0"], "u", {"n": n})
        shapes = {p.name: p.shape for p in unit.describe().outputs}
        assert shapes["s_out"] == (n,) and shapes["a_out"] == (3,)
        unit.initialize(0.0)
        np.testing.assert_array_equal(unit.get_outputs()["s_out"], np.full(n, 4.0))
        unit.terminate()


def test_types_match_fmpy(types_fmu):
    from fmpy import simulate_fmu
    ref = simulate_fmu(str(types_fmu["2.0"]), stop_time=0.3, output_interval=0.1,
                       start_values={"r_in": 1.25, "i_in": -7, "b_in": True, "e_in": 2})
    logs = Simulator(types_model(types_fmu["2.0"], ["r", "i", "b", "e"]),
                     SimulationConfig(dt=0.1, t_end=0.3)).run()
    for base in ("r", "i", "b", "e"):
        np.testing.assert_array_equal(logs[f"f.{base}_out"][:, 0],
                                      np.asarray(ref[f"{base}_out"], dtype=float), base)


def test_an_input_value_the_type_cannot_hold_is_an_error_naming_the_port(types_fmu):
    m = types_model(types_fmu["3.0"], BASES3, {"n": 5}, values={"i8": 2.5})
    with pytest.raises(SimulationError, match=r"input 'i8_in' is an FMI Int8; the value \[2\.5\]"):
        Simulator(m, SimulationConfig(dt=0.1, t_end=0.3)).run()


TEXT_START = {"t_out": "Set me!", "bin_out": b"\x00\xffab"}
TEXT_SET = {"t_in": "h\u00e9llo, FMU", "bin_in": b"\x01\x00\x02"}


def _text(version, d):
    return {k: v for k, v in d.items() if version == "3.0" or not k.startswith("bin")}


@pytest.mark.parametrize("version", ["2.0", "3.0"])
@pytest.mark.parametrize("path", ["unit", "block", "model_exchange"])
@pytest.mark.parametrize("given", [False, True], ids=["start", "set"])
def test_string_and_binary_inputs_keep_their_start_or_set_values(types_fmu, version, path,
                                                                 given):
    """String (and FMI 3.0 Binary) inputs left unconnected hold the value set in
    start_values, else their start value; types.c copies it to the output."""
    from blocks.fmu import ModelExchangeFmuBlock
    from cosim.fmi.unit import FmuUnit
    fmu = types_fmu[version]
    start = {"n": 5} if version == "3.0" else {}
    start |= _text(version, TEXT_SET) if given else {}
    want = {k.replace("_in", "_out"): v for k, v in _text(version, TEXT_SET).items()} \
        if given else _text(version, TEXT_START)
    if path == "unit":
        unit = FmuUnit(fmu, "f", start)
        # (Ports of their own kind: the unconnected input keeps its value.)
        assert set(_text(version, {"t_in": 0, "t_out": 0, "bin_in": 0, "bin_out": 0})) <= \
            {p.name for p in unit.describe().inputs + unit.describe().outputs}
        unit.initialize(0.0)
        unit.do_step(0.0, 0.1)
        got = unit.text_outputs()
        unit.terminate()
    else:
        blk = (FmuBlock("f", str(fmu), 0.1, start) if path == "block"
               else ModelExchangeFmuBlock("f", str(fmu), start))
        blk.initialize(0.0)
        got = blk.text_outputs()
        blk.finalize()
    assert got == want


def test_a_text_value_of_the_wrong_kind_is_refused_naming_the_variable(types_fmu):
    with pytest.raises(ModelError, match=r"start value: 't_in' is an FMI String; its value "
                                         r"must be a str, got int 3"):
        FmuBlock("f", str(types_fmu["3.0"]), 0.1, {"t_in": 3}).initialize(0.0)
    with pytest.raises(ModelError, match=r"'bin_in' is an FMI Binary; its value must be "
                                         r"bytes, got str 'ab'"):
        FmuBlock("f", str(types_fmu["3.0"]), 0.1, {"bin_in": "ab"}).initialize(0.0)


def test_string_values_match_fmpy(types_fmu):
    """fmpy's own instance of the same FMU, given the same string, reads the same output."""
    from fmpy import extract, read_model_description
    from fmpy.fmi2 import FMU2Slave
    fmu = str(types_fmu["2.0"])
    md = read_model_description(fmu)
    vr = {v.name: v.valueReference for v in md.modelVariables}
    d = extract(fmu)
    slave = FMU2Slave(guid=md.guid, unzipDirectory=d,
                      modelIdentifier=md.coSimulation.modelIdentifier, instanceName="ref")
    slave.instantiate()
    slave.setupExperiment(startTime=0.0)
    slave.setString([vr["t_in"]], [TEXT_SET["t_in"]])
    slave.enterInitializationMode()
    slave.exitInitializationMode()
    slave.doStep(0.0, 0.1)
    ref = slave.getString([vr["t_out"]])[0].decode("utf-8")
    slave.terminate()
    slave.freeInstance()
    blk = FmuBlock("f", fmu, 0.1, {"t_in": TEXT_SET["t_in"]})
    blk.initialize(0.0)
    assert blk.text_outputs() == {"t_out": ref} == {"t_out": TEXT_SET["t_in"]}
    blk.finalize()


@pytest.mark.parametrize("clock, feature", [
    (("tick", "input", "triggered", None), "an input clock of interval variability "
                                           "'triggered'"),
    (("tick", "input", "tunable", 0.3), "an input clock of interval variability 'tunable'"),
    (("tick", "output", "triggered", None), "an output clock")])
def test_other_clock_kinds_are_refused_naming_the_feature(tmp_path, clock, feature):
    fmu = build_fmu(dataclasses.replace(TICKER, clocks=(clock,)), "3.0", tmp_path)
    with pytest.raises(ModelError, match=f"clock 'tick' is {feature}"):
        FmuBlock("f", str(fmu), 0.1)


@pytest.fixture(scope="module")
def ticker_fmu(tmp_path_factory):
    return build_fmu(TICKER, "3.0", tmp_path_factory.mktemp("ticker"))


@pytest.mark.parametrize("H", [0.1, 0.25])
@pytest.mark.parametrize("cosim", [False, True], ids=["monolithic", "cosimulated"])
def test_time_based_input_clock_ticks_as_scheduled_events(ticker_fmu, H, cosim):
    m = Model("m")
    m.add(Constant("u", 2.0), FmuBlock("f", str(ticker_fmu), H))
    m.connect("u.out", "f.u")
    cfg = SimulationConfig(dt=H, t_end=2.0, cosim=CosimConfig(H=H) if cosim else None)
    logs = (CoSimulation if cosim else Simulator)(m, cfg).run()
    key = "f/fmu.count" if cosim else "f.count"
    t = logs.time_of(key)
    # Ticks at 0, 0.3, 0.6, ... (intervalDecimal 0.3), each adding u = 2 to the total; a
    # tick is handled when the unit steps from it or inside a step, so the count logged at
    # time t is that of the ticks before t.
    ticks = np.ceil(t / 0.3 - 1e-9)
    np.testing.assert_array_equal(logs[key][:, 0], ticks)
    np.testing.assert_array_equal(logs[key.replace("count", "total")][:, 0], 2.0 * ticks)


@pytest.mark.parametrize("block", ["FmuBlock", "ModelExchangeFmuBlock"])
def test_a_scheduled_execution_only_fmu_is_refused_as_an_optional_interface(ticker_fmu,
                                                                            tmp_path, block):
    """Both blocks name the interface the FMU offers (neither points at the other)."""
    import re
    import zipfile

    import blocks.fmu
    fmu = tmp_path / "Scheduled.fmu"
    with zipfile.ZipFile(ticker_fmu) as z, zipfile.ZipFile(fmu, "w") as out:
        for n in z.namelist():
            data = z.read(n)
            if n == "modelDescription.xml":
                text = re.sub(r"<ModelExchange[^>]*/>", "", data.decode())
                text = re.sub(r"<CoSimulation[^>]*/>",
                              '<ScheduledExecution modelIdentifier="Ticker"/>', text)
                data = text.encode()
            out.writestr(n, data)
    with pytest.raises(ModelError, match=r"offers only FMI 3\.0 Scheduled Execution, an "
                                         r"optional interface that cosim does not support"):
        getattr(blocks.fmu, block)("f", str(fmu))
