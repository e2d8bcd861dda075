"""FMU events and termination, FMI 2.0 and 3.0: model-exchange FMUs whose state, time and
step events are located by cosim's event monitor, and FMUs that ask to terminate. Test FMUs
are compiled here from ``fmu_sources/c`` (:mod:`fmu_build`); oracles are the analytic
solutions, cosim's native bouncing ball and fmpy's ``simulate_fmu``."""

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from blocks import Constant
from blocks.fmu import FmuBlock, ModelExchangeFmuBlock
from cosim import (CoSimulation, CosimConfig, Model, SimulationConfig, SimulationError,
                   Simulator, simulation)
from tests.cluster.fmu_build import build_fmu
from tests.cluster.fmu_specs import BALL, SAMPLER

ROOT = Path(__file__).resolve().parents[2]
G, E, H0 = 9.81, 0.8, 10.0
TIGHT = dict(solver="RK45", rtol=1e-10, atol=1e-12)


@pytest.fixture(scope="module", params=["2.0", "3.0"])
def version(request):
    return request.param


@pytest.fixture(scope="module")
def ball_fmu(version, tmp_path_factory):
    return build_fmu(BALL, version, tmp_path_factory.mktemp(f"ball{version}"))


@pytest.fixture(scope="module")
def sampler_fmu(version, tmp_path_factory):
    return build_fmu(SAMPLER, version, tmp_path_factory.mktemp(f"sampler{version}"))


def analytic_impacts(t_end: float) -> list[float]:
    t, v, out = math.sqrt(2 * H0 / G), math.sqrt(2 * H0 * G), []
    while t < t_end:
        out.append(t)
        v *= E
        t += 2 * v / G
    return out


def run_ball(fmu, t_end=8.0):
    m = Model("m")
    m.add(ModelExchangeFmuBlock("ball", str(fmu)))
    sim = Simulator(m, SimulationConfig(dt=0.01, t_end=t_end, **TIGHT))
    return sim, sim.run()


def test_bouncing_ball_fmu_impacts_are_the_analytic_ones(ball_fmu):
    sim, _ = run_ball(ball_fmu)
    impacts = [t for t, _ in sim.switch_log]
    exact = analytic_impacts(8.0)
    assert len(impacts) == len(exact) == 4
    np.testing.assert_allclose(impacts, exact, rtol=0, atol=1e-9)


def test_bouncing_ball_fmu_matches_cosims_native_bouncing_ball(ball_fmu):
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import bouncing_ball
    finally:
        sys.path.pop(0)
    native = Simulator(bouncing_ball.build(), SimulationConfig(dt=0.01, t_end=8.0, **TIGHT))
    nat = native.run()
    sim, logs = run_ball(ball_fmu)
    np.testing.assert_allclose([t for t, _ in sim.switch_log], [t for t, _ in native.event_log],
                               rtol=0, atol=1e-9)
    np.testing.assert_allclose(logs["ball.h"][:, 0], nat["x.out"][:, 0], rtol=0, atol=1e-9)


def test_bouncing_ball_fmu_matches_fmpy(ball_fmu):
    from fmpy import simulate_fmu
    ref = simulate_fmu(str(ball_fmu), fmi_type="ModelExchange", stop_time=8.0,
                       output_interval=0.01, relative_tolerance=1e-12)
    sim, logs = run_ball(ball_fmu)
    # fmpy (CVode at 1e-12) records each impact as a sample with h = 0.
    fmpy_impacts = np.unique(ref["time"][(ref["h"] == 0.0) & (ref["time"] > 0)])
    np.testing.assert_allclose([t for t, _ in sim.switch_log], fmpy_impacts, rtol=0, atol=1e-9)
    h = np.interp(logs.time, ref["time"], ref["h"])
    np.testing.assert_allclose(logs["ball.h"][:, 0], h, rtol=0, atol=1e-9)


def sampler_model(fmu, stop_at=1000, d=0.5):
    m = Model("m")
    m.add(Constant("u", 2.0), Constant("d", d),
          ModelExchangeFmuBlock("s", str(fmu), {"stop_at": stop_at, "limit": 3.0}))
    m.connect("u.out", "s.u")
    m.connect("d.out", "s.d")
    return m


def test_time_events_event_iteration_and_discrete_inputs(sampler_fmu):
    sim = Simulator(sampler_model(sampler_fmu), SimulationConfig(dt=0.1, t_end=3.0, **TIGHT))
    logs = sim.run()
    t = logs.time
    # Time events every 0.25 s (nextEventTime); each takes two event iterations: the first
    # counts the tick, the second holds x = 2 t and adds the discrete input d = 0.5 (set
    # only in event mode: the FMU refuses it in continuous-time mode).
    n = np.floor(t / 0.25 + 1e-9)
    np.testing.assert_array_equal(logs["s.n"][:, 0], n)
    np.testing.assert_allclose(logs["s.held"][:, 0], 2.0 * 0.25 * n, rtol=0, atol=1e-9)
    np.testing.assert_allclose(logs["s.acc"][:, 0], 0.5 * n, rtol=0, atol=1e-12)
    np.testing.assert_allclose(logs["s.x"][:, 0], 2.0 * t, rtol=0, atol=1e-9)
    # Step events: completedIntegratorStep asked for event mode after every step above
    # |x| = 3, and every request was served by an event iteration.
    requested, served = logs["s.requested"][-1, 0], logs["s.served"][-1, 0]
    assert requested > 0 and served == requested
    assert [round(te / 0.25, 6) for te, _ in sim.switch_log[:3]] == [1.0, 2.0, 3.0]


def test_time_events_match_fmpy(sampler_fmu):
    from fmpy import simulate_fmu
    logs = Simulator(sampler_model(sampler_fmu, d=0.0),
                     SimulationConfig(dt=0.1, t_end=3.0, **TIGHT)).run()
    ref = simulate_fmu(str(sampler_fmu), fmi_type="ModelExchange", stop_time=3.0,
                       output_interval=0.1, start_values={"u": 2.0, "limit": 3.0},
                       record_events=False)
    np.testing.assert_array_equal(logs["s.n"][:, 0], ref["n"])
    np.testing.assert_allclose(logs["s.held"][:, 0], ref["held"], rtol=0, atol=1e-9)


def test_model_exchange_fmu_asking_to_terminate_ends_the_run_there(sampler_fmu):
    from fmpy import simulate_fmu
    sim = Simulator(sampler_model(sampler_fmu, stop_at=9), SimulationConfig(dt=0.1, t_end=3.0,
                                                                            **TIGHT))
    logs = sim.run()
    ref = simulate_fmu(str(sampler_fmu), fmi_type="ModelExchange", stop_time=3.0,
                       output_interval=0.1, start_values={"u": 2.0, "stop_at": 9})
    assert sim.t == pytest.approx(9 * 0.25, abs=1e-9)
    assert ref["time"][-1] == pytest.approx(sim.t, abs=1e-9)
    # The stop (between ticks) is logged: the FMU's outputs after its terminating event.
    assert logs.time_of("s.n")[-1] == sim.t and logs.time[-1] == sim.t
    assert logs["s.n"][-1, 0] == 9
    np.testing.assert_allclose(logs["s.x"][-1, 0], ref["x"][-1], rtol=1e-6)


def cs_model(fmu, H, stop_at=9):
    m = Model("m")
    m.add(Constant("u", 2.0), Constant("d", 0.0), FmuBlock("s", str(fmu), H, {"stop_at": stop_at}))
    m.connect("u.out", "s.u")
    m.connect("d.out", "s.d")
    return m


@pytest.mark.parametrize("H", [0.1, 0.3])
def test_cosimulation_fmu_asking_to_terminate_stops_where_fmpy_stops(sampler_fmu, version, H):
    from fmpy import simulate_fmu
    ref = simulate_fmu(str(sampler_fmu), stop_time=3.0, output_interval=H,
                       start_values={"u": 2.0, "stop_at": 9})
    t_stop = ref["time"][-1]
    # FMI 2.0: discard + fmi2Terminated, stopped at fmi2LastSuccessfulTime (the event, 2.25);
    # FMI 3.0: terminateSimulation at the end of the step that reached it.
    assert t_stop == pytest.approx(2.25 if version == "2.0" else math.ceil(2.25 / H) * H)
    sim = Simulator(cs_model(sampler_fmu, H), SimulationConfig(dt=H, t_end=3.0))
    mono = sim.run()
    assert sim.t == pytest.approx(t_stop, abs=1e-12)
    # The stop sample is logged, between ticks too (FMI 2.0 at 2.25), as fmpy records it.
    assert mono.time_of("s.n")[-1] == pytest.approx(t_stop, abs=1e-12)
    assert mono["s.n"][-1, 0] == ref["n"][-1] == 9
    np.testing.assert_allclose(mono["s.x"][-1, 0], ref["x"][-1], rtol=1e-9)
    assert mono.time[-1] == pytest.approx(t_stop, abs=1e-12)
    co = CoSimulation(cs_model(sampler_fmu, H), SimulationConfig(
        dt=H, t_end=3.0, cosim=CosimConfig(H=H)))
    logs = co.run()
    assert logs.time_of("s/fmu.n")[-1] == pytest.approx(t_stop, abs=1e-12)
    assert logs["s/fmu.n"][-1, 0] == ref["n"][-1] == 9


@pytest.mark.cluster
@pytest.mark.parametrize("backend", ["ray", "zmq-served"])
def test_fmu_termination_ends_the_cosimulation_on_every_backend(ray_session, sampler_fmu,
                                                                 backend, tmp_path):
    H = 0.1
    cfg = SimulationConfig(dt=H, t_end=3.0, cosim=CosimConfig(H=H))
    ref = simulation(cs_model(sampler_fmu, H), cfg).run()
    server = None
    if backend == "ray":
        cosim = CosimConfig(H=H, backend="ray")
    else:
        unit_file = tmp_path / "fmu_unit.yaml"
        served = Model("served")
        served.add(FmuBlock("s", str(sampler_fmu), H, {"stop_at": 9}))
        served.to_yaml(unit_file, simulation=SimulationConfig(dt=H, t_end=0.0))
        server = subprocess.Popen([sys.executable, "-m", "cosim.cli", "serve", str(unit_file),
                                   "--bind", "tcp://127.0.0.1:0"], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, cwd=ROOT)
        address = server.stdout.readline().strip().rsplit(" on ", 1)[1]
        cosim = CosimConfig(H=H, backend="zmq", units={"s": {"address": address}})
    sim = CoSimulation(cs_model(sampler_fmu, H), SimulationConfig(dt=H, t_end=3.0, cosim=cosim))
    try:
        logs = sim.run()
    finally:
        sim.close()
        if server is not None:
            server.terminate()
            server.wait(timeout=10)
    assert logs.time_of("s/fmu.n")[-1] < 3.0
    for key in ref:
        np.testing.assert_array_equal(ref[key], logs[key], err_msg=key)


def test_failed_call_carries_the_fmus_own_log_message(sampler_fmu):
    m = sampler_model(sampler_fmu)
    m.blocks[-1].start_values["n"] = 3.0          # an output: the FMU refuses to set it
    with pytest.raises(SimulationError, match=r"Variable n can be set never"):
        Simulator(m, SimulationConfig(dt=0.1, t_end=1.0, **TIGHT)).run()


def test_an_fmu_is_unpacked_once_per_process_and_removed_at_exit(ball_fmu, tmp_path):
    """Two runs (a co-simulation's monolithic check and its units do the same) unpack the
    FMU once, only what an instance needs; the directory is gone when the process exits
    (a child process, so that this one's earlier unpacking does not count)."""
    script = f"""
import tempfile
tempfile.tempdir = {str(tmp_path)!r}
from pathlib import Path
from blocks.fmu import ModelExchangeFmuBlock
from cosim import Model, SimulationConfig, Simulator
for _ in range(2):
    m = Model("m")
    m.add(ModelExchangeFmuBlock("ball", {str(ball_fmu)!r}))
    Simulator(m, SimulationConfig(dt=0.01, t_end=0.1, solver="RK45")).run()
(d,) = Path({str(tmp_path)!r}).iterdir()
print(sorted(str(p.relative_to(d)) for p in d.rglob("*") if p.is_file()))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=300, cwd=str(ROOT))
    assert out.returncode == 0, out.stderr[-3000:]
    binary = "linux64" if "2.0" in ball_fmu.parent.name else "x86_64-linux"
    assert out.stdout.strip().splitlines()[-1] == repr(
        [f"binaries/{binary}/BouncingBall.so", "modelDescription.xml"])
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("H", [0.1, 0.3])
def test_compiled_exchange_steps_fmu_units_like_the_protocol_path(sampler_fmu, H):
    """Direct FMU steps (FmuUnit.direct) are the protocol path's calls: bit-identical logs,
    the stop included."""
    sims = [CoSimulation(cs_model(sampler_fmu, H), SimulationConfig(
        dt=H, t_end=3.0, cosim=CosimConfig(H=H, compiled=c))) for c in (True, False)]
    fast, slow = [s.run() for s in sims]
    assert sims[0].master.compiled.steps > 0 and sims[1].master.compiled is None
    assert sorted(fast) == sorted(slow)
    for key in slow:
        np.testing.assert_array_equal(fast[key], slow[key], err_msg=key)
        np.testing.assert_array_equal(fast.time_of(key), slow.time_of(key), err_msg=key)
    assert fast.time_of("s/fmu.n")[-1] < 3.0


def test_compiled_exchange_of_an_fmu_chain_with_feedthrough(tmp_path, version):
    from tests.cluster.fmu_specs import FEEDTHROUGH, VANDERPOL
    vdp = build_fmu(VANDERPOL, version, tmp_path / "vdp")
    ft = build_fmu(FEEDTHROUGH, version, tmp_path / "ft")
    runs = []
    for compiled in (True, False):
        m = Model("chain")
        m.add(FmuBlock("vdp", str(vdp), 0.01), FmuBlock("ft1", str(ft), 0.01),
              FmuBlock("ft2", str(ft), 0.01))
        m.connect("vdp.x0", "ft1.u")
        m.connect("ft1.y", "ft2.u")
        runs.append(CoSimulation(m, SimulationConfig(dt=0.01, t_end=1.0, cosim=CosimConfig(
            H=0.01, compiled=compiled))).run())
    for key in runs[1]:
        np.testing.assert_array_equal(runs[0][key], runs[1][key], err_msg=key)
    # The chain passes the oscillator through unchanged (feedthrough resolved in order),
    # one sample per macro point.
    np.testing.assert_array_equal(runs[0].time_of("ft2/fmu.y"), np.arange(101) * 0.01)
    np.testing.assert_array_equal(runs[0]["ft2/fmu.y"], runs[0]["vdp/fmu.x0"])


def fmpy_jacobi_lags(fmu, version: str, H: float, steps: int) -> np.ndarray:
    """The classic Jacobi loop of two lags in feedback, written against fmpy's raw calls:
    each lag's x at the macro points 0, H, ..., shape (steps + 1, 2)."""
    import shutil
    import tempfile

    from fmpy import extract, read_model_description
    from fmpy.fmi2 import FMU2Slave
    from fmpy.fmi3 import FMU3Slave
    md = read_model_description(str(fmu))
    vr = {v.name: v.valueReference for v in md.modelVariables}
    d = tempfile.mkdtemp()
    extract(str(fmu), d)
    cls = FMU2Slave if version == "2.0" else FMU3Slave
    lags = [cls(guid=md.guid, unzipDirectory=d, modelIdentifier=md.coSimulation.
                modelIdentifier, instanceName=f"lag{i}") for i in (1, 2)]
    get, put = ("getReal", "setReal") if version == "2.0" else ("getFloat64", "setFloat64")
    for s in lags:
        s.instantiate()
        if version == "2.0":
            s.setupExperiment(startTime=0.0)
        if s is lags[0]:
            getattr(s, put)([vr["x"]], [1.0])       # lag1 starts displaced
        s.enterInitializationMode()
        s.exitInitializationMode()
    rows = [[getattr(s, get)([vr["x"]])[0] for s in lags]]
    for k in range(steps):
        for s, x in zip(lags, rows[-1][::-1]):
            getattr(s, put)([vr["u"]], [x])
        for s in lags:
            s.doStep(k * H, H)
        rows.append([getattr(s, get)([vr["x"]])[0] for s in lags])
    for s in lags:
        s.terminate()
        s.freeInstance()
    shutil.rmtree(d, ignore_errors=True)
    return np.array(rows)


@pytest.mark.parametrize("compiled", [True, False])
def test_fmu_feedback_pair_is_fmpys_jacobi_loop(tmp_path, version, compiled):
    """Two lags in feedback (no direct feedthrough: their outputs are read once per step,
    not again after the inputs are set): cosim's Jacobi macro steps, compiled exchange and
    protocol path alike, are bit-identical to the classic loop written against fmpy."""
    from tests.cluster.fmu_specs import LAG
    lag = build_fmu(LAG, version, tmp_path / "lag")
    H, steps = 0.01, 100
    m = Model("pair")
    m.add(FmuBlock("lag1", str(lag), H, {"x": 1.0}), FmuBlock("lag2", str(lag), H))
    m.connect("lag1.x", "lag2.u")
    m.connect("lag2.x", "lag1.u")
    sim = CoSimulation(m, SimulationConfig(dt=H, t_end=steps * H, cosim=CosimConfig(
        H=H, compiled=compiled)))
    res = sim.run()
    assert (sim.master.compiled.steps > 0) if compiled else sim.master.compiled is None
    oracle = fmpy_jacobi_lags(lag, version, H, steps)
    for i, name in enumerate(("lag1", "lag2")):
        np.testing.assert_array_equal(res.time_of(f"{name}/fmu.x"), np.arange(steps + 1) * H)
        np.testing.assert_array_equal(res[f"{name}/fmu.x"].reshape(-1), oracle[:, i])
    assert oracle[0, 0] == 1.0 and 0.1 < oracle[-1, 1] < 0.9     # they exchange something


def test_discard_from_an_fmu_without_status_inquiries_is_the_steps_error(tmp_path,
                                                                        monkeypatch):
    """An FMU that answers fmi2Discard but implements no fmi2GetBooleanStatus (many do not)
    did not ask to terminate: the error is fmi2DoStep's, with the FMU's own words, not the
    inquiry's."""
    from fmpy.fmi1 import FMICallException
    from fmpy.fmi2 import FMU2Slave

    def unsupported(self, kind):
        raise FMICallException("fmi2GetBooleanStatus", 3)
    monkeypatch.setattr(FMU2Slave, "getBooleanStatus", unsupported)
    fmu = build_fmu(SAMPLER, "2.0", tmp_path / "sampler")
    with pytest.raises(SimulationError, match=r"fmi2DoStep failed with status 2 \(discard\); "
                       r"the FMU logged: \[discard\] the model terminated at t = 2\.25") as err:
        CoSimulation(cs_model(fmu, 0.1), SimulationConfig(dt=0.1, t_end=3.0,
                                                          cosim=CosimConfig(H=0.1))).run()
    assert "fast path" not in str(err.value)       # an FMU's step is not generated code
