"""The generated fast path is bit-identical to the reference interpreter."""

import numpy as np
import pytest

from blocks import (Constant, DiscreteIntegrator, DiscretePID, DiscreteStateSpace, FirstOrderLag,
                    Gain, Integrator, Lookup1D, MathFunction, Recorder, Relay, Saturation, Sine,
                    StateSpace, Step, Sum, UnitDelay)
from cosim import Block, Model, SimulationConfig, Simulator


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


def grid(n):
    """n copies of a cell of mixed blocks: groups of identical templates with parameters,
    continuous and multirate members, non-contiguous slots, and math calls (singletons)."""
    m = Model("grid")
    m.add(Sine("src", 1.0, 0.7, 0.1))
    for i in range(n):
        m.add(Gain(f"g{i}", 0.5), Integrator(f"I{i}", 0.1 * i), Step(f"st{i}", 0.3, 0.0, 1.0),
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


@pytest.mark.parametrize("n,solver,vector", [(3, "RK4", False), (12, "RK4", True),
                                             (20, "Euler", True), (30, "SSPRK33", True)])
def test_vector_strategy_bit_identical_to_interpreter(n, solver, vector):
    fp = assert_fast_run_bit_identical(lambda: grid(n), dt=0.01, t_end=2.0, solver=solver)
    assert fp.vector is vector


@pytest.mark.parametrize("make", [
    lambda name: Saturation(name, -0.5, 0.7),
    lambda name: Relay(name, 0.4, -0.3, 2.0, -1.0),
    lambda name: Lookup1D(name, [-1.0, 0.0, 0.5, 1.2], [2.0, -1.0, -0.0, 0.5], "linear"),
    lambda name: DiscretePID(name, 1.0, 4.0, 0.05, N=10.0, lower=-0.8, upper=0.6,
                             anti_windup="clamping"),
    lambda name: Integrator(name, 0.1, lower=-0.3, upper=0.4),
], ids=["Saturation", "Relay", "Lookup1D", "DiscretePID-clamping", "Integrator-limited"])
def test_templates_that_test_their_values_run_member_by_member(make):
    """A truth test on a member's value (a comparison, ``min``/``max``, a conditional) has no
    elementwise numpy form: many such blocks side by side still run, bit-identically."""
    assert_fast_run_bit_identical(lambda: bank(make), dt=0.05, t_end=3.0)
