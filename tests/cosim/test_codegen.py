"""The generated fast path is bit-identical to the reference interpreter."""

import math

import numpy as np
import pytest

from blocks import (Constant, DiscreteIntegrator, DiscretePID, DiscreteStateSpace, FirstOrderLag,
                    Gain, Integrator, Lookup1D, MathFunction, Recorder, Relay, Saturation, Sine,
                    StateSpace, Step, Sum, UnitDelay)
from cosim import Block, Model, SimulationConfig, Simulator
from cosim.model.block import Kernel


def chain(n, sample_time=None):
    """A feedback-rich chain: sine -> n x (gain, sum with delayed self) -> recorder."""
    m = Model("chain")
    m.add(Sine("src", amplitude=1.3, frequency=2.0, phase=0.1, bias=0.2))
    prev = "src.out"
    for i in range(n):
        st = sample_time if i % 3 == 2 else None
        m.add(Gain(f"g{i}", 0.5 + 0.01 * i), Sum(f"s{i}", "+-" if i % 2 else "-+"),
              UnitDelay(f"d{i}", initial=0.1 * i, sample_time=st))
        m.connect(prev, f"g{i}.in")
        m.connect(f"g{i}.out", f"s{i}.in1")
        m.connect(f"d{i}.out", f"s{i}.in2")
        m.connect(f"s{i}.out", f"d{i}.in")
        prev = f"s{i}.out"
    m.add(Recorder("rec"), Constant("c", 3.0))
    m.connect(prev, "rec.in")
    return m


@pytest.mark.parametrize("n,st", [(1, None), (20, None), (20, 0.05), (7, (0.04, 0.02))])
def test_fast_path_bit_identical_to_interpreter(n, st):
    cfg = dict(dt=0.01, t_end=1.0)
    ref_sim = Simulator(chain(n, st), SimulationConfig(fast=False, **cfg))
    ref = ref_sim.run()
    sim = Simulator(chain(n, st), SimulationConfig(fast=True, **cfg))
    logs = sim.run()
    assert sim.fast_path is not None and ref_sim.fast_path is None
    assert sorted(ref) == sorted(logs)
    for key in ref:
        assert ref[key].shape == logs[key].shape, key
        np.testing.assert_array_equal(ref[key], logs[key], err_msg=key)
        np.testing.assert_array_equal(ref.time_of(key), logs.time_of(key))
    # Blocks show the same final outputs and states after a fast run.
    for b_ref, b in zip(ref_sim.plan.blocks, sim.plan.blocks):
        for p in b.outputs:
            np.testing.assert_array_equal(b_ref.outputs[p], b.outputs[p])
        for s in b.state:
            np.testing.assert_array_equal(b_ref.state[s], b.state[s])


def test_blocks_without_kernel_fall_back_to_interpreter():
    class Plain(Block):
        def output_update(self, t, dt):
            self.outputs["out"] = self.inputs["in"] * 2.0

    m = Model("mixed")
    m.add(Constant("c", 1.0), Plain("p"))
    m.connect("c.out", "p.in")
    sim = Simulator(m, SimulationConfig(dt=0.1, t_end=1.0))
    logs = sim.run()
    assert sim.fast_path is None
    np.testing.assert_array_equal(logs["p.out"][:, 0], np.full(11, 2.0))


def test_fast_path_error_reports_time():
    m = Model("div")
    m.add(Constant("c", 1.0), Recorder("r"))
    m.connect("c.out", "r.in")
    sim = Simulator(m, SimulationConfig(dt=0.1, t_end=1.0))
    sim.run()
    assert "def advance" in sim.fast_path.source


def grid(n, gain=0.5):
    """n copies of a cell of mixed blocks: groups of identical templates with parameters,
    continuous and multirate members, non-contiguous slots, and math calls (singletons)."""
    m = Model("grid")
    m.add(Sine("src", 1.0, 0.7, 0.1))
    for i in range(n):
        m.add(Gain(f"g{i}", gain), Integrator(f"I{i}", 0.1 * i), Step(f"st{i}", 0.3, 0.0, 1.0),
              DiscreteIntegrator(f"p{i}", 1.3, 0.2, "trapezoidal",
                                 sample_time=0.05 if i % 2 else None),
              FirstOrderLag(f"f{i}", tau=0.3 + 0.01 * i, gain=2.0, initial=0.1),
              MathFunction(f"m{i}", "sin" if i % 8 == 0 else "square"),
              StateSpace(f"ss{i}", [[0.0, 1.0], [-4.0, -0.4]], [[0.0], [1.0]], [[1.0, 0.5]],
                         [[0.2]], x0=[0.1, 0.0]),
              DiscreteStateSpace(f"d{i}", [[0.5, 0.2], [-0.1, 0.3]], [[1.0], [0.5]],
                                 [[1.0, -2.0]]),
              Sum(f"sum{i}", "+-+"))
        m.connect("src.out", f"g{i}.in", f"sum{i}.in2")
        m.connect(f"g{i}.out", f"I{i}.in", f"ss{i}.in")
        m.connect(f"I{i}.out", f"p{i}.in")
        m.connect(f"p{i}.out", f"f{i}.in")
        m.connect(f"f{i}.out", f"m{i}.in", f"d{i}.in")
        m.connect(f"d{i}.out", f"sum{i}.in1")
        m.connect(f"st{i}.out", f"sum{i}.in3")
    m.add(Recorder("rec", 2))
    m.connect(f"ss{n - 1}.out", "rec.in1")
    m.connect(f"sum{n - 1}.out", "rec.in2")
    return m


def bank(make, n=24):
    """A source feeding ``n`` blocks of one kind side by side (one level, one task)."""
    m = Model("bank")
    m.add(Sine("src", 1.5, 0.7, 0.2))
    for i in range(n):
        m.add(make(f"b{i}"))
        m.connect("src.out", f"b{i}.in")
    return m


def assert_fast_run_bit_identical(model, **cfg):
    runs = {}
    for fast in (False, True):
        sim = Simulator(model(), SimulationConfig(fast=fast, **cfg))
        runs[fast] = (sim.run(), sim)
    (ref, _), (logs, sim) = runs[False], runs[True]
    assert sim.fast_path is not None
    assert sorted(ref) == sorted(logs)
    for key in ref:
        np.testing.assert_array_equal(ref[key], logs[key], err_msg=key)
        np.testing.assert_array_equal(ref.time_of(key), logs.time_of(key))
    return sim.fast_path


@pytest.fixture
def small_groups(monkeypatch):
    """Vectorise groups of a few blocks: the threshold is a speed choice (see
    ``vector.MIN_MEAN_GROUP``, measured by the benchmarks); these tests check the vector code
    itself on models the interpreter runs quickly."""
    from cosim.fastpath import vector
    monkeypatch.setattr(vector, "MIN_MEAN_GROUP", 6)


@pytest.mark.parametrize("n,solver,vector", [(3, "RK4", False), (12, "RK4", True),
                                             (20, "Euler", True), (30, "SSPRK33", True)])
def test_vector_strategy_bit_identical_to_interpreter(small_groups, n, solver, vector):
    fp = assert_fast_run_bit_identical(lambda: grid(n), dt=0.01, t_end=2.0, solver=solver)
    assert fp.vector is vector


SPECIAL = [math.nan, -math.inf, -1.5, -0.0, 0.0, 0.25, 1.5, math.inf]


@pytest.mark.parametrize("text", ["min(u, v)", "max(u, v)", "max(min(u, v), -v)",
                                  "min(max(u + v, 0.25), 1.0)", "min(0.25, u) * max(u, -u)",
                                  "max(min(u, p), q)"])
def test_min_max_lowered_select_what_python_selects(text):
    """Lowered over arrays, ``min``/``max`` of two values give every element Python's own
    selection, bit for bit (NaN and signed zeros included): the oracle is the builtins on
    floats, over every pair of special values in both orders."""
    from cosim.fastpath import inplace
    pairs = [(a, b) for a in SPECIAL for b in SPECIAL]
    u = np.array([a for a, _ in pairs])
    v = np.array([b for _, b in pairs])
    p, q = np.array(0.5), np.array(-0.0)
    spans = inplace.Spans()
    spans.span.update(u=("S", 0, len(u)), v=("S", len(u), 2 * len(u)),
                      out=("S", 2 * len(u), 3 * len(u)))
    lines = inplace.lower(spans, ["out"], [text], len(u))
    assert not any("min(" in ln or "max(" in ln for ln in lines)
    env = {"np": np, **inplace.GLOBALS, "u": u, "v": v, "p": p, "q": q,
           "out": np.full(len(u), 7.0)}
    with np.errstate(invalid="ignore"):             # inf - inf, as Python's nan
        exec("\n".join(spans.preamble + lines), env)
    want = np.array([eval(text, {"u": a, "v": b, "p": 0.5, "q": -0.0}) for a, b in pairs])
    np.testing.assert_array_equal(env["out"].view(np.uint64), want.view(np.uint64))


class Clip(Block):
    """``out = max(min(in, upper), lower)`` with limits of its own (a kernel selecting)."""

    input_ports, output_ports = ("in",), ("out",)

    def __init__(self, name, lower, upper):
        super().__init__(name)
        self.lower, self.upper = lower, upper

    def initialize(self, t0):
        self.outputs["out"] = np.zeros(1)

    def output_update(self, t, dt):
        self.outputs["out"] = np.array([max(min(float(self.inputs["in"][0]), self.upper),
                                            self.lower)])

    def kernel(self):
        return Kernel({"out": f"max(min(u_in, {self.upper!r}), {self.lower!r})"})


class Specials(Block):
    """Outputs :data:`SPECIAL` one per tick, then 0.5."""

    input_ports, output_ports = (), ("out",)
    direct_feedthrough = False

    def initialize(self, t0):
        self.state["n"] = np.zeros(1)
        self.outputs["out"] = np.zeros(1)

    def output_update(self, t, dt):
        n = int(self.state["n"][0])
        self.outputs["out"] = np.array([SPECIAL[n] if n < len(SPECIAL) else 0.5])

    def state_update(self, t, dt):
        self.next_state["n"] = self.state["n"] + 1.0

    def kernel(self):
        out = "0.5"
        for j, v in reversed(list(enumerate(SPECIAL))):
            out = f"({repr(v) if math.isfinite(v) else v} if x_n == {j}.0 else {out})"
        return Kernel({"out": out}, {"n": "x_n + 1.0"})


def clip_bank(n=24):
    """A source feeding blocks clipping it through NaN, infinities and both zeros."""
    m = Model("clips")
    m.add(Specials("src"))
    for i in range(n):
        lo, hi = [(-0.0, 0.0), (0.0, -0.0), (-0.5, 0.25)][i % 3]
        m.add(Clip(f"c{i}", lo, hi), Saturation(f"s{i}", lo, hi))
        m.connect("src.out", f"c{i}.in", f"s{i}.in")
    return m


def test_vectorized_min_max_bit_identical_on_special_values(small_groups):
    """Groups of blocks selecting with ``min``/``max`` run as vectors, bit-identically to
    the interpreter (sign bits compared too) on NaN, infinities and signed zeros."""
    runs = {}
    for fast in (False, True):
        cfg = SimulationConfig(dt=0.5, t_end=5.0, fast=fast,
                               log=[f"{b}{i}.out" for i in range(24) for b in "cs"])
        sim = Simulator(clip_bank(), cfg)
        runs[fast] = (sim.run(), sim)
    (ref, _), (logs, sim) = runs[False], runs[True]
    assert sim.fast_path is not None and sim.fast_path.vector
    assert "_less(" in sim.fast_path.source and "_greater(" in sim.fast_path.source
    assert sorted(ref) == sorted(logs)
    for key in ref:
        np.testing.assert_array_equal(ref[key].view(np.uint64), logs[key].view(np.uint64),
                                      err_msg=key)


@pytest.mark.parametrize("make", [
    lambda name: Saturation(name, -0.5, 0.7),
    lambda name: Relay(name, 0.4, -0.3, 2.0, -1.0),
    lambda name: Lookup1D(name, [-1.0, 0.0, 0.5, 1.2], [2.0, -1.0, -0.0, 0.5], "linear"),
    lambda name: DiscretePID(name, 1.0, 4.0, 0.05, N=10.0, lower=-0.8, upper=0.6,
                             anti_windup="clamping"),
    lambda name: Integrator(name, 0.1, lower=-0.3, upper=0.4),
], ids=["Saturation", "Relay", "Lookup1D", "DiscretePID-clamping", "Integrator-limited"])
def test_templates_that_test_their_values_run_member_by_member(small_groups, make):
    """A truth test on a member's value (a comparison, a conditional) has no elementwise
    numpy form: many such blocks side by side still run, bit-identically (a ``min``/``max``
    of two values alone is lowered to a selection: the saturations run as one vector)."""
    fp = assert_fast_run_bit_identical(lambda: bank(make), dt=0.05, t_end=3.0)
    assert fp.vector is ("_less(" in fp.source)


@pytest.mark.parametrize("n,st", [(20, None), (20, 0.05), (7, (0.04, 0.02))])
def test_chunked_step_functions_bit_identical(monkeypatch, n, st):
    """A large plan's step function is split into functions of bounded size; a chunk of 7
    statements makes these small chains cross many function boundaries (signals of other
    chunks, of slower tasks, logged signals, states read by their update chunks)."""
    from cosim.fastpath import emitter
    monkeypatch.setattr(emitter, "CHUNK", 7)
    fp = assert_fast_run_bit_identical(lambda: chain(n, st), dt=0.01, t_end=1.0)
    assert fp.source.count("def _out") > 3


def discrete_bank(n):
    """n copies of a discrete cell: groups of identical blocks per level, in two tasks, whose
    state updates read what they assign (a delay, a trapezoidal integrator, two states)."""
    m = Model("dbank")
    m.add(Sine("src", 1.0, 0.7, 0.1))
    for i in range(n):
        m.add(Gain(f"g{i}", 0.5 + 0.01 * i), Sum(f"s{i}", "+-"),
              UnitDelay(f"d{i}", initial=0.1 * i, sample_time=0.05 if i % 2 else None),
              DiscreteIntegrator(f"p{i}", 1.3, 0.2, "trapezoidal"),
              DiscreteStateSpace(f"ss{i}", [[0.5, 0.2], [-0.1, 0.3]], [[1.0], [0.5]],
                                 [[1.0, -2.0]]))
        m.connect("src.out", f"g{i}.in")
        m.connect(f"g{i}.out", f"s{i}.in1")
        m.connect(f"d{i}.out", f"s{i}.in2")
        m.connect(f"s{i}.out", f"d{i}.in", f"p{i}.in")
        m.connect(f"p{i}.out", f"ss{i}.in")
    m.add(Recorder("rec", 2))
    m.connect(f"ss{n - 1}.out", "rec.in1")
    m.connect(f"s{n - 1}.out", "rec.in2")
    return m


def test_chunked_vector_step_functions_bit_identical(small_groups, monkeypatch):
    """The vector strategy's chunk functions make the views they use of the call's arrays."""
    from cosim.fastpath import emitter
    monkeypatch.setattr(emitter, "CHUNK", 7)
    fp = assert_fast_run_bit_identical(lambda: discrete_bank(16), dt=0.01, t_end=1.0)
    assert fp.vector and fp.source.count("def _out") > 1


class CountingLag(Block):
    """``tau dc/dt = in - c``, ``out = c + n`` with ``n`` a discrete count of the ticks: a
    continuous output that reads a discrete state."""

    direct_feedthrough = False

    def __init__(self, name, tau=0.5, **kw):
        super().__init__(name, **kw)
        self.tau = float(tau)

    def initialize(self, t0):
        self.cstate = np.zeros(1)
        self.state["n"] = np.zeros(1)
        self.outputs["out"] = np.zeros(1)

    def output_update(self, t, dt):
        self.outputs["out"] = self.cstate + self.state["n"]

    def state_update(self, t, dt):
        self.next_state["n"] = self.state["n"] + 1.0

    def derivative(self, t):
        return (self.inputs["in"] - self.cstate) / self.tau

    def kernel(self):
        return Kernel({"out": "c_0 + x_n"}, {"n": "x_n + 1.0"}, ("(u_in - c_0) / p_tau",),
                      params={"tau": self.tau})


@pytest.mark.parametrize("n,vector", [(2, False), (24, True)])
def test_first_stage_sees_outputs_after_the_state_update(small_groups, n, vector):
    """The first Runge–Kutta stage reuses the tick's outputs only when no state update
    changed them: here a discrete count read by a continuous output changes them, and a lag
    downstream integrates the recomputed value."""
    def model():
        m = Model("counting")
        m.add(Sine("src", 1.0, 0.7, 0.1))
        for i in range(n):
            m.add(CountingLag(f"c{i}", 0.3 + 0.01 * i), FirstOrderLag(f"f{i}", tau=0.2))
            m.connect("src.out", f"c{i}.in")
            m.connect(f"c{i}.out", f"f{i}.in")
        return m
    fp = assert_fast_run_bit_identical(model, dt=0.01, t_end=1.0, solver="RK4")
    assert fp.vector is vector


@pytest.mark.parametrize("solver", ["RK4", "Euler", "SSPRK33"])
@pytest.mark.parametrize("make,chunk,vector", [
    (lambda: grid(3), 7, False),            # one statement per block: many stage functions
    (lambda: pi_loop(sample_time=0.05), 2, False),
    (lambda: grid(12), 3, True),            # numpy groups
], ids=["grid-scalar", "pi-scalar", "grid-vector"])
def test_chunked_continuous_step_functions_bit_identical(small_groups, monkeypatch, make,
                                                         chunk, vector, solver):
    """A large continuous plan's outputs, state updates and each Runge–Kutta stage run in
    functions of bounded size: the stage values cross function boundaries (continuous state,
    stage states and derivatives, minor outputs recomputed per stage). One statement per
    block: each Runge–Kutta combination is one line over the whole vectors."""
    from cosim.fastpath import emitter
    monkeypatch.setattr(emitter, "CHUNK", chunk)
    fp = assert_fast_run_bit_identical(make, dt=0.01, t_end=2.0, solver=solver)
    assert fp.vector is vector
    assert fp.source.count("def _rk") >= (2 if vector else 1)
    assert fp.source.count("def advance") == 1
    assert vector or fp.source.count("C[:] = C + h * (") == 1


class Tally(Block):
    """``out = 2 in``; a state ``n = 3 in`` that nothing reads (not even its update)."""

    def __init__(self, name, **kw):
        super().__init__(name, **kw)
        self.input_shapes["in"] = (1,)

    def initialize(self, t0):
        self.state["n"] = np.zeros(1)
        self.outputs["out"] = np.zeros(1)

    def output_update(self, t, dt):
        self.outputs["out"] = self.inputs["in"] * 2.0

    def state_update(self, t, dt):
        self.next_state["n"] = self.inputs["in"] * 3.0

    def kernel(self):
        from cosim.model.block import Kernel
        return Kernel({"out": "u_in * 2.0"}, {"n": "u_in * 3.0"})


@pytest.mark.parametrize("chunk", [3, 1000])
def test_chunked_macro_steps_leave_every_value_as_the_interpreter(monkeypatch, chunk):
    """A unit's macro steps (``advance_to(k, outputs=True)``: the last tick computes
    outputs only) of a chunked continuous plan leave the blocks' outputs and states, values
    no function reads again included, as the interpreter does."""
    from cosim.fastpath import emitter
    monkeypatch.setattr(emitter, "CHUNK", chunk)

    def model():
        m = pi_loop(sample_time=0.05)
        m.add(Tally("tally"), Tally("tally2", sample_time=0.03))
        m.connect("plant.out", "tally.in", "tally2.in")
        return m
    sims = {}
    for fast in (False, True):
        sim = sims[fast] = Simulator(model(), SimulationConfig(fast=fast, dt=0.01, t_end=1.0,
                                                               solver="RK4"))
        sim.initialize()
        for k in range(1, 40, 3):
            sim.advance_to(k, outputs=True)
        sim.state.blocks_current()
    assert sims[True].fast_path is not None
    assert (sims[True].fast_path.source.count("def _") > 3) is (chunk == 3)
    for b_ref, b in zip(sims[False].plan.blocks, sims[True].plan.blocks):
        for p in b_ref.outputs:
            np.testing.assert_array_equal(b_ref.outputs[p], b.outputs[p], err_msg=b.name)
        for n in b_ref.state:
            np.testing.assert_array_equal(b_ref.state[n], b.state[n], err_msg=b.name)
    np.testing.assert_array_equal(sims[False].state.X, sims[True].state.X)


def test_large_plan_starts_on_interpreter_and_switches_bit_identically(monkeypatch):
    from cosim.run import simulator
    monkeypatch.setattr(simulator, "LAZY_BLOCKS", 10)
    monkeypatch.setattr(simulator, "LAZY_SECONDS_PER_BLOCK", 1e3)   # the tick rule only
    cfg = SimulationConfig(dt=0.01, t_end=1.0)
    ref = Simulator(chain(20, 0.05), replace_fast(cfg, False)).run()
    sim = Simulator(chain(20, 0.05), cfg)
    sim.initialize()
    sim.advance_to(simulator.LAZY_TICKS - 3)
    assert sim.fast_path is None
    logs = sim.run()
    assert sim.fast_path is not None
    for key in ref:
        np.testing.assert_array_equal(ref[key], logs[key], err_msg=key)
        np.testing.assert_array_equal(ref.time_of(key), logs.time_of(key))


def test_a_heavy_plan_switches_once_the_interpreter_cost_what_generating_costs(monkeypatch):
    """Rent or buy: interpreter ticks expected to cost more than generating the code switch
    early (after the second tick here), bit-identically."""
    from cosim.run import simulator
    monkeypatch.setattr(simulator, "LAZY_BLOCKS", 10)
    monkeypatch.setattr(simulator, "LAZY_SECONDS_PER_BLOCK", 0.0)
    cfg = SimulationConfig(dt=0.01, t_end=1.0)
    ref = Simulator(chain(20, 0.05), replace_fast(cfg, False)).run()
    sim = Simulator(chain(20, 0.05), cfg)
    sim.initialize()
    sim.advance_to(1)
    assert sim.fast_path is None                 # never before the second tick
    sim.advance_to(3)
    assert sim.fast_path is not None
    logs = sim.run()
    for key in ref:
        np.testing.assert_array_equal(ref[key], logs[key], err_msg=key)


def replace_fast(cfg, fast):
    from dataclasses import replace
    return replace(cfg, fast=fast)


def test_changed_parameters_reuse_the_compiled_code():
    """Parameters are data: plans differing only in values share one code object, and each
    still matches its own interpreter run."""
    def model(k):
        m = Model("gains")
        m.add(Sine("src", 1.0, 0.5), Gain("g", k), UnitDelay("d", initial=k),
              Sum("s", "+-"), Recorder("rec"))
        m.connect("src.out", "g.in")
        m.connect("g.out", "s.in1")
        m.connect("d.out", "s.in2")
        m.connect("s.out", "d.in", "rec.in")
        return m
    fps = [assert_fast_run_bit_identical(lambda: model(k), dt=0.01, t_end=0.5)
           for k in (0.3, 1.7)]
    assert fps[0].source == fps[1].source
    assert fps[0].fn.__code__ is fps[1].fn.__code__


def pi_loop(kp=2.0, ki=1.0, tau=0.5, sample_time=None, swapped=False):
    """A PI loop around a first-order lag (RK4): parameters kp, ki, tau; the integral gain's
    sample time and the error's wiring (``swapped``: plant - reference) change its
    structure."""
    m = Model("pi")
    m.add(Step("ref", step_time=0.1, final=1.0), Sum("e", "+-"), Gain("kp", kp),
          Integrator("ie", 0.0), Gain("ki", ki, sample_time=sample_time), Sum("u", "++"),
          FirstOrderLag("plant", tau=tau, gain=1.0), Gain("meas", 0.9))
    m.connect("ref.out", "e.in2" if swapped else "e.in1")
    m.connect("plant.out", "meas.in", "e.in1" if swapped else "e.in2")
    m.connect("e.out", "kp.in", "ie.in")
    m.connect("ie.out", "ki.in")
    m.connect("kp.out", "u.in1")
    m.connect("ki.out", "u.in2")
    m.connect("u.out", "plant.in")
    return m


@pytest.mark.parametrize("model,values", [
    (lambda v: pi_loop(*v), [(2.0, 1.0, 0.5), (3.5, 0.2, 0.9)]),
    (lambda v: grid(12, v), [0.5, 1.7]),
])
def test_runs_differing_in_parameter_values_reuse_the_emitted_source(small_groups, model,
                                                                    values):
    """A run of a structure seen before takes the source written for it (the same string
    object: not written again), with its own parameter values: each run matches its own
    interpreter run."""
    cfg = dict(dt=0.01, t_end=2.0, solver="RK4")
    fps = [assert_fast_run_bit_identical(lambda v=v: model(v), **cfg) for v in values]
    assert fps[0].source is fps[1].source
    assert fps[0].fn.__code__ is fps[1].fn.__code__



@pytest.mark.parametrize("changed,cfg", [
    (dict(sample_time=0.05), {}),                       # a block's sample time
    (dict(swapped=True), {}),                           # the wiring
    ({}, dict(dt=0.02)),                                # the base step
    ({}, dict(log=["plant.out"])),                      # the log selection
    ({}, dict(solver="SSPRK33")),                       # the solver's tableau
])
def test_a_structural_difference_is_not_served_from_the_cache(changed, cfg):
    """Plans differing in structure (not only in parameter values) each get their own
    source, and each matches its own interpreter run."""
    base = dict(dt=0.01, t_end=2.0, solver="RK4")
    first = assert_fast_run_bit_identical(pi_loop, **base)
    second = assert_fast_run_bit_identical(lambda: pi_loop(**changed), **{**base, **cfg})
    assert first.source != second.source


def test_a_large_plans_fingerprint_kept_as_a_digest_still_tells_structures_apart(monkeypatch):
    """Every plan keyed by the digest of its fingerprint (as large plans are): a change of
    values reuses the source, a change of wiring does not; each run matches its interpreter
    run."""
    from cosim.fastpath import structure
    monkeypatch.setattr(structure, "DIGEST_BLOCKS", 0)
    cfg = dict(dt=0.01, t_end=2.0, solver="RK4")
    first = assert_fast_run_bit_identical(pi_loop, **cfg)
    retuned = assert_fast_run_bit_identical(lambda: pi_loop(kp=0.7, tau=0.25), **cfg)
    rewired = assert_fast_run_bit_identical(lambda: pi_loop(swapped=True), **cfg)
    assert first.source is retuned.source
    assert first.source != rewired.source


@pytest.mark.parametrize("solver,amplification", [
    ("Euler", lambda z: 1.0 + z),
    ("SSPRK22", lambda z: 1.0 + z + z * z / 2.0),
    ("RK4", lambda z: 1.0 + z + z * z / 2.0 + z ** 3 / 6.0 + z ** 4 / 24.0),
])
def test_chunked_whole_vector_combinations_match_the_linear_recurrence(monkeypatch, solver,
                                                                       amplification):
    """Lags of a constant, chunked on the scalar strategy (each Runge–Kutta combination one
    line over the whole vectors): bit-identical to the interpreter, and each lag follows the
    method's closed form for ``tau y' = g u - y`` (``y_n = g u + (y_0 - g u) R(-h/tau)^n``,
    ``R`` the method's stability polynomial) and, to its order, ``exp(-t/tau)``."""
    from cosim.fastpath import emitter
    monkeypatch.setattr(emitter, "CHUNK", 3)
    taus = [0.05 + 0.02 * i for i in range(10)]

    def model():
        m = Model("lags")
        m.add(Constant("u", 0.8))
        for i, tau in enumerate(taus):
            m.add(FirstOrderLag(f"f{i}", tau=tau, gain=1.5, initial=-0.4))
            m.connect("u.out", f"f{i}.in")
        return m
    h, n = 0.01, 100
    fp = assert_fast_run_bit_identical(model, dt=h, t_end=n * h, solver=solver)
    assert not fp.vector and "C[:] = C + h * (" in fp.source
    sim = Simulator(model(), SimulationConfig(dt=h, t_end=n * h, solver=solver))
    logs = sim.run()
    for i, tau in enumerate(taus):
        y = logs[f"f{i}.out"][:, 0]
        k = np.arange(len(y))
        closed = 1.2 + (-0.4 - 1.2) * amplification(-h / tau) ** k
        np.testing.assert_allclose(y, closed, rtol=1e-12, atol=1e-12)
        exact = 1.2 + (-0.4 - 1.2) * np.exp(-k * h / tau)
        order = {"Euler": 1, "SSPRK22": 2, "RK4": 4}[solver]
        assert np.max(np.abs(y - exact)) < 2.0 * (h / tau) ** order
