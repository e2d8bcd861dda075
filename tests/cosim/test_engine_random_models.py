"""The macro-step engine and the compiled exchange against the protocol path, bit for bit, on
random models (:mod:`tests.cosim.random_models`): what a fixed list of hand-built models hides.

Each draw is a model (2–6 atomic units at their own steps and solvers, discrete-only units,
vector signals, top-level blocks between the units, chains, rings, fans, algebraic loops
through feedthrough units and held outputs, scheduled events that may stop the run) and a
configuration (scheme, extrapolation, feedthrough mode, coupling iteration and its
acceleration, adaptive H, log and checkpoint strides, Gauss–Seidel order, start time, a
short last step, generated code or the interpreter, a log selection; a run stopped half-way
and continued). It runs through the protocol's
separate requests (``CosimConfig(engine=False, compiled=False)``, the reference), through the
engine (``compiled=False``; windows of macro steps on or off) and through the compiled
exchange (the default), and every logged sample and its time, every step record, the
statistics, the end time, every unit's final outputs — or the error, where the reference
fails — must be the same.
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, currently_in_test_context, event, given, settings
from hypothesis import strategies as st

from blocks import Constant, Gain, Sine, Sum
from blocks.continuous import Integrator
from cosim import CosimConfig, Inport, Model, Outport, SimulationConfig, Subsystem
from cosim.errors import CompileError, CosimError
from cosim.master.cosimulation import CoSimulation
from cosim.master.engine import Engine
from tests.cosim.random_models import (BlockSpec, ModelSpec, UnitSpec, build, configs,
                                       models)
from tests.cosim.test_engine import assert_identical

#: Paths to the reference: CosimConfig options (and windows of the engine on or off).
PATHS = {"engine": dict(compiled=False), "engine-windows": dict(compiled=False),
         "compiled": dict()}
REFERENCE = dict(engine=False, compiled=False)


def outcome(spec, config, windows=None, pause=None):
    """Run ``spec`` (a ModelSpec, or a Model) under ``config``: (logs, step records,
    statistics), the error (type and text, or None), the end time and every unit's final
    outputs. ``windows``: force the engine's windows of macro steps on or off (None: the
    engine decides); ``pause``: run to this time first, then on to the end."""
    try:
        sim = CoSimulation(build(spec) if isinstance(spec, ModelSpec) else spec, config)
    except CosimError as err:        # (a model the co-simulation refuses: every path alike)
        note(f"refused: {type(err).__name__}")
        return (None, (type(err).__name__, str(err)), None, {})
    patch = mock.patch.object(Engine, "gains", lambda self: windows) if windows is not None \
        else mock.patch.object(Engine, "gains", Engine.gains)
    try:
        with patch, warnings.catch_warnings():
            warnings.simplefilter("ignore")         # (couplings run without iteration)
            try:
                if pause is not None:
                    sim.run(t_end=pause)
                sim.run()
                error = None
            except CosimError as err:
                error = (type(err).__name__, str(err))
        m = sim.master
        compiled = getattr(m, "compiled", None)         # (None before an initialize failed)
        note(f"{config.cosim.engine and 'engine' or 'reference'}: "
             f"{'error ' + error[0] if error else 'ran'}, "
             f"{len(getattr(m, 'couplings', ()))} coupling(s), "
             f"{'compiled' if compiled and compiled.steps else 'not compiled'}")
        return ((m.logs, list(m.step_log), dict(m.stats)), error, sim.t,
                {k: v.copy() for k, v in getattr(m, "values", {}).items()})
    finally:
        sim.close()


def note(text: str) -> None:
    """Count ``text`` in the statistics of the hypothesis test running (if one is)."""
    if currently_in_test_context():
        event(text)


def with_cosim(config, **options):
    return replace(config, cosim=replace(config.cosim, **options))


def assert_same_as_reference(spec, config, paths=PATHS, pause=None):
    """Every path of ``paths`` gives the reference's outcome for ``spec`` under ``config``
    (each run to ``pause`` first, if given)."""
    ref = outcome(spec, with_cosim(config, **REFERENCE), pause=pause)
    # (a loop the generator could not give one rate: a top-level hold inside it)
    refused = ref[1] and ref[1][0] == "CompileError" and (
        "couples atomic subsystems" in ref[1][1] or "mixes sample times" in ref[1][1])
    if currently_in_test_context():
        assume(not refused)
    for path, options in paths.items():
        windows = {"engine": False, "engine-windows": True}.get(path)
        got = outcome(spec, with_cosim(config, **options), windows, pause)
        assert got[1] == ref[1], path
        if ref[0] is None:
            assert got[0] is None, path
            continue
        assert_identical(got[0], ref[0])
        assert got[2] == ref[2], path
        assert got[3].keys() == ref[3].keys(), path
        for key in ref[3]:
            np.testing.assert_array_equal(got[3][key], ref[3][key], err_msg=f"{path} {key}",
                                          strict=True)


SETTINGS = dict(deadline=None, derandomize=True, database=None, print_blob=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.filter_too_much])


@settings(max_examples=250, **SETTINGS)
@given(st.data())
def test_random_models_engine_and_compiled_are_the_protocol_path(data):
    """See the module notes; some runs stop half-way and go on (``run(t_end=...)``)."""
    spec = data.draw(models(), label="model")
    config = data.draw(configs(spec), label="config")
    assert_same_as_reference(spec, config, pause=data.draw(pauses(config), label="pause"))


def pauses(config):
    """None, or a macro point inside the run to stop at and continue from."""
    steps = int((config.t_end - config.t0) / config.cosim.H)
    return st.sampled_from([None, None] + ([config.t0 + (steps // 2) * config.cosim.H]
                                           if steps > 2 else []))


@pytest.mark.slow
@settings(max_examples=2000, **SETTINGS)
@given(st.data())
def test_many_random_models_engine_and_compiled_are_the_protocol_path(data):
    """The same with many more draws (opt-in: slow)."""
    test_random_models_engine_and_compiled_are_the_protocol_path.hypothesis.inner_test(data)


@settings(max_examples=120, **SETTINGS)
@given(st.data())
def test_random_models_at_H_are_their_monolithic_run(data):
    """The outside oracle where the co-simulation is exact (docs/cosim-semantics.md): every
    unit at the macro step, couplings resolved and iterated — Jacobi and Gauss–Seidel give
    the monolithic run of the same model (to the iteration's tolerance where a loop is
    solved): at every extrapolation order when every unit is discrete, at order 0 with
    continuous units (and top-level integrators) too."""
    from cosim import Simulator
    discrete = data.draw(st.booleans(), label="discrete")
    spec = data.draw(models(max_units=4, at_H=True, discrete=discrete), label="model")
    config = data.draw(configs(spec, adaptive=False), label="config")
    config = with_cosim(config, feedthrough="resolve", iterate=True, tolerance=1e-13,
                        on_nonconvergence="raise", acceleration="anderson", relaxation=1.0,
                        max_iterations=50)
    if not discrete:
        # continuous units read held inputs at every solver stage: the monolithic run's
        # (their parent holds every input over its step, H) only at extrapolation 0
        config = with_cosim(config, extrapolation=0)
    try:
        mono = Simulator(build(spec), replace(config, cosim=None, tolerance_fpi=1e-14)).run()
    except CompileError as err:
        # a loop of units the generator could not give one rate (through a top-level
        # integrator: continuous and discrete blocks in one loop), refused by the compile
        assume("couples atomic subsystems" not in str(err)
               and "mixes sample times" not in str(err))
        raise
    (logs, _, _), error, _, _ = outcome(spec, config)
    assert error is None
    keys = [k for k in mono if k in logs]
    assert keys
    for key in keys:
        np.testing.assert_array_equal(logs.time_of(key), mono.time_of(key), err_msg=key)
        np.testing.assert_allclose(logs[key], mono[key], rtol=1e-10, atol=1e-11,
                                   err_msg=key)


# -- defects the random models found ------------------------------------------------------

def coupling_fed_from_outside(H=0.01, gain=-0.5, phase=0.4):
    """Found by :func:`test_random_models_at_H_are_their_monolithic_run` (shrunk): unit
    a, ``y_a = 0.5 u``, and unit b, ``y_b = -0.5 (v + w)``, both discrete at H, coupled
    (``u = y_b``, ``v = y_a``); b's other input ``w = sin(2 pi 2.3 t + 0.4)`` comes from a
    top-level Sine, a held output (discrete at H). The loop's solution is
    ``y_b = -0.4 w``, ``y_a = 0.5 y_b`` at every sample (b's ``gain``: -0.5; the sine's
    ``phase``: 0.4)."""
    m = Model("outside")
    a = Subsystem("a", atomic=True, dt=H)
    a.add(Inport("u"), Gain("g", 0.5), Outport("y"))
    a.connect("u.out", "g.in")
    a.connect("g.out", "y.in")
    b = Subsystem("b", atomic=True, dt=H)
    b.add(Inport("v"), Inport("w"), Sum("s", "++"), Gain("g", gain), Outport("y"))
    b.connect("v.out", "s.in1")
    b.connect("w.out", "s.in2")
    b.connect("s.out", "g.in")
    b.connect("g.out", "y.in")
    m.add(a, b, Sine("w", frequency=2.3, phase=phase))
    m.connect("a.y", "b.v")
    m.connect("b.y", "a.u")
    m.connect("w.out", "b.w")
    return m


@pytest.mark.parametrize("scheme", ["jacobi", "gauss-seidel"])
def test_a_coupling_sees_its_outside_inputs_at_the_macro_point(scheme):
    """docs/cosim-semantics.md: discrete units sampling at the macro step, driven by held
    sources, with an iterated coupling, co-simulate to exactly the monolithic run. Found:
    the coupling's outputs at T+H were solved with the top-level sine's value at T (its
    units stepped and iterated, never refreshed with the inputs exchanged at T+H), so they
    lagged the loop's solution by one macro step (0.19 at t = 0.01 here); so did b's
    logged input w, on the protocol path, the engine and the compiled exchange. Now the
    coupling is solved again at T+H, a refresh level of its own."""
    from cosim import Simulator
    H = 0.01
    config = SimulationConfig(dt=H, t_end=0.1, cosim=CosimConfig(H=H, scheme=scheme,
                                                                 tolerance=1e-13))
    mono = Simulator(coupling_fed_from_outside(), replace(config, cosim=None,
                                                          tolerance_fpi=1e-14)).run()
    t = mono.time_of("b.y")
    w = np.sin(2 * np.pi * 2.3 * t + 0.4)
    np.testing.assert_allclose(mono["b.y"][:, 0], -0.4 * w, rtol=1e-12, atol=1e-13)
    for engine in (False, True):
        sim = CoSimulation(coupling_fed_from_outside(), with_cosim(
            config, engine=engine, compiled=engine))
        try:
            logs = sim.run()
            m = sim.master
            assert m.refresh_levels == [[("a", "b")]]
            if engine:
                assert m.compiled.steps == 10 and "solve a <-> b again at T+H" in \
                    m.compiled.program.table()
        finally:
            sim.close()
        np.testing.assert_allclose(logs["b/w.out"][:, 0], w, rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(logs["b.y"][:, 0], -0.4 * w, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("scheme", ["jacobi", "gauss-seidel"])
def test_a_coupling_solved_again_that_does_not_converge_is_named_or_recorded(scheme):
    """The loop of :func:`coupling_fed_from_outside` with a loop gain of -0.9, the sine
    starting at 0, and three plain fixed-point iterations: co-initialization and each macro
    step's own iteration converge at once (gains only, the outside input held at its value
    at T: the last macro point's solution), the solve at T+H for the sine's new value does
    not. Raised, the error names the refresh at
    the macro point, the coupling and its links, alike on every path (the engine fails
    the macro step, the protocol path had accepted it: as for a unit failing its refresh,
    test_compiled_exchange.py); continued, the steps are recorded ``continued`` with their
    residual, every path bit for bit."""
    config = SimulationConfig(dt=0.01, t_end=0.05, cosim=CosimConfig(
        H=0.01, scheme=scheme, tolerance=1e-12, max_iterations=3, acceleration="none"))
    model = coupling_fed_from_outside(gain=-1.8, phase=0.0)
    ref = outcome(model, with_cosim(config, **REFERENCE))
    assert ref[1][0] == "ConvergenceError"
    assert ref[1][1].startswith("[t=0.01] refresh at the macro point: the algebraic coupling "
                                "a <-> b (links a.y -> b.v, b.y -> a.u)")
    for path, options in PATHS.items():
        assert outcome(model, with_cosim(config, **options))[1] == ref[1], path
    config = with_cosim(config, on_nonconvergence="continue")
    (logs, records, stats), error, _, _ = outcome(model, with_cosim(config, **REFERENCE))
    assert error is None
    steps = [r for r in records if r.H > 0]
    assert len(steps) == 5 and all(r.status.value == "continued" and r.iterations == 3
                                   and r.residual > 1e-3 for r in steps)
    # the first step's iteration converges at once, the solve at its end does not; every
    # later step starts from that unconverged solution (three iterations), then its solve
    assert stats["iterations"] == 1 + 3 + 4 * (3 + 3)
    assert_same_as_reference(model, config)


def test_a_refresh_waits_for_the_readers_of_the_value_it_replaces():
    """Found by :func:`test_many_random_models_engine_and_compiled_are_the_protocol_path`:
    u0 (a coupling of its own, through a self-link) is solved again at T+H and refreshed
    once more at the end for its log, as are u1 and u2, which read u0 and whose first
    refresh the program put after u0's second. u2's last refresh then read u0's value of
    that second refresh instead of the solve's (the reference refreshes a level together,
    from the values before it): 1.8e-12 apart. A refresh now goes no earlier than the
    actions reading the value it replaces."""
    gain = BlockSpec(kind="gain", inputs=(("in", 0),), p=-0.9)
    delay = BlockSpec(kind="delay", inputs=(("in", 0),), p=-1.5)
    spec = ModelSpec(
        width=1,
        units=(UnitSpec(div=1, solver=None, n_in=2,
                        blocks=(delay, delay, gain, gain, gain,
                                BlockSpec(kind="sum", inputs=(("in", 0), ("in", 1)), m="++")),
                        outputs=((("in", 0), -0.75), (("b", 5), -0.375))),
               UnitSpec(div=1, solver="RK4", n_in=2, blocks=(),
                        outputs=((("in", 0), -0.75),)),
               UnitSpec(div=1, solver="RK4", n_in=2, blocks=(),
                        outputs=((("in", 0), -0.75),))),
        top=(BlockSpec(kind="const", p=-1.5),),
        drivers=((("t", 0), ("u", 0, 1)), (("t", 0), ("u", 0, 0)), (("t", 0), ("u", 0, 1))))
    config = SimulationConfig(dt=0.01, t_end=0.03, cosim=CosimConfig(
        H=0.01, scheme="gauss-seidel", tolerance=1e-10, acceleration="none"))
    assert_same_as_reference(spec, config)


@pytest.mark.slow
@pytest.mark.cluster
@settings(max_examples=8, **SETTINGS)
@given(st.data())
def test_random_models_on_zmq_are_the_protocol_path(data):
    """The engine over the wire (real server processes: a process each, or the units shared
    between two; the top-level blocks beside the master or in a process of their own)."""
    spec = data.draw(models(max_units=4), label="model")
    config = data.draw(configs(spec), label="config")
    placement = data.draw(st.sampled_from([{}, {"processes": 2}, {"units": {
        "main": {"process": "glue"}}}]), label="placement")
    if "units" in placement and not spec.top:
        placement = {}
    assert_same_as_reference(spec, config, {"zmq": dict(backend="zmq", **placement)})


@pytest.mark.slow
@pytest.mark.cluster
@settings(max_examples=6, **SETTINGS)
@given(st.data())
def test_random_models_on_ray_are_the_protocol_path(ray_session, data):
    """The engine over Ray's data plane (real local Ray, an actor per unit)."""
    spec = data.draw(models(max_units=3), label="model")
    assert_same_as_reference(spec, data.draw(configs(spec), label="config"),
                             {"ray": dict(backend="ray")})


def test_a_block_made_with_blocks_own_arguments_is_written_and_rebuilt():
    """Found by :func:`test_random_models_on_zmq_are_the_protocol_path`: a unit holding a
    ZeroOrderHold could not run in a server process ("ZeroOrderHold was not built through
    its constructor; its parameters are unknown"): a block class without an ``__init__``
    of its own (ZeroOrderHold, Abs, Clock, Terminator) recorded no specification, so the
    unit could not be written as the model file its server rebuilds it from."""
    from blocks import Abs, Clock
    from blocks.discrete import ZeroOrderHold
    from blocks.sinks import Terminator
    from cosim.modelfile import dump_model, load_model
    m = Model("own")
    m.add(Sine("s"), ZeroOrderHold("h", sample_time=0.02), Abs("a"), Clock("c"),
          Terminator("t"))
    m.connect("s.out", "h.in")
    m.connect("h.out", "a.in")
    m.connect("a.out", "t.in")
    back = load_model(dump_model(m))
    assert [(type(b).__name__, b.name) for b in back.blocks] == \
        [(type(b).__name__, b.name) for b in m.blocks]
    assert back["h"].sample_time == 0.02


def test_a_vector_loop_through_an_atomic_subsystem_keeps_its_shape():
    """Found by :func:`test_random_models_at_H_are_their_monolithic_run` (shrunk; fixed: the
    atomic subsystem's block declares its Inports' shapes): an atomic
    subsystem ``y = 0.5 u`` on 2-vectors (its Inport declares shape (2,)) closed through a
    top-level Gain: the monolithic run logged ``y`` with shape (1,) (other draws of the
    same shape fail at initialize: "operands could not be broadcast", "in0.out (shape
    (1,)) -> b0.in (expects shape (2,))"). The loop's solution is ``y = 0``, a 2-vector."""
    from cosim import Simulator
    m = Model("vector_loop")
    b = Subsystem("b", atomic=True, dt=0.01)
    b.add(Inport("u", shape=(2,)), Gain("g", 0.5), Outport("y"))
    b.connect("u.out", "g.in")
    b.connect("g.out", "y.in")
    m.add(b, Gain("t", -1.0))
    m.connect("b.y", "t.in")
    m.connect("t.out", "b.u")
    logs = Simulator(m, SimulationConfig(dt=0.01, t_end=0.05)).run()
    assert logs["b.y"].shape == (6, 2)


def reads_itself(H=0.01):
    """Found by :func:`test_random_models_on_zmq_are_the_protocol_path` (shrunk): unit u0,
    ``y = -0.75 u`` (direct feedthrough), its input ``u`` from a unit u1 holding a
    constant, and a second input ``w`` (feeding none of its outputs) linked to its own
    output ``y``."""
    m = Model("itself")
    u0 = Subsystem("u0", atomic=True, dt=H, solver="RK4")
    u0.add(Inport("u"), Inport("w"), Gain("g", -0.75), Outport("y"))
    u0.connect("u.out", "g.in")
    u0.connect("g.out", "y.in")
    u1 = Subsystem("u1", atomic=True, dt=H, solver="RK4")
    u1.add(Constant("c", -1.5), Outport("y"))
    u1.connect("c.out", "y.in")
    m.add(u0, u1)
    m.connect("u1.y", "u0.u")
    m.connect("u0.y", "u0.w")
    return m


def test_a_refresh_that_reads_its_units_own_step_never_travels_with_that_step():
    """The program behind :func:`test_a_unit_reading_its_own_output_runs_on_zmq`: over a
    window (u1's next step sent early), u0's refresh joined u0's step in one message
    although it reads, through ``w``, the output that step computes (KeyError building the
    message). Now that refresh waits for the step's reply."""
    from cosim.config import Scheme
    from cosim.master.program import compile_program
    H = 0.01
    sim = CoSimulation(reads_itself(H), SimulationConfig(dt=H, t_end=3 * H,
                                                         cosim=CosimConfig(H=H)))
    try:
        m = sim.master
        m.initialize()
        for steps in (1, 3, 16):
            program = compile_program(m.graph, Scheme.JACOBI, m.order, m.delayed, set(),
                                      set(m.names), m.refresh_levels, steps=steps)
            for stage in program.stages:
                for s in stage.sends:
                    assert not (s.step and s.reset and any(
                        key[0] == s.unit and not post for _, key, post in s.sources)), \
                        program.table()
    finally:
        sim.close()


@pytest.mark.slow
@pytest.mark.cluster
@pytest.mark.parametrize("scheme", ["jacobi", "gauss-seidel"])
def test_a_unit_reading_its_own_output_runs_on_zmq(scheme):
    """Before: KeyError ('u0', 'y') in the engine from the second macro step on."""
    H = 0.01
    config = SimulationConfig(dt=H, t_end=20 * H, cosim=CosimConfig(H=H, scheme=scheme,
                                                                    log_every=8))
    ref = outcome(reads_itself(H), with_cosim(config, **REFERENCE))
    got = outcome(reads_itself(H), with_cosim(config, backend="zmq"))
    assert ref[1] is None and got[1] is None
    assert_identical(got[0], ref[0])


@pytest.mark.slow
@pytest.mark.cluster
def test_top_level_blocks_in_a_process_of_their_own_read_vectors():
    """Found by :func:`test_random_models_on_zmq_are_the_protocol_path` (shrunk): a unit's
    2-vector output read by a top-level Gain, the top-level blocks placed in a server
    process (``units={"main": {"process": ...}}``). Before: CompileError "link u.y ->
    main.u__y: shapes differ ((2,) vs (1,))": the top-level unit's Inport got its shape as
    an attribute after it was made, so the server, rebuilding the unit from its
    constructor arguments, made it of shape (1,)."""
    H = 0.01

    def model():
        m = Model("vector_glue")
        u = Subsystem("u", atomic=True, dt=H, solver="RK4")
        u.add(Constant("c", [1.0, -2.0]), Integrator("x", [0.5, 0.25]), Outport("y"))
        u.connect("c.out", "x.in")
        u.connect("x.out", "y.in")
        v = Subsystem("v", atomic=True, dt=H)
        v.add(Inport("u", shape=(2,)), Gain("g", -0.75), Outport("y"))
        v.connect("u.out", "g.in")
        v.connect("g.out", "y.in")
        m.add(u, v, Gain("t", -0.9))
        m.connect("u.y", "t.in", "v.u")
        return m

    config = SimulationConfig(dt=H, t_end=10 * H, cosim=CosimConfig(H=H))
    ref = outcome(model(), with_cosim(config, **REFERENCE))
    got = outcome(model(), with_cosim(config, backend="zmq",
                                      units={"main": {"process": "glue"}}))
    assert ref[1] is None and got[1] is None
    assert ref[0][0]["t.out"].shape == (11, 2)
    assert_identical(got[0], ref[0])


def test_a_run_stopped_by_an_event_goes_no_further():
    """Found by :func:`test_many_random_models_engine_and_compiled_are_the_protocol_path`
    (shrunk): a top-level stop event at 0.04 inside ``run(t_end=0.09)``, then ``run()``.
    Before: the second run stepped from 0.04 again although the units had gone on to the
    end of their macro step (0.05): ModelError "unit 'u0': do_step(t=0.04) but the unit is
    at t=0.05" on the protocol path, naming another unit through the engine. Now, as a
    Simulator stopped by an event, the run is over: the same logs, on every path."""
    from cosim.model.events import Scheduled
    H = 0.01

    def model():
        m = reads_itself(H)
        m.add(Constant("c", 1.0))
        m.add_event(Scheduled("halt", times=[0.04], stop=True))
        return m

    config = SimulationConfig(dt=H, t_end=0.2, cosim=CosimConfig(H=H))
    ref = outcome(model(), with_cosim(config, **REFERENCE), pause=0.09)
    assert ref[1] is None and ref[2] == pytest.approx(0.04)
    for options in PATHS.values():
        got = outcome(model(), with_cosim(config, **options), pause=0.09)
        assert got[1] is None
        assert_identical(got[0], ref[0])


#: Found by :func:`test_random_models_engine_and_compiled_are_the_protocol_path` (seed
#: 71, shrunk to three units): u0 (``y = -0.75 u``) and the discrete u2 (``y0 = -0.75
#: w``, ``y1 = -0.75 (w + delay)``) in a coupling; u1, outside it, reads u0 and u2's
#: ``y1`` (through an input feeding none of its outputs); all at H/2.
COUPLING_BEFORE_A_READER = ModelSpec(
    width=1, units=(
        UnitSpec(div=2, solver="RK4", n_in=2, blocks=(), outputs=((("in", 0), -0.75),)),
        UnitSpec(div=2, solver="RK4", n_in=2, blocks=(BlockSpec("const", (), -1.5),),
                 outputs=((("in", 0), -0.75), (("in", 0), -0.75))),
        UnitSpec(div=2, solver=None, n_in=2,
                 blocks=(BlockSpec("delay", (("in", 0),), -1.5),
                         BlockSpec("delay", (("in", 0),), -1.5),
                         BlockSpec("const", (), -1.5),
                         BlockSpec("sum", (("in", 1), ("b", 0)), 1.0, "++")),
                 outputs=((("in", 1), -0.75), (("b", 3), -0.75)))),
    top=(), drivers=((("u", 2, 0), ("u", 0, 0)), (("u", 0, 0), ("u", 2, 1)),
                     (("u", 1, 0), ("u", 0, 0))))


@pytest.mark.parametrize("extrapolation", [1, 2])
def test_a_coupling_placed_before_a_reader_in_the_gauss_seidel_order_is_fresh_to_it(
        extrapolation):
    """Gauss–Seidel with ``order=(u0, u1, u2)``: the coupling {u0, u2} is iterated at u0's
    place, before u1, so u1's input from u2 is interpolated to u2's value at T+H (the
    protocol path). Before: the program took u2 by its own place (after u1) and
    extrapolated that input: u1/in1.out differed inside the macro step (0.5625 against
    1.125), on the engine and the compiled exchange."""
    config = SimulationConfig(dt=0.005, t_end=0.06, cosim=CosimConfig(
        H=0.01, scheme="gauss-seidel", extrapolation=extrapolation,
        order=("u0", "u1", "u2"), log_every=1))
    assert_same_as_reference(COUPLING_BEFORE_A_READER, config)
