"""The generated fast path is bit-identical to the reference interpreter."""

import numpy as np
import pytest

from blocks import Constant, Gain, Recorder, Sine, Sum, UnitDelay
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
