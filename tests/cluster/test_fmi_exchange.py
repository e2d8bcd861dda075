"""Model exchange in every model, FMI 2.0 and 3.0: an FMU without continuous states gets its
time events (alone in a model, or beside other states), FMI 3.0 array states and derivatives,
Boolean structural parameters; co-simulation FMUs stepped at the importer's step, stop
samples, unconnected inputs and macro points stamped once. Test FMUs
are compiled here from ``fmu_sources/c`` (:mod:`fmu_build`); oracles are the analytic
solutions and fmpy's ``simulate_fmu``."""

import numpy as np
import pytest

from blocks import Constant
from blocks.continuous import Integrator
from blocks.fmu import FmuBlock, ModelExchangeFmuBlock
from cosim import (CoSimulation, CosimConfig, Model, SimulationConfig, SimulationError,
                   Simulator)
from tests.cluster.fmu_build import build_fmu
from tests.cluster.fmu_specs import ARRAY_STATE, LAG, STAIR

TIGHT = dict(solver="RK45", rtol=1e-10, atol=1e-12)


@pytest.fixture(scope="module", params=["2.0", "3.0"])
def version(request):
    return request.param


@pytest.fixture(scope="module")
def stair_fmu(version, tmp_path_factory):
    return build_fmu(STAIR, version, tmp_path_factory.mktemp(f"stair{version}"))


@pytest.fixture(scope="module")
def array_fmu(tmp_path_factory):
    return build_fmu(ARRAY_STATE, "3.0", tmp_path_factory.mktemp("array"))


def run_stair(fmu, period, dt, t_end, with_state):
    m = Model("m")
    m.add(ModelExchangeFmuBlock("f", str(fmu), start_values={"period": period}))
    if with_state:                   # an unrelated continuous state in the same model
        m.add(Constant("one", 1.0), Integrator("i", 0.0))
        m.connect("one.out", "i.in")
    sim = Simulator(m, SimulationConfig(dt=dt, t_end=t_end, **TIGHT))
    return sim, sim.run()


@pytest.mark.parametrize("with_state", [False, True], ids=["alone", "beside_a_state"])
@pytest.mark.parametrize("period, dt", [(1.0, 0.2), (0.37, 0.1)])
def test_time_events_of_an_fmu_without_states_are_the_analytic_ones(stair_fmu, with_state,
                                                                     period, dt):
    """Stair: counter = 1 + floor(t / period); it asks to stop at t = 9 * period."""
    sim, logs = run_stair(stair_fmu, period, dt, 10.0, with_state)
    # The events at 1..8 periods switch; the one at 9 periods ends the run: on a tick it is
    # a switch whose tick is logged before the run ends, between ticks the run ends there.
    events = [t for t, _ in sim.switch_log]
    on_tick = abs(9 * period / dt - round(9 * period / dt)) < 1e-9
    exact = [k * period for k in range(1, 10 if on_tick else 9)]
    assert len(events) == len(exact)
    np.testing.assert_allclose(events, exact, rtol=0, atol=1e-9)
    assert sim.stopped and abs(sim.t - 9 * period) <= 1e-9
    t, c = logs.time_of("f.counter"), logs["f.counter"][:, 0]
    np.testing.assert_array_equal(c, 1 + np.floor(t / period + 1e-9))


def test_time_events_of_an_fmu_without_states_match_fmpy(stair_fmu):
    """Every sample as fmpy's model-exchange run; at the terminating event (t = 9) the
    counter after the event, as fmpy's co-simulation run shows it (fmpy's model-exchange
    run records the value before a terminating event)."""
    from fmpy import simulate_fmu
    _, logs = run_stair(stair_fmu, 1.0, 0.2, 10.0, False)
    t, c = logs.time_of("f.counter"), logs["f.counter"][:, 0]
    assert t[-1] == 9.0                          # the stop time's sample is logged
    ref = {kind: simulate_fmu(str(stair_fmu), fmi_type=kind, stop_time=10.0,
                              output_interval=0.2) for kind in ("ModelExchange", "CoSimulation")}
    me = ref["ModelExchange"]
    last = np.append(me["time"][1:] != me["time"][:-1], True)   # after an event's rows
    rt, rc = me["time"][last], me["counter"][last]
    i = np.searchsorted(rt, t[:-1] - 1e-9)
    np.testing.assert_allclose(rt[i], t[:-1], atol=1e-9)
    np.testing.assert_array_equal(c[:-1], rc[i])
    cs = ref["CoSimulation"]
    assert cs["time"][-1] == 9.0 and c[-1] == cs["counter"][-1] == 10


@pytest.mark.parametrize("cosim", [False, True], ids=["block", "unit"])
def test_a_cosimulation_fmu_that_stops_at_a_tick_logs_that_tick(stair_fmu, cosim):
    """The FMU's last outputs (at its stop time, on the grid) are logged on the block path
    as on the unit path, equal to fmpy's co-simulation run."""
    from fmpy import simulate_fmu
    m = Model("m")
    m.add(FmuBlock("f", str(stair_fmu), 0.2))
    cfg = SimulationConfig(dt=0.2, t_end=10.0, cosim=CosimConfig(H=0.2) if cosim else None)
    logs = (CoSimulation if cosim else Simulator)(m, cfg).run()
    key = "f/fmu.counter" if cosim else "f.counter"
    ref = simulate_fmu(str(stair_fmu), stop_time=10.0, output_interval=0.2, step_size=0.2)
    np.testing.assert_allclose(logs.time_of(key), ref["time"], rtol=0, atol=1e-9)
    np.testing.assert_array_equal(logs[key][:, 0], ref["counter"])


@pytest.mark.parametrize("doubled", [False, True])
def test_fmi3_array_state_and_derivative_are_the_analytic_ones(array_fmu, doubled):
    """x' = -k x + g u element-wise, x(0) = 1: x = e^{-kt} + g u / k (1 - e^{-kt})."""
    m = Model("m")
    m.add(ModelExchangeFmuBlock("f", str(array_fmu), start_values={"doubled": doubled}),
          Constant("u", np.array([1.0, 2.0, 3.0])))
    m.connect("u.out", "f.u")
    logs = Simulator(m, SimulationConfig(dt=0.1, t_end=2.0, **TIGHT)).run()
    t = logs.time_of("f.y")[:, None]
    k, u, g = np.array([1.0, 2.0, 3.0]), np.array([1.0, 2.0, 3.0]), 2.0 if doubled else 1.0
    exact = np.exp(-k * t) + g * u / k * (1 - np.exp(-k * t))
    assert logs["f.y"].shape == (21, 3)
    np.testing.assert_allclose(logs["f.y"], exact, rtol=0, atol=1e-8)


def test_fmi3_array_state_matches_fmpy_on_every_path(array_fmu):
    from fmpy import simulate_fmu
    ref = {kind: simulate_fmu(str(array_fmu), fmi_type=kind, stop_time=2.0,
                              output_interval=0.1, relative_tolerance=1e-10,
                              start_values={"doubled": True})
           for kind in ("ModelExchange", "CoSimulation")}
    m = Model("m")
    m.add(ModelExchangeFmuBlock("f", str(array_fmu), start_values={"doubled": True}))
    m.add(Constant("u", np.zeros(3)))
    m.connect("u.out", "f.u")
    me = Simulator(m, SimulationConfig(dt=0.1, t_end=2.0, **TIGHT)).run()
    np.testing.assert_allclose(me["f.y"], ref["ModelExchange"]["y"], rtol=0, atol=1e-8)
    m.blocks[0] = FmuBlock("f", str(array_fmu), 0.1, start_values={"doubled": True})
    cs = CoSimulation(m, SimulationConfig(dt=0.1, t_end=2.0, cosim=CosimConfig(H=0.1))).run()
    # Equal but for fmpy's accumulated step times (t += h; cosim: k * h).
    np.testing.assert_allclose(cs["f/fmu.y"], ref["CoSimulation"]["y"], rtol=1e-14, atol=0)


@pytest.mark.parametrize("H", [0.01, 0.005, 0.04])
def test_the_importer_chooses_the_step_not_the_default_experiment(version, tmp_path_factory,
                                                                  H):
    """LAG's default experiment says 0.01 s; FMI leaves the step to the importer: the FMU is
    stepped at the FmuBlock's sample_time (= H here), as fmpy steps it."""
    from fmpy import simulate_fmu
    fmu = build_fmu(LAG, version, tmp_path_factory.mktemp(f"lag{version}"))
    m = Model("m")
    m.add(FmuBlock("f", str(fmu), H), Constant("u", 1.0))
    m.connect("u.out", "f.u")
    cs = CoSimulation(m, SimulationConfig(dt=H, t_end=0.4, cosim=CosimConfig(H=H))).run()
    ref = simulate_fmu(str(fmu), stop_time=0.4, step_size=H, output_interval=H,
                       start_values={"u": 1.0})
    # fmpy accumulates its communication times (t += h), cosim computes them (k * h): the
    # step times, hence the values, may differ in the last bit.
    np.testing.assert_allclose(cs["f/fmu.x"][:, 0], ref["x"], rtol=1e-14, atol=0)
    np.testing.assert_allclose(cs.time_of("f/fmu.x"), ref["time"], rtol=0, atol=1e-12)


def test_an_fmu_that_cannot_vary_its_step_refuses_a_second_step_size(tmp_path):
    """canHandleVariableCommunicationStepSize="false": one constant step, else an error
    naming the FMU, both sizes and the remedy."""
    import zipfile
    fmu = build_fmu(LAG, "2.0", tmp_path / "lag")
    fixed = tmp_path / "Fixed.fmu"
    with zipfile.ZipFile(fmu) as z, zipfile.ZipFile(fixed, "w") as out:
        for n in z.namelist():
            data = z.read(n)
            if n == "modelDescription.xml":
                data = data.replace(b'canHandleVariableCommunicationStepSize="true"',
                                    b'canHandleVariableCommunicationStepSize="false"')
            out.writestr(n, data)
    from cosim.fmi.unit import FmuUnit
    unit = FmuUnit(fixed, "lag", step=0.01)
    unit.initialize(0.0)
    try:
        unit.do_step(0.0, 0.02)
        unit.do_step(0.02, 0.02)
        with pytest.raises(SimulationError, match=r"FMU unit 'lag' \(Fixed\.fmu\): the FMU "
                           r"declares canHandleVariableCommunicationStepSize=false, so every "
                           r"step must be 0\.02 s .*this one is 0\.01 s \(use a fixed macro"):
            unit.do_step(0.04, 0.01)
    finally:
        unit.terminate()


def test_macro_points_are_stamped_once_so_a_results_table_has_one_row_each(tmp_path):
    """An FMU unit at 0.1 s stamps its samples 3 * 0.1 = 0.30000000000000004 s, the
    top-level blocks at 0.01 s stamp 30 * 0.01 = 0.3 s: the master's time of the macro
    point stamps both, so the CSV has one row per 0.01 s tick and a full row per macro
    point."""
    import csv
    fmu = build_fmu(LAG, "2.0", tmp_path / "lag")
    m = Model("m")
    m.add(Constant("u", 1.0), FmuBlock("f", str(fmu), 0.1), Integrator("i", 0.0))
    m.connect("u.out", "f.u")
    m.connect("f.x", "i.in")
    logs = CoSimulation(m, SimulationConfig(dt=0.01, t_end=10.0,
                                            cosim=CosimConfig(H=0.1))).run()
    logs.to_csv(tmp_path / "out.csv")
    rows = list(csv.reader(open(tmp_path / "out.csv")))
    header, body = rows[0], rows[1:]
    assert len(body) == 1001
    times = np.array([float(r[0]) for r in body])
    np.testing.assert_allclose(times, np.arange(1001) * 0.01, rtol=0, atol=1e-12)
    fmu_col = header.index("f/fmu.x")
    filled = [k for k, r in enumerate(body) if r[fmu_col] != ""]
    assert filled == list(range(0, 1001, 10))         # the 101 macro points, nothing else
    assert logs.time_of("f/fmu.x")[3] == logs.time_of("i.out")[30]


@pytest.mark.parametrize("path", ["block", "unit", "model_exchange"])
def test_an_unconnected_input_keeps_the_fmus_value_as_in_fmpy(version, tmp_path_factory,
                                                               path):
    """Inputs left unconnected keep their start value (or the one in start_values), as fmpy
    and libcosim leave them: LAG's u = 2 set, nothing wired to it."""
    from fmpy import simulate_fmu
    fmu = build_fmu(LAG, version, tmp_path_factory.mktemp(f"lag_open{version}"))
    m = Model("m")
    if path == "model_exchange":
        m.add(ModelExchangeFmuBlock("f", str(fmu), start_values={"u": 2.0}))
        logs = Simulator(m, SimulationConfig(dt=0.1, t_end=1.0, **TIGHT)).run()
        ref = simulate_fmu(str(fmu), fmi_type="ModelExchange", stop_time=1.0,
                           output_interval=0.1, relative_tolerance=1e-10,
                           start_values={"u": 2.0})
        np.testing.assert_allclose(logs["f.x"][:, 0], ref["x"], rtol=0, atol=1e-8)
        return
    m.add(FmuBlock("f", str(fmu), 0.1, start_values={"u": 2.0}))
    cfg = SimulationConfig(dt=0.1, t_end=1.0, cosim=CosimConfig(H=0.1) if path == "unit"
                           else None)
    logs = (CoSimulation if path == "unit" else Simulator)(m, cfg).run()
    key = "f/fmu.x" if path == "unit" else "f.x"
    ref = simulate_fmu(str(fmu), stop_time=1.0, output_interval=0.1, step_size=0.1,
                       start_values={"u": 2.0})
    np.testing.assert_allclose(logs[key][:, 0], ref["x"], rtol=1e-14, atol=0)
    assert logs[key][-1, 0] > 1.0            # driven by u = 2, not by a zero


def test_a_package_runs_at_its_step_whatever_its_fmus_default_experiments_say(tmp_path):
    """An SSP at 0.01 s whose second FMU's default experiment says 0.04 s runs at 0.01 s
    (the default experiment was taken for a constraint: H had to be a multiple of 0.04)."""
    import dataclasses

    from blocks.ssp import load_ssp, save_ssp
    fast = build_fmu(LAG, "2.0", tmp_path / "fast")
    slow = build_fmu(dataclasses.replace(LAG, step_size=0.04), "2.0", tmp_path / "slow")
    m = Model("pkg")
    m.add(Constant("r", 1.0), FmuBlock("a", str(fast), 0.01), FmuBlock("b", str(slow), 0.01))
    m.connect("r.out", "a.u")
    m.connect("a.x", "b.u")
    sim = SimulationConfig(dt=0.01, t_end=1.0, cosim=CosimConfig(H=0.01))
    path = save_ssp(m, tmp_path / "sys.ssp", simulation=sim)
    back = load_ssp(path)
    assert back.simulation.cosim.H == 0.01
    logs = CoSimulation(back, back.simulation).run()
    ref = CoSimulation(m, sim).run()
    assert len(logs.time_of("b/fmu.x")) == 101
    np.testing.assert_array_equal(logs["b/fmu.x"], ref["b/fmu.x"])
