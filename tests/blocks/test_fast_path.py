"""Every block kernel reproduces its block's reference methods bit for bit.

One parametrized test runs each case — a block with given parameters, fed by kernel-capable
sources — under ``SimulationConfig(fast=True)`` and ``fast=False``, and demands bit-identical
logs, and that the fast run really used the generated step function for the block (its
methods were not called in the step loop).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import blocks
from blocks import (PID, Abs, Clock, Constant, DeadZone, Demux, Derivative, DiscreteIntegrator,
                    DiscretePID, DiscreteStateSpace, DiscreteTransferFunction, FirstOrderLag,
                    FromArray, Gain, Integrator, Lookup1D, Lookup2D, MathFunction, MinMax, Mux,
                    Product,
                    Pulse, Ramp, RateLimiter, RateTransition, Recorder, Relay, Saturation, Sine,
                    Square, StateSpace, Step, Sum, Switch, Terminator, TransferFunction,
                    UnitDelay, ZeroOrderHold)
from cosim import Model, SimulationConfig, Simulator

from tests.blocks.support import assert_same_bits, count_calls


def sine(amplitude=1.5, frequency=0.7, phase=0.2, bias=0.0, **kw):
    """A kernel-capable input source (factory taking the block name)."""
    return lambda name: Sine(name, amplitude, frequency, phase, bias, **kw)


def const(value):
    # NaN and infinite sources are meant here (propagation through the kernels).
    return lambda name: Constant(name, value, allow_nonfinite=True)


def case(block, *sources, id):
    """A fast-path case: ``block`` (factory), one source factory per input port, in order."""
    return pytest.param(block, sources, id=id)


SS2 = dict(A=[[0.5, 0.2], [-0.1, 0.3]], B=[[1.0], [0.5]], C=[[1.0, -2.0]])
SS3 = dict(A=[[0.9, 0.1, 0.0], [0.0, 0.5, 0.2], [0.1, 0.0, -0.3]], B=[[1.0], [0.0], [0.4]],
           C=[[0.3, 0.0, 1.1]], D=[[0.25]], x0=[0.1, -0.2, 0.3])

CASES = [
    # sources
    case(lambda: Constant("b", -2.5), id="Constant"),
    case(lambda: Sine("b", 2.0, 1.3, 0.4, -0.1), id="Sine"),
    case(lambda: Step("b", 0.8, -1.0, 2.0), id="Step"),
    case(lambda: Ramp("b", -1.5, 0.45, 0.25), id="Ramp"),
    case(lambda: Pulse("b", 2.0, 0.4, 0.25, 0.3, -1.0), id="Pulse"),
    case(lambda: Square("b", 0.5, 0.3, 0.5, 0.1, 1.0), id="Square"),
    case(lambda: Clock("b"), id="Clock"),
    case(lambda: FromArray("b", [0.1, 0.33, 0.8, 1.7], [1.0, -2.0, 0.5, 3.0]),
         id="FromArray-linear"),
    case(lambda: FromArray("b", [0.1, 0.33, 0.8, 1.7], [1.0, -2.0, 0.5, 3.0], "zoh"),
         id="FromArray-zoh"),
    case(lambda: FromArray("b", [0.1, 0.3, 0.8, 1.7], [1.0, -2.0, 0.5, 3.0], "nearest"),
         id="FromArray-nearest"),
    case(lambda: FromArray("b", [0.5], [4.0]), id="FromArray-single"),
    # math
    case(lambda: Gain("b", -1.7), sine(), id="Gain"),
    case(lambda: Sum("b", "-+-"), sine(), sine(0.3, 2.0), sine(bias=1.0), id="Sum"),
    case(lambda: Product("b", "*/*"), sine(), sine(bias=2.0), sine(0.5, 3.1), id="Product"),
    case(lambda: Product("b", "/"), sine(bias=2.0), id="Product-reciprocal"),
    case(lambda: Abs("b"), sine(), id="Abs"),
    case(lambda: MinMax("b", "max", 3), sine(), sine(0.3, 2.0), sine(0.5, 1.1, bias=0.2),
         id="MinMax-max"),
    case(lambda: MinMax("b", "min"), sine(), sine(0.7, 1.3), id="MinMax-min"),
    case(lambda: MinMax("b", "max", 1), sine(), id="MinMax-one"),
    *[case(lambda f=f: MathFunction("b", f), src, id=f"MathFunction-{f}") for f, src in [
        ("exp", sine()), ("log", sine(bias=2.0)), ("log10", sine(bias=2.0)),
        ("log2", sine(bias=2.0)), ("sqrt", sine(bias=2.0)), ("square", sine()),
        ("reciprocal", sine(bias=2.0)), ("sin", sine()), ("cos", sine()), ("tan", sine()),
        ("asin", sine(0.9)), ("acos", sine(0.9)), ("atan", sine()), ("sinh", sine()),
        ("cosh", sine()), ("tanh", sine())]],
    # nonlinear
    case(lambda: Saturation("b", -0.5, 0.7), sine(), id="Saturation"),
    case(lambda: Saturation("b", None, 0.7), sine(), id="Saturation-upper"),
    case(lambda: Saturation("b", -0.5, None), sine(), id="Saturation-lower"),
    case(lambda: Saturation("b", 0.0, 1.0), const(-0.0), id="Saturation-signed-zero"),
    case(lambda: Saturation("b", -0.0, 0.0), const(0.0), id="Saturation-zero-band"),
    case(lambda: Saturation("b", -1.0, 1.0), const(math.nan), id="Saturation-nan"),
    case(lambda: DeadZone("b", -0.3, 0.4), sine(), id="DeadZone"),
    *[case(lambda c=c: Switch("b", c, 0.25), sine(), sine(0.9, 0.8), sine(bias=1.0),
           id=f"Switch-{c}") for c in (">=", ">", "!=")],
    case(lambda: Switch("b"), sine(), const(0.0), sine(bias=1.0), id="Switch-at-threshold"),
    case(lambda: RateLimiter("b", 1.5, 0.7), sine(1.5, 0.6), id="RateLimiter"),
    case(lambda: RateLimiter("b", 2.0, 3.0, sample_time=0.15), sine(), id="RateLimiter-slow"),
    case(lambda: Relay("b", 0.4, -0.3, 2.0, -1.0), sine(), id="Relay"),
    case(lambda: Relay("b", 0.0, 0.0), sine(bias=0.1), id="Relay-no-hysteresis"),
    case(lambda: DeadZone("b", -0.3, 0.4), const(0.4), id="DeadZone-edge"),
    case(lambda: Lookup1D("b", [-1.0, 0.0, 0.5, 1.2], [2.0, -1.0, -0.0, 0.5]), sine(),
         id="Lookup1D-clip"),
    case(lambda: Lookup1D("b", [-1.0, 0.0, 0.5, 1.2], [2.0, -1.0, 0.0, 0.5], "linear"),
         sine(), id="Lookup1D-linear"),
    case(lambda: Lookup1D("b", [-1.0, 0.0, 0.5], [2.0, -1.0, -0.0]), const(0.5),
         id="Lookup1D-last-breakpoint"),
    case(lambda: Lookup1D("b", [0.0, 1.0], [1.0, 3.0], "linear"), const(math.nan),
         id="Lookup1D-nan"),
    case(lambda: Lookup2D("b", [-1.0, 0.0, 0.5, 1.2], [-2.0, 0.0, 1.0],
                          [[2.0, -1.0, 0.0], [0.5, -0.0, 3.0], [1.0, 1.0, -2.0],
                          [0.25, 4.0, 1.5]]),
         sine(), sine(2.5, 0.3), id="Lookup2D-clip"),
    case(lambda: Lookup2D("b", [-1.0, 0.0, 0.5, 1.2], [-2.0, 0.0, 1.0],
                          [[2.0, -1.0, 0.0], [0.5, -0.0, 3.0], [1.0, 1.0, -2.0],
                          [0.25, 4.0, 1.5]], "linear"),
         sine(), sine(2.5, 0.3), id="Lookup2D-linear"),
    case(lambda: Lookup2D("b", [0.0, 1.0], [0.0, 1.0], [[1.0, 2.0], [3.0, 4.0]]),
         const(math.nan), const(0.5), id="Lookup2D-nan"),
    # routing
    case(lambda: Mux("b", 1), sine(), id="Mux-1"),
    case(lambda: Demux("b", 1), sine(), id="Demux-1"),
    # discrete
    case(lambda: UnitDelay("b", 0.3), sine(), id="UnitDelay"),
    case(lambda: ZeroOrderHold("b", sample_time=0.15), sine(), id="ZeroOrderHold"),
    case(lambda: RateTransition("b", "zoh", sample_time=0.2), sine(), id="RateTransition-zoh"),
    case(lambda: RateTransition("b", "delay", 0.5, sample_time=(0.2, 0.1)), sine(),
         id="RateTransition-delay"),
    *[case(lambda m=m, kw=kw: DiscreteIntegrator("b", 1.3, 0.2, m, **kw), sine(),
           id=f"DiscreteIntegrator-{m}-{tag}")
      for m in ("forward", "backward", "trapezoidal")
      for tag, kw in (("free", {}), ("limited", dict(lower=-0.4, upper=0.6)),
                      ("upper", dict(upper=0.6)), ("slow", dict(sample_time=0.15)))],
    case(lambda: DiscreteStateSpace("b", [[0.8]], [[0.5]], [[2.0]]), sine(), id="DSS-1"),
    case(lambda: DiscreteStateSpace("b", **SS2), sine(), id="DSS-2"),
    case(lambda: DiscreteStateSpace("b", **SS3), sine(), id="DSS-3-feedthrough"),
    case(lambda: DiscreteStateSpace("b", **SS3, sample_time=(0.15, 0.05)), sine(),
         id="DSS-3-offset"),
    case(lambda: DiscreteTransferFunction("b", [1.0, 0.5], [1.0, -0.5, 0.1]), sine(),
         id="DTF-z"),
    case(lambda: DiscreteTransferFunction("b", [0.2, 0.3, 0.1], [1.0, -0.4], "z^-1"), sine(),
         id="DTF-z^-1"),
    case(lambda: DiscreteTransferFunction("b", [3.0], [2.0]), sine(), id="DTF-static"),
    case(lambda: DiscretePID("b", 2.0), sine(), id="PID-P"),
    case(lambda: DiscretePID("b", 0.0, 1.5), sine(), id="PID-I"),
    case(lambda: DiscretePID("b", 1.0, 2.0, 0.1, N=8.0), sine(), id="PID-filtered"),
    case(lambda: DiscretePID("b", 1.0, 2.0, 0.1), sine(), id="PID-unfiltered"),
    case(lambda: DiscretePID("b", 1.0, 4.0, 0.05, N=10.0, lower=-0.8, upper=0.6,
                             anti_windup="clamping"), sine(), id="PID-clamping"),
    case(lambda: DiscretePID("b", 1.0, 4.0, 0.05, N=10.0, lower=-0.8,
                             anti_windup="clamping"), sine(), id="PID-clamping-lower"),
    case(lambda: DiscretePID("b", 1.0, 4.0, 0.0, lower=-0.8, upper=0.6,
                             anti_windup="back_calculation", kb=3.0, initial=0.2), sine(),
         id="PID-back-calculation"),
    case(lambda: DiscretePID("b", 1.0, 4.0, 0.05, N=10.0, lower=-0.8, upper=0.6,
                             sample_time=0.15), sine(), id="PID-slow-limited"),
    # continuous (integrated inline by the fast path with the default SSPRK22)
    case(lambda: Integrator("b", 0.5), sine(), id="Integrator"),
    case(lambda: Integrator("b", 0.1, lower=-0.3, upper=0.4), sine(), id="Integrator-limited"),
    case(lambda: Integrator("b", 0.0, lower=0.0), sine(bias=-0.2), id="Integrator-lower"),
    case(lambda: Integrator("b", 0.0, upper=0.25), sine(bias=0.3), id="Integrator-upper"),
    case(lambda: StateSpace("b", [[0.0, 1.0], [-4.0, -0.4]], [[0.0], [1.0]], [[1.0, 0.5]],
                            [[0.2]], x0=[0.1, 0.0]), sine(), id="StateSpace"),
    case(lambda: TransferFunction("b", [1.0, 2.0], [1.0, 0.8, 4.0]), sine(),
         id="TransferFunction"),
    case(lambda: FirstOrderLag("b", tau=0.3, gain=2.0, initial=0.1), sine(),
         id="FirstOrderLag"),
    case(lambda: PID("b", kp=1.5, ki=2.0, kd=0.1, tf=0.05, lower=-1.0, upper=1.2), sine(),
         id="PID-limited"),
    case(lambda: Derivative("b", tau=0.05), sine(), id="Derivative"),
    # sinks
    case(lambda: Recorder("b", 2, sample_time=0.2), sine(), sine(bias=1.0), id="Recorder"),
    case(lambda: Terminator("b"), sine(), id="Terminator"),
]


def model_of(make_block, sources):
    m = Model("fast_vs_reference")
    block = m.add(make_block())
    required = [p for p in block.input_names if p not in block.optional_inputs]
    assert len(sources) == len(required)
    for i, (port, src) in enumerate(zip(required, sources)):
        m.add(src(f"src{i}"))
        m.connect(f"src{i}.out", f"b.{port}")
    # A base-rate reader of every output, so held values of a slow block are logged too.
    for port in block.output_names:
        m.add(Gain(f"read_{port}", 1.0))
        m.connect(f"b.{port}", f"read_{port}.in")
    return m, block


@pytest.mark.parametrize("make_block, sources", CASES)
def test_fast_path_is_bit_identical_to_reference(make_block, sources):
    runs = {}
    for fast in (False, True):
        m, block = model_of(make_block, sources)
        calls = [count_calls(b) for b in m.blocks]
        sim = Simulator(m, SimulationConfig(dt=0.05, t_end=3.0, fast=fast))
        runs[fast] = (sim.run(), calls, block, m)
    (ref, ref_calls, ref_block, ref_model), (logs, calls, block, _) = runs[False], runs[True]
    # The fast run ran every block of the plan in the generated function: no method calls in
    # its step loop (one output_update at initialize is allowed, for outputs initialize
    # leaves unset), where the reference interpreter calls them every tick.
    assert all(c["state_update"] == 0 and c["output_update"] <= 1 for c in calls), calls
    assert all(c["output_update"] > 1 for b, c in zip(ref_model.blocks, ref_calls)
               if b.output_names), ref_calls
    assert sorted(ref) == sorted(logs)
    for key in ref:
        assert_same_bits(ref[key], logs[key], key)
        np.testing.assert_array_equal(ref.time_of(key), logs.time_of(key))
    for s in ref_block.state:
        assert_same_bits(ref_block.state[s], block.state[s], f"state {s}")


@pytest.mark.parametrize("limits", [{}, dict(lower=-0.2, upper=0.3)], ids=["free", "limited"])
def test_integrator_with_reset_input_is_bit_identical_on_the_fast_path(limits):
    runs = {}
    for fast in (False, True):
        m = Model("reset")
        m.add(Sine("u", 1.5, 0.7, 0.2), Square("r", 1.0, 0.8, 0.3, 0.1, 0.0),
              Integrator("b", 0.1, **limits), Gain("read", 1.0))
        m.connect("u.out", "b.in")
        m.connect("r.out", "b.reset")
        m.connect("b.out", "read.in")
        calls = count_calls(m["b"])
        sim = Simulator(m, SimulationConfig(dt=0.05, t_end=3.0, fast=fast))
        runs[fast] = (sim.run(), calls, sim)
    (ref, _, ref_sim), (logs, calls, sim) = runs[False], runs[True]
    assert sim.fast_path is not None and ref_sim.fast_path is None and calls["state_update"] == 0
    for key in ref:
        assert_same_bits(ref[key], logs[key], key)
    # The reset really fired: one step after each rising edge of r the output is within one
    # step's integral (|u| <= 1.5 over 0.05 s) of the initial value 0.1.
    r, y = ref["r.out"][:, 0], ref["b.out"][:, 0]
    edges = np.flatnonzero((r[:-2] <= 0.0) & (r[1:-1] > 0.0)) + 1
    assert len(edges) >= 2
    assert np.all(np.abs(y[edges + 1] - 0.1) <= 1.5 * 0.05)


#: Blocks that run on the interpreter only, and why.
INTERPRETER_ONLY = {
    "ODE": "calls user Python functions",
    "TransportDelay": "keeps a buffer of past samples (arrays)",
    "Scope": "collects Python lists of samples for its plot",
    "WhiteNoise": "draws from numpy's random generator",
}


def test_every_block_of_the_library_has_a_fast_path_case():
    covered = {type(p.values[0]()).__name__ for p in CASES}
    assert covered == set(blocks.__all__) - set(INTERPRETER_ONLY)


@pytest.mark.parametrize("make_block", [
    lambda: Constant("b", [1.0, 2.0]),
    lambda: Step("b", 1.0, [0.0, 1.0]),
    lambda: Ramp("b", [1.0, 2.0]),
    lambda: FromArray("b", [0.0, 1.0], [[1.0, 2.0], [3.0, 4.0]]),
    lambda: FromArray("b", np.arange(100.0), np.arange(100.0)),
    lambda: Gain("b", [[1.0]]),
    lambda: MathFunction("b", np.exp),
    lambda: Saturation("b", [-1.0], [1.0, 2.0]),
    lambda: Lookup1D("b", np.arange(100.0), np.arange(100.0)),
    lambda: Mux("b", 2),
    lambda: Demux("b", 2),
    lambda: DiscreteIntegrator("b", initial=[0.0, 1.0]),
    lambda: DiscreteIntegrator("b", lower=[-1.0, -2.0], initial=[0.0, 0.0]),
    lambda: DiscreteStateSpace("b", np.eye(9) * 0.5, np.ones((9, 1)), np.ones((1, 9))),
    lambda: DiscreteStateSpace("b", [[0.5]], [[1.0, 1.0]], [[1.0]]),
])
def test_blocks_opt_out_of_the_fast_path_when_not_scalar(make_block):
    """Non-scalar parameters or signals: ``kernel()`` returns None (after initialize) or the
    fast path refuses the plan, and the run falls back to the interpreter."""
    block = make_block()
    m = Model("vector")
    m.add(block)
    for port in block.input_names:
        shape = block.input_shapes.get(port, (2,))
        m.add(Constant(f"src_{port}", np.full(shape, 0.5)))
        m.connect(f"src_{port}.out", f"b.{port}")
    calls = count_calls(block)
    Simulator(m, SimulationConfig(dt=0.1, t_end=0.5)).run()
    assert calls["output_update"] >= 5
