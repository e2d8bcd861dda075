"""The macro-step engine (cosim/master/engine.py, program.py) against the protocol path.

Every shape a user builds — feedthrough fans fed by top-level blocks, chains of refresh
levels, iterated algebraic couplings, Gauss–Seidel, extrapolation 0/1/2, delayed
feedthrough, adaptive macro steps — gives bit for bit what the protocol's separate requests
give (``CosimConfig(engine=False)``: the reference), logs and step records alike; the program
takes the fewest round trips the shape allows.
"""

import numpy as np
import pytest

from blocks import Gain, Sine, Sum
from blocks.continuous import Integrator
from cosim import CosimConfig, Inport, Model, Outport, SimulationConfig, Subsystem
from cosim.master.cosimulation import CoSimulation
from cosim.master.program import compile_program
from cosim.master.unitgraph import UnitGraph
from cosim.config import Scheme
from tests.cosim.test_cosim_semantics import servo_chain
from tests.cosim.test_semantics_every_model import (add_held_loop, driven_loop, gain_loop,
                                                     held_coupling, input_feeding_no_output)


def fan(n=4, H=0.01):
    """``n`` feedthrough units (a gain each) fed by a top-level Sine and feeding a top-level
    sum and integrator: one refresh level, drivers in the top-level unit."""
    m = Model("fan")
    m.add(Sine("src", amplitude=1.0, frequency=1.3), Sum("s", "+" * n), Integrator("I", 0.0))
    for i in range(n):
        u = Subsystem(f"g{i}", atomic=True, dt=H / 2, solver="RK4")
        u.add(Inport("u"), Gain("k", 0.5 + i), Integrator("x", 0.1 * i), Sum("y", "++"),
              Outport("y_"))
        u.connect("u.out", "k.in", "x.in")
        u.connect("k.out", "y.in1")
        u.connect("x.out", "y.in2")
        u.connect("y.out", "y_.in")
        m.add(u)
        m.connect("src.out", f"g{i}.u")
        m.connect(f"g{i}.y_", f"s.in{i + 1}")
    m.connect("s.out", "I.in")
    return m


def coupled(H=0.01):
    """Two feedthrough units in an algebraic loop (iterated), a third integrating it."""
    m = Model("loop")
    a = Subsystem("a", atomic=True, dt=H / 4, solver="RK4")
    a.add(Inport("u"), Gain("k", 0.5), Integrator("x", 1.0), Sum("y", "++"), Outport("y_"))
    a.connect("u.out", "k.in", "x.in")
    a.connect("k.out", "y.in1")
    a.connect("x.out", "y.in2")
    a.connect("y.out", "y_.in")
    b = Subsystem("b", atomic=True, dt=H / 4, solver="RK4")
    b.add(Inport("u"), Gain("k", -0.8), Integrator("z", 0.0), Gain("m", -1.0), Sum("dz", "++"),
          Sum("y", "++"), Outport("y_"))
    b.connect("u.out", "k.in", "dz.in1")
    b.connect("z.out", "m.in", "y.in2")
    b.connect("m.out", "dz.in2")
    b.connect("dz.out", "z.in")
    b.connect("k.out", "y.in1")
    b.connect("y.out", "y_.in")
    c = Subsystem("c", atomic=True, dt=H / 4, solver="RK4")
    c.add(Inport("u"), Integrator("w", 0.0), Outport("w_"))
    c.connect("u.out", "w.in")
    c.connect("w.out", "w_.in")
    m.add(a, b, c)
    m.connect("a.y_", "b.u")
    m.connect("b.y_", "a.u", "c.u")
    return m


def coupled_pairs(n=3, H=0.01):
    """``n`` independent held couplings (:func:`held_coupling`'s loop, each with its own
    gain, offset and initial state); one pair also drives a unit that reads no coupling
    output back."""
    m = Model("pairs")
    for i in range(n):
        add_held_loop(m, f"c{i}", f"p{i}", H, gain=0.5 - 0.2 * i, offset=0.3 + i, z0=0.1 * i)
    d = Subsystem("d", atomic=True, dt=H, solver="RK4")
    d.add(Inport("u"), Integrator("w", 0.0), Outport("w_"))
    d.connect("u.out", "w.in")
    d.connect("w.out", "w_.in")
    m.add(d)
    m.connect("p0.y2", "d.u")
    return m


def fed_loop(H=0.01):
    """A controller/plant coupling fed from outside (solved again at each macro point): a
    setpoint ``r`` (a top-level Sine, continuous) into controller ``c`` (discrete at H, ``u
    = 2 (r - y) + e(T - H)``, feedthrough), plant ``p`` (RK4 at H, ``x' = -x + u``, ``y
    = x + 0.3 u``, feedthrough); a monitor ``m`` integrating ``y`` and adding ``u`` (a
    refresh level after the coupling's) and reading ``r`` through an input that feeds none
    of its outputs."""
    from blocks.discrete import UnitDelay
    m = Model("fed")
    c = Subsystem("c", atomic=True, dt=H)
    c.add(Inport("r"), Inport("y"), Sum("e", "+-"), Gain("kp", 2.0),
          UnitDelay("d", sample_time=H), Sum("u", "++"), Outport("u_out"))
    c.connect("r.out", "e.in1")
    c.connect("y.out", "e.in2")
    c.connect("e.out", "kp.in", "d.in")
    c.connect("kp.out", "u.in1")
    c.connect("d.out", "u.in2")
    c.connect("u.out", "u_out.in")
    p = Subsystem("p", atomic=True, dt=H, solver="RK4")
    p.add(Inport("u"), Integrator("x", 0.2), Gain("k", -1.0), Sum("s", "++"),
          Gain("d", 0.3), Sum("y", "++"), Outport("y_out"))
    p.connect("u.out", "s.in1", "d.in")
    p.connect("k.out", "s.in2")
    p.connect("s.out", "x.in")
    p.connect("x.out", "k.in", "y.in1")
    p.connect("d.out", "y.in2")
    p.connect("y.out", "y_out.in")
    mon = Subsystem("m", atomic=True, dt=H / 2, solver="RK4")
    mon.add(Inport("y"), Inport("u"), Inport("r"), Integrator("i", 0.0), Sum("s", "++"),
            Gain("g", 1.0), Outport("o"))
    mon.connect("y.out", "i.in")
    mon.connect("i.out", "s.in1")
    mon.connect("u.out", "s.in2")
    mon.connect("r.out", "g.in")
    mon.connect("s.out", "o.in")
    m.add(c, p, mon, Sine("r", frequency=1.3, amplitude=0.8))
    m.connect("r.out", "c.r", "m.r")
    m.connect("p.y_out", "c.y", "m.y")
    m.connect("c.u_out", "p.u", "m.u")
    return m


MODELS = {"fan": (fan, 0.01), "servo": (lambda: servo_chain(0.02), 0.02),
          "coupled": (coupled, 0.01),
          # The semantics page's held-out shapes: a coupling through a held (discrete)
          # output, a unit refreshed once more for its logs, drivers with a slope at t0.
          "held": (lambda: held_coupling(0.01), 0.01),
          # both units of the coupling discrete: each one's input held from the other
          "discrete-loop": (lambda: gain_loop(0.5), 0.01),
          # three independent couplings (iterated in the same rounds)
          "pairs": (lambda: coupled_pairs(3), 0.01),
          "relog": (lambda: input_feeding_no_output(0.01, True), 0.01),
          "relog-later": (lambda: input_feeding_no_output(0.01, False), 0.01),
          "driven": (lambda: driven_loop(0.01), 0.01),
          "fed": (fed_loop, 0.01)}


def run(model, H, engine, **options):
    cfg = CosimConfig(H=H, engine=engine, compiled=False, **options)
    sim = CoSimulation(model, SimulationConfig(dt=H / 4, t_end=40 * H, cosim=cfg))
    try:
        logs = sim.run()
        return logs, sim.master.step_log, dict(sim.master.stats)
    finally:
        sim.close()


def assert_identical(a, b):
    (la, sa, ta), (lb, sb, tb) = a, b
    assert sorted(la) == sorted(lb)
    for key in la:
        np.testing.assert_array_equal(la[key], lb[key], err_msg=key, strict=True)
        np.testing.assert_array_equal(la.time_of(key), lb.time_of(key), err_msg=key)
    assert sa == sb
    assert ta == tb


@pytest.fixture(params=["windows", "steps"])
def windows(request, monkeypatch):
    """The engine's windows taken whenever they can be (in process they never save a round
    trip, so the engine would step one macro step at a time), or never."""
    from cosim.master.engine import Engine
    monkeypatch.setattr(Engine, "gains", lambda self: request.param == "windows")
    return request.param


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("scheme", ["jacobi", "gauss-seidel"])
@pytest.mark.parametrize("extrapolation", [0, 1, 2])
@pytest.mark.parametrize("feedthrough", ["resolve", "delay"])
def test_engine_is_the_protocol_path_bit_for_bit(model, scheme, extrapolation, feedthrough,
                                                 windows):
    make, H = MODELS[model]
    options = dict(scheme=scheme, extrapolation=extrapolation, feedthrough=feedthrough,
                   log_every=7)
    assert_identical(run(make(), H, True, **options), run(make(), H, False, **options))


@pytest.mark.parametrize("model", ["fan", "coupled"])     # (servo's units step at H)
@pytest.mark.parametrize("scheme", ["jacobi", "gauss-seidel"])
def test_adaptive_steps_roll_back_on_the_units_side(model, scheme):
    make, H = MODELS[model]
    options = dict(scheme=scheme, extrapolation=1, adaptive=True, rtol=1e-9, atol=1e-12,
                   H_min=H / 8, H_max=H)
    ref = run(make(), H, False, **options)
    assert any(r.status.name == "REJECTED" for r in ref[1]), "no rejected step: test too easy"
    assert_identical(run(make(), H, True, **options), ref)


@pytest.mark.parametrize("acceleration", ["none", "aitken", "anderson", "newton"])
@pytest.mark.parametrize("model", ["coupled", "pairs"])
def test_iterated_coupling_accelerations(acceleration, model):
    make, H = MODELS[model]
    options = dict(acceleration=acceleration, extrapolation=1, relaxation=0.9, tolerance=1e-9)
    ref = run(make(), H, False, **options)
    assert ref[2]["iterations"] > ref[2]["macro_steps"]
    assert_identical(run(make(), H, True, **options), ref)


def programs(model, H, scheme="jacobi", local=None):
    sim = CoSimulation(model, SimulationConfig(dt=H / 4, t_end=H, cosim=CosimConfig(
        H=H, scheme=scheme)))
    try:
        m = sim.master
        m.initialize()
        names = set(m.names) if local is None else local
        return compile_program(m.graph, Scheme(scheme), m.order, m.delayed, names,
                               set(m.names))
    finally:
        sim.close()


@pytest.mark.parametrize("scheme", ["jacobi", "gauss-seidel"])
def test_independent_couplings_iterate_in_the_same_rounds(scheme):
    """Three couplings none of which reads another: one round per iteration of the slowest,
    not one per iteration of each (the values stay the protocol path's: the test above)."""
    cfg = CosimConfig(H=0.01, compiled=False, scheme=scheme)
    sim = CoSimulation(coupled_pairs(3), SimulationConfig(dt=0.01, t_end=0.4, cosim=cfg))
    try:
        sim.run()
        m = sim.master
        along = [s.along for s in m.engine.program.stages if s.coupling]
        assert along == [False, True, True]
        slowest = sum(r.iterations for r in m.step_log)     # (a step's: its slowest's)
        assert m.stats["iterations"] == 3 * slowest > slowest
        # a round for d's step, then one per iteration of the slowest coupling
        assert m.engine.transport.rounds == m.stats["macro_steps"] + slowest
    finally:
        sim.close()


@pytest.mark.parametrize("on", ["continue", "raise"])
def test_couplings_in_the_same_rounds_that_do_not_converge_end_as_on_the_protocol_path(on):
    """Three couplings iterated in the same rounds, one of which has no solution from
    t = 0.1 on (its loop gain becomes 1): continued (each step recorded as the protocol
    path records it), or its ConvergenceError raised as the protocol path raises it (in
    the step from 0.09: its end reads the gain of 0.1)."""
    from cosim.errors import ConvergenceError

    def make():
        m = gain_loop(0.5, switch=0.1)
        for i in range(2):
            add_held_loop(m, f"c{i}", f"p{i}", 0.01, offset=0.3 + i)
        return m

    options = dict(max_iterations=6, on_nonconvergence=on)
    if on == "continue":
        ref = run(make(), 0.01, False, **options)
        assert "continued" in {r.status.value for r in ref[1]}
        assert_identical(run(make(), 0.01, True, **options), ref)
        return
    errors = []
    for engine in (False, True):
        with pytest.raises(ConvergenceError) as err:
            run(make(), 0.01, engine, **options)
        errors.append(str(err.value))
    assert errors[0] == errors[1] and "a <-> b" in errors[0] and "[t=0.09]" in errors[0]


def test_program_round_trips():
    """A fan's refresh travels with each gain's step once the top-level unit (in process)
    stepped: one round trip per macro step; stepped in process, none."""
    remote = programs(fan(), 0.01, local={"main"})
    assert remote.round_trips == 1, remote.table()
    assert all(s.step and s.reset for st in remote.stages if not st.local for s in st.sends)
    assert programs(fan(), 0.01).round_trips == 0
    # All remote: the top-level unit's step first, then the gains' steps and refreshes.
    assert programs(fan(), 0.01, local=set()).round_trips == 2
    chain = programs(servo_chain(0.02), 0.02, "gauss-seidel", local=set())
    assert chain.round_trips == 4, chain.table()
    # Jacobi: the coupling's first iteration travels with the other unit's step.
    loop = programs(coupled(), 0.01, local=set())
    assert loop.round_trips == 1 and loop.stages[-1].joined, loop.table()


def test_a_coupling_fed_from_outside_is_solved_again_after_its_drivers_refresh():
    """docs/cosim-semantics.md, step 3: the controller/plant coupling of :func:`fed_loop`
    reads the setpoint from outside it, so it is a refresh level of its own, solved again
    (a stage of refreshes iterated) once its step's iteration is done and before the
    monitor reading it is refreshed; every unit remote: step round, iteration, solve,
    refresh. With ``iterate=False`` a coupling is stepped once and not solved again."""
    sim = CoSimulation(fed_loop(), SimulationConfig(dt=0.0025, t_end=0.01, cosim=CosimConfig(
        H=0.01)))
    try:
        m = sim.master
        m.initialize()
        assert m.refresh_levels == [[("c", "p")], ["m"]] and not m.graph.relog
        program = compile_program(m.graph, Scheme.JACOBI, m.order, m.delayed, set(),
                                  set(m.names), m.refresh_levels)
    finally:
        sim.close()
    kinds = [("solve" if s.resolve else "iterate") if s.coupling else
             "+".join(sorted({x.unit for x in s.sends})) for s in program.stages]
    assert kinds == ["m+main", "iterate", "solve", "m"], program.table()
    assert program.round_trips == 3 and "solve c <-> p again at T+H" in program.table()
    solve = program.stages[2]
    assert dict(solve.resolve) == {
        "c": (("r", ("main", "r__out"), False), ("y", ("p", "y_out"), None)),
        "p": (("u", ("c", "u_out"), None),)}
    sim = CoSimulation(fed_loop(), SimulationConfig(dt=0.0025, t_end=0.01, cosim=CosimConfig(
        H=0.01, iterate=False)))
    try:
        with pytest.warns(UserWarning, match="without iteration"):
            sim.master.initialize()
        assert sim.master.refresh_levels == [["m"]]
    finally:
        sim.close()


def test_a_window_sends_what_reads_nothing_pending_ahead():
    """Over a window of macro steps an action of a later step that reads nothing pending
    travels with a round of an earlier one: fewer round trips per macro step, never more."""
    for model, H, scheme, single, per_step in [
            (lambda: servo_chain(0.02), 0.02, "jacobi", 3, 2.0),
            (coupled, 0.01, "gauss-seidel", 2, 2.0),
            (fan, 0.01, "jacobi", 2, 2.0)]:
        sim = CoSimulation(model(), SimulationConfig(dt=H / 4, t_end=H, cosim=CosimConfig(H=H)))
        try:
            m = sim.master
            m.initialize()
            one, window = (compile_program(m.graph, Scheme(scheme), m.order, m.delayed, set(),
                                           set(m.names), m.refresh_levels, steps=k)
                           for k in (1, 8))
        finally:
            sim.close()
        assert one.round_trips == single, one.table()
        assert window.round_trips == 8 * per_step, window.table()
        # every action of every macro step, once
        acts = [(x.k, x.unit, kind) for st in window.stages for x in st.sends
                for kind, on in (("step", x.step), ("refresh", x.reset)) if on]
        assert len(acts) == len(set(acts)) == 8 * sum(x.step + x.reset for st in one.stages
                                                      for x in st.sends)


@pytest.mark.parametrize("scheme", ["jacobi", "gauss-seidel"])
def test_a_window_fails_and_stops_where_the_protocol_path_does(scheme, windows):
    from cosim.errors import SimulationError
    from cosim.model.events import Scheduled
    from tests.cluster.scenarios import failing, three_units

    def outcome(model, engine):
        sim = CoSimulation(model, SimulationConfig(dt=0.002, t_end=1.0, cosim=CosimConfig(
            H=0.02, engine=engine, compiled=False, scheme=scheme, log_every=50)))
        try:
            try:
                logs, error = sim.run(), None
            except SimulationError as err:
                logs, error = sim.master.logs, str(err)
            return logs, error, sim.t, sim.master.step_log, dict(sim.master.stats)
        finally:
            sim.close()

    def stopping():
        m = three_units()
        m.add_event(Scheduled("halt", times=[0.374], stop=True))
        return m
    for make in (lambda: failing(0.5), stopping):
        (la, *a), (lb, *b) = outcome(make(), True), outcome(make(), False)
        assert a == b
        assert sorted(la) == sorted(lb)
        for key in la:
            np.testing.assert_array_equal(la[key], lb[key], err_msg=key, strict=True)
            np.testing.assert_array_equal(la.time_of(key), lb.time_of(key), err_msg=key)


def test_plan_shows_the_program_for_the_configured_placement():
    from cosim.master.overview import overview
    H = 0.01
    local = overview(fan(), SimulationConfig(dt=H / 4, t_end=H, cosim=CosimConfig(H=H)))
    assert local.program.round_trips == 0
    # the top-level blocks beside the master: each gain's step and refresh in one message
    zmq = overview(fan(), SimulationConfig(dt=H / 4, t_end=H, cosim=CosimConfig(
        H=H, backend="zmq")))
    assert zmq.program.round_trips == 1
    assert "1 round trip(s)" in zmq.table() and "g0:step+refresh" in zmq.table()
    placed = overview(fan(), SimulationConfig(dt=H / 4, t_end=H, cosim=CosimConfig(
        H=H, backend="zmq", units={"main": {"process": "glue"}})))
    assert placed.program.round_trips == 2
    assert "2 round trip(s)" in placed.table() and "g0:refresh" in placed.table()
