"""The co-simulation master against the monolithic simulation of the same model."""

import numpy as np
import pytest

from blocks import Gain, Sine, Sum
from cosim import (ConvergenceError, CosimConfig, Inport, Model, ModelError, Outport,
                   SimulationConfig, Simulator, Subsystem, simulation)
from cosim.master.cosimulation import CoSimulation
from cosim.master.records import StepStatus

from tests.cluster import scenarios


def three_units(atomic=True):
    """The shared three-unit scenario, every unit on the run's step and solver."""
    return scenarios.three_units(atomic, solvers=None)


def cfg(**cosim):
    return SimulationConfig(dt=0.002, t_end=1.0, solver="RK4",
                            cosim=CosimConfig(**cosim) if cosim else None)


@pytest.fixture(scope="module")
def monolithic():
    return simulation(three_units(atomic=False), cfg()).run()


@pytest.mark.parametrize("scheme", ["jacobi", "gauss-seidel"])
@pytest.mark.parametrize("order,expected", [(0, 1.0), (1, 2.0)])
def test_error_shrinks_with_the_order_of_the_scheme(monolithic, scheme, order, expected):
    Hs = np.array([0.04, 0.02, 0.01])
    errs = []
    for H in Hs:
        logs = simulation(three_units(), cfg(H=H, extrapolation=order, scheme=scheme)).run()
        assert np.array_equal(logs.time_of("b/x.out"), monolithic.time_of("b/x.out"))
        errs.append(np.max(np.abs(logs["b/x.out"] - monolithic["b/x.out"])))
    slope = np.polyfit(np.log(Hs), np.log(errs), 1)[0]
    assert expected - 0.15 <= slope <= expected + 0.3, (errs, slope)


def algebraic(atomic=True):
    """Two static units in a feedthrough loop: y_a = 0.5 y_b + sin(t), y_b = cos(t) - 0.8 y_a."""
    m = Model("alg")
    a = Subsystem("a", atomic=atomic)
    a.add(Inport("u"), Gain("g", 0.5), Sine("s", frequency=1 / (2 * np.pi)), Sum("y_", "++"),
          Outport("y"))
    a.connect("u.out", "g.in")
    a.connect("g.out", "y_.in1")
    a.connect("s.out", "y_.in2")
    a.connect("y_.out", "y.in")
    b = Subsystem("b", atomic=atomic)
    b.add(Inport("u"), Gain("g", -0.8), Sine("c", frequency=1 / (2 * np.pi), phase=np.pi / 2),
          Sum("y_", "++"), Outport("y"))
    b.connect("u.out", "g.in")
    b.connect("g.out", "y_.in1")
    b.connect("c.out", "y_.in2")
    b.connect("y_.out", "y.in")
    m.add(a, b)
    m.connect("a.y", "b.u")
    m.connect("b.y", "a.u")
    return m


def exact_loop(t):
    s, c = np.sin(t), np.cos(t)
    ya = (0.5 * c + s) / 1.4
    return ya, c - 0.8 * ya


@pytest.mark.parametrize("acceleration", ["none", "aitken", "anderson", "newton"])
def test_algebraic_coupling_iterated_matches_loop_solution(acceleration):
    sim = CoSimulation(algebraic(), SimulationConfig(
        dt=0.01, t_end=1.0, cosim=CosimConfig(H=0.05, tolerance=1e-13, acceleration=acceleration,
                                         max_iterations=200)))
    logs = sim.run()
    t = logs.time_of("a/y_.out")
    macro = np.isclose(np.round(t / 0.05) * 0.05, t, atol=1e-12)
    ya, yb = exact_loop(t[macro])
    np.testing.assert_allclose(logs["a/y_.out"][macro, 0], ya, rtol=0, atol=1e-10)
    np.testing.assert_allclose(logs["b/y_.out"][macro, 0], yb, rtol=0, atol=1e-10)
    mono = Simulator(algebraic(False), SimulationConfig(dt=0.01, t_end=1.0,
                                                          tolerance_fpi=1e-14)).run()
    np.testing.assert_allclose(logs["a/y_.out"][macro], mono["a/y_.out"][macro], atol=1e-10)
    assert all(r.status is StepStatus.ACCEPTED for r in sim.step_log)
    assert max(r.iterations for r in sim.step_log) >= 2


def test_algebraic_coupling_without_iteration_reports_its_error():
    with pytest.warns(UserWarning, match="without iteration"):
        sim = CoSimulation(algebraic(), SimulationConfig(
            dt=0.01, t_end=1.0, cosim=CosimConfig(H=0.05, iterate=False)))
        logs = sim.run()
    assert {r.status for r in sim.step_log} == {StepStatus.UNITERATED}
    residual = max(r.residual for r in sim.step_log)
    t = logs.time_of("a/y_.out")
    err = np.max(np.abs(logs["a/y_.out"][:, 0] - exact_loop(t)[0]))
    # Zero-order extrapolation over H = 0.05 of signals with unit slope: errors of order H.
    assert 0.005 < residual < 0.2 and 0.005 < err < 0.2


def test_nonconvergence_raises_or_is_recorded():
    def strong():
        m = algebraic()
        m["a"]["g"].k = 3.0          # loop gain 2.4: plain iteration diverges
        return m
    with pytest.raises(ConvergenceError, match=r"a <-> b.*a\.y.*b\.y") as exc:
        CoSimulation(strong(), SimulationConfig(dt=0.01, t_end=0.1, cosim=CosimConfig(
            H=0.05, acceleration="none", max_iterations=10))).run()
    assert exc.value.iterations == 10
    sim = CoSimulation(strong(), SimulationConfig(dt=0.01, t_end=0.1, cosim=CosimConfig(
        H=0.05, acceleration="none", max_iterations=10, on_nonconvergence="continue")))
    sim.run()
    assert {r.status for r in sim.step_log} == {StepStatus.CONTINUED}


def calls(trace, t=None):
    return [(u, c) for u, c, tt in trace if t is None or tt == t]


def test_trace_jacobi_and_gauss_seidel():
    sim = simulation(three_units(), cfg(H=0.1, trace=True))
    sim.run(t_end=0.2)
    step = [("a", "SetInputs"), ("a", "DoStep"), ("a", "GetOutputs"),
            ("b", "SetInputs"), ("b", "DoStep"), ("b", "GetOutputs"),
            ("main", "SetInputs"), ("main", "DoStep"), ("main", "GetOutputs")]
    # At each macro point the feedthrough unit (main: e = src - b.y) first refreshes its
    # outputs for the exchanged inputs, then every unit steps.
    refresh = [("main", "SetInputs"), ("main", "RefreshOutputs"), ("main", "GetOutputs")]
    assert calls(sim.master.trace, 0.1) == refresh + step
    sim = simulation(three_units(), cfg(H=0.1, scheme="gauss-seidel", trace=True))
    sim.run(t_end=0.2)
    # Graph order: the cycle main -> a -> b -> main, entered at the first unit (after main's
    # refresh at the macro point).
    order = [u for u, c in calls(sim.master.trace, 0.1) if c in ("RefreshOutputs", "DoStep")]
    assert order == ["main", "a", "b", "main"]


def test_trace_of_iterated_coupling_rolls_back_between_iterations():
    sim = CoSimulation(algebraic(), SimulationConfig(dt=0.01, t_end=0.05, cosim=CosimConfig(
        H=0.05, tolerance=1e-13, trace=True)))
    sim.run()
    seq = calls(sim.master.trace, 0.0)
    first = seq.index(("a", "GetState"))
    body = seq[first:]
    assert body[:2] == [("a", "GetState"), ("b", "GetState")]
    assert body[2:8] == [("a", "SetInputs"), ("a", "DoStep"), ("a", "GetOutputs"),
                         ("b", "SetInputs"), ("b", "DoStep"), ("b", "GetOutputs")]
    rest = body[8:]
    n = sim.step_log[0].iterations - 1
    it = [("a", "SetState"), ("a", "SetInputs"), ("a", "DoStep"), ("a", "GetOutputs"),
          ("b", "SetState"), ("b", "SetInputs"), ("b", "DoStep"), ("b", "GetOutputs")]
    assert rest[:8 * n] == it * n


def test_checkpoint_continue_is_bit_identical(tmp_path):
    config = cfg(H=0.02, extrapolation=2, scheme="gauss-seidel")
    ref = simulation(three_units(), config).run()
    sim = simulation(three_units(), config)
    sim.run(t_end=0.4)
    sim.save_checkpoint(tmp_path / "cp")
    other = simulation(three_units(), config)
    other.load_checkpoint(tmp_path / "cp")
    logs = other.run()
    # The files carry the logs before the checkpoint: every sample from t0.
    assert set(logs) == set(ref)
    for key in ref:
        np.testing.assert_array_equal(ref[key], logs[key], err_msg=key)
        np.testing.assert_array_equal(ref.time_of(key), logs.time_of(key))


def test_adaptive_macro_step_rejects_and_grows(monolithic):
    sim = simulation(three_units(), cfg(H=0.2, adaptive=True, extrapolation=1, rtol=1e-4,
                                       atol=1e-5, H_max=0.2))
    logs = sim.run()
    steps = sim.step_log
    assert any(r.status is StepStatus.REJECTED for r in steps)
    accepted = [r for r in steps if r.status is StepStatus.ACCEPTED]
    assert abs(accepted[-1].t + accepted[-1].H - 1.0) < 1e-12
    assert len({r.H for r in accepted}) > 1
    err = np.max(np.abs(logs["b/x.out"] - monolithic["b/x.out"]))
    assert err < 2e-3


def test_adaptive_macro_step_ends_at_a_units_scheduled_event():
    from cosim.model.events import Scheduled
    fired = []
    times = (0.374, 0.718)                       # multiples of the units' 2 ms step

    def run(adaptive):
        m = three_units()
        m.add_event(Scheduled("kick", times=times, callback=lambda sim, t: fired.append(t)))
        sim = simulation(m, cfg(H=0.2, adaptive=adaptive, extrapolation=1, rtol=1e-4,
                               atol=1e-5, H_max=0.2))
        sim.run()
        return sim, [(r.t, r.t + r.H) for r in sim.step_log
                     if r.status is StepStatus.ACCEPTED]

    sim, steps = run(adaptive=True)
    # The events fired (in the main unit), each exactly at the end of an accepted macro step.
    assert fired == list(times)
    for te in times:
        assert any(abs(end - te) < 1e-12 for _, end in steps), te
    assert sim.stats["macro_steps"] == len(steps)
    # A fixed macro step keeps its grid and steps over them (the unit handles them inside).
    fired.clear()
    _, fixed = run(adaptive=False)
    assert fired == list(times)
    assert not any(abs(end - te) < 1e-12 for _, end in fixed for te in times)


@pytest.mark.parametrize("adaptive", [False, True])
def test_a_stop_event_in_a_unit_ends_the_cosimulation_there(adaptive):
    from cosim.model.events import Scheduled

    def model(atomic):
        m = three_units(atomic)
        m.add_event(Scheduled("halt", times=[0.374], stop=True))
        return m
    mono = simulation(model(atomic=False), cfg()).run()         # the same stop, monolithic
    sim = simulation(model(atomic=True), cfg(H=0.02, adaptive=adaptive, extrapolation=1))
    logs = sim.run()
    assert sim.master.T == 0.374 and sim.step_log[-1].status is StepStatus.STOPPED
    assert "main" in sim.step_log[-1].message
    for key in logs:                    # units that ran past the stop lost those samples
        assert logs.time_of(key)[-1] <= 0.374 + 1e-12, key
    assert mono.time_of("a/x.out")[-1] == logs.time_of("a/x.out")[-1]
    # The co-simulation error at H = 0.02 (order-1 extrapolation), measured ~2e-4.
    np.testing.assert_allclose(logs["a/x.out"][-1], mono["a/x.out"][-1], atol=5e-4)


def test_macro_step_must_be_a_multiple_of_unit_steps():
    with pytest.raises(ModelError, match="common multiple"):
        simulation(three_units(), cfg(H=0.003)).run()


def test_simulator_facade_and_logs(tmp_path):
    sim = simulation(three_units(), cfg(H=0.02))
    assert isinstance(sim, CoSimulation)
    logs = sim.run()
    assert "a/x.out" in logs and "e.out" in logs
    np.testing.assert_allclose(np.diff(logs.time_of("a/x.out")), 0.002)
    sim.save_logs(tmp_path / "r.npz")
    with np.load(tmp_path / "r.npz") as z:
        assert "steps/iterations" in z.files and "values/b/x.out" in z.files


def test_unit_options_accept_dicts_and_name_an_unknown_key():
    from cosim.config import UnitOptions
    cfg = CosimConfig(H=0.01, units={"a": {"process": "p", "num_cpus": 1}})
    assert cfg.units["a"] == UnitOptions(process="p", num_cpus=1)
    assert cfg.options("b") == UnitOptions() and cfg.backend_of("a") == "local"
    assert CosimConfig(H=0.01, units={"a": {"address": "tcp://h:1"}}).backend_of("a") == "remote"
    with pytest.raises(ModelError, match=r"units\['a'\]: unknown option\(s\) 'cpus'; "
                                         r"valid: process, address, .*num_cpus"):
        CosimConfig(H=0.01, units={"a": {"cpus": 1}})


def test_a_unit_refreshes_its_outputs_on_request_and_refuses_a_zero_step():
    import math

    from cosim.master import protocol as P
    sim = CoSimulation(algebraic(), SimulationConfig(dt=0.01, t_end=0.1,
                                                  cosim=CosimConfig(H=0.05)))
    sim.initialize()
    unit = sim.master.proxies["a"].unit
    assert unit.handle(P.RefreshOutputs()) == P.StepDone(0.0, False, math.inf)
    reply = unit.handle(P.DoStep(0.0, 0.0))
    assert isinstance(reply, P.ErrorReply) and reply.kind is P.ErrorKind.PROTOCOL
    assert "RefreshOutputs" in reply.message


def test_backends_come_from_the_registry_and_cosim_imports_no_cluster():
    import subprocess
    import sys

    from cosim.master.backends import backend_names, get_backend
    assert {"local", "ray", "zmq", "remote"} <= set(backend_names())
    with pytest.raises(ModelError, match="unknown backend 'mpi'; choose one of local"):
        get_backend("mpi")
    code = ("import sys, cosim, cosim.master.cosimulation, cosim.master.backends; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('cluster', 'ray', 'zmq')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_step_log_arrays_code_statuses_in_enum_order():
    from cosim.master.records import StepRecord, StepStatus, step_log_arrays
    arrays = step_log_arrays([StepRecord(0.0, 0.1, 3, 1e-12),
                              StepRecord(0.1, 0.1, status=StepStatus.STOPPED)])
    assert list(arrays["status"]) == [0, 5]
    assert list(arrays["status_names"]) == ["accepted", "rejected", "continued", "uniterated",
                                            "recovered", "stopped"]


def test_a_transport_failure_of_a_request_without_time_names_the_masters_time():
    """A unit lost during CollectLogs (a request with no time of its own) is reported at the
    master's time of the call, as a step's failure is."""
    from cosim.errors import TransportError
    from cosim.master import protocol as P
    from cosim.master.calls import UnitCalls
    from cosim.master.proxy import Proxy

    class Lost(Proxy):
        name = "a"

        def submit(self, requests):
            return requests

        def result(self, handle):
            raise TransportError("a", "CollectLogs", "the server is frozen or gone")

        def close(self):
            pass

    with pytest.raises(TransportError) as caught:
        UnitCalls({"a": Lost()}, False).call({"a": [P.CollectLogs()]}, 0.75)
    assert caught.value.t == 0.75 and "CollectLogs at t=0.75 failed" in str(caught.value)
