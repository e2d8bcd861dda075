"""The reference interpreter: life cycle, multirate scheduling, logs, errors."""

import subprocess
import sys

import numpy as np
import pytest

from blocks import Constant, Gain, Recorder, Sine, Sum, UnitDelay
from cosim import (Block, Logs, Model, SimulationConfig, SimulationError, Simulator)
from cosim.model.block import as_signal


class Counter(Block):
    """Counts its own sample hits and notes the times it ran (activation probe)."""

    input_ports = ()
    direct_feedthrough = False

    def initialize(self, t0):
        self.state["n"] = as_signal(0.0)
        self.hits = []

    def output_update(self, t, dt):
        self.outputs["out"] = self.state["n"]

    def state_update(self, t, dt):
        self.hits.append(round(t * 1000))
        self.next_state["n"] = self.state["n"] + 1.0


def activation_model():
    m = Model("multirate")
    m.add(Counter("fast"), Counter("slow", sample_time=0.05), Gain("held", 1.0))
    m.connect("slow.out", "held.in")
    return m


@pytest.mark.parametrize("fast", [False, True])
def test_pysimblocks_activation_table(fast):
    """dt = 10 ms, fast task 10 ms, slow task 50 ms: the table of the pySimBlocks docs."""
    m = activation_model()
    sim = Simulator(m, SimulationConfig(dt=0.01, t_end=0.1, fast=fast))
    logs = sim.run()
    assert m["fast"].hits == [0, 10, 20, 30, 40, 50, 60, 70, 80, 90]
    assert m["slow"].hits == [0, 50]
    # The slow task is logged at its own rate ...
    np.testing.assert_array_equal(logs.time_of("slow.out"), [0.0, 0.05, 0.1])
    np.testing.assert_array_equal(logs["slow.out"][:, 0], [0, 1, 2])
    # ... and a base-rate reader sees its output held between hits.
    np.testing.assert_array_equal(logs["held.out"][:, 0], [0] * 5 + [1] * 5 + [2])
    np.testing.assert_array_equal(logs["fast.out"][:, 0], np.arange(11))


def test_time_is_integer_ticks_not_accumulated():
    m = Model("t")
    m.add(Constant("c", 1.0))
    logs = Simulator(m, SimulationConfig(dt=0.1, t_end=103.0, t0=3.0)).run()
    np.testing.assert_array_equal(logs.time, 3.0 + np.arange(1001) * 0.1)


def demo_model():
    m = Model("demo")
    m.add(Sine("src", amplitude=1.0, frequency=0.5), Gain("g", 2.0),
          UnitDelay("d", initial=0.5, sample_time=0.05), Sum("s", "+-"), Recorder("rec"))
    m.connect("src.out", "g.in", "d.in")
    m.connect("g.out", "s.in1")
    m.connect("d.out", "s.in2")
    m.connect("s.out", "rec.in")
    return m


def test_public_api_example_matches_analytic_values():
    logs = Simulator(demo_model(), SimulationConfig(dt=0.01, t_end=1.0)).run()
    t = logs.time
    np.testing.assert_allclose(logs["g.out"][:, 0], 2 * np.sin(np.pi * t), rtol=0, atol=1e-15)
    assert logs["g.out"].shape == (101, 1)
    td = logs.time_of("d.out")
    expect = np.concatenate([[0.5], np.sin(np.pi * td[:-1])])
    np.testing.assert_allclose(logs["d.out"][:, 0], expect, atol=1e-15)
    assert "rec.in" in logs


@pytest.mark.parametrize("fast", [False, True])
def test_manual_stepping_equals_run(fast):
    cfg = SimulationConfig(dt=0.01, t_end=0.5, fast=fast)
    ref = Simulator(demo_model(), cfg).run()
    m = demo_model()
    sim = Simulator(m, cfg)
    sim.initialize()
    outs = []
    for _ in range(50):
        sim.step()
        outs.append(m["d"].outputs["out"][0])
    logs = sim.run()
    for key in ref:
        np.testing.assert_array_equal(ref[key], logs[key])
    assert sim.t == pytest.approx(0.5)


def test_run_continues_without_duplicate_samples():
    cfg = SimulationConfig(dt=0.01, t_end=1.0)
    ref = Simulator(demo_model(), cfg).run()
    sim = Simulator(demo_model(), cfg)
    sim.run(t_end=0.37)
    logs = sim.run(t_end=1.0)
    for key in ref:
        np.testing.assert_array_equal(ref[key], logs[key])
        np.testing.assert_array_equal(ref.time_of(key), logs.time_of(key))


def test_log_narrowed_by_config_and_npz_round_trip(tmp_path):
    logs = Simulator(demo_model(), SimulationConfig(dt=0.01, t_end=1.0, log=["g.out"])).run()
    assert sorted(logs) == ["g.out", "rec.in"]
    logs.to_npz(tmp_path / "r.npz")
    back = Logs.from_npz(tmp_path / "r.npz")
    assert sorted(back) == sorted(logs)
    np.testing.assert_array_equal(back["g.out"], logs["g.out"])
    np.testing.assert_array_equal(back.time_of("rec.in"), logs.time_of("rec.in"))


class Boom(Block):
    def output_update(self, t, dt):
        if t > 0.25:
            raise ValueError("negative pressure")
        self.outputs["out"] = self.inputs["in"]


def test_block_error_names_block_and_time():
    m = Model("boom")
    m.add(Constant("c"), Boom("b"))
    m.connect("c.out", "b.in")
    with pytest.raises(SimulationError) as exc:
        Simulator(m, SimulationConfig(dt=0.1, t_end=1.0)).run()
    assert exc.value.block == "b" and exc.value.t == pytest.approx(0.3)
    assert "negative pressure" in str(exc.value) and "'b'" in str(exc.value)


class BadInit(Block):
    def initialize(self, t0):
        raise RuntimeError("no calibration file")

    def output_update(self, t, dt):
        pass


def test_initialize_error_reraised_with_block_name():
    m = Model("bad")
    m.add(Constant("c"), BadInit("calib"))
    m.connect("c.out", "calib.in")
    with pytest.raises(SimulationError, match=r"block 'calib'.*no calibration file"):
        Simulator(m, SimulationConfig(dt=0.1, t_end=1.0)).run()


class Optional(Block):
    def __init__(self, name):
        super().__init__(name, inputs=("in", "reset"))
        self.optional_inputs = frozenset({"reset"})

    def output_update(self, t, dt):
        self.outputs["out"] = self.inputs["in"] + self.inputs["reset"]


def test_reading_unconnected_input_names_block_port():
    m = Model("opt")
    m.add(Constant("c"), Optional("o"))
    m.connect("c.out", "o.in")
    with pytest.raises(SimulationError, match=r"input o\.reset is not connected"):
        Simulator(m, SimulationConfig(dt=0.1, t_end=1.0)).run()


def test_shape_mismatch_names_both_ends():
    m = Model("shapes")
    m.add(Constant("c", [1.0, 2.0, 3.0]), Gain("g", np.ones((2, 2))))
    m.connect("c.out", "g.in")
    with pytest.raises(SimulationError, match=r"c\.out \(shape \(3,\)\) -> g\.in \(expects shape \(2,\)\)"):
        Simulator(m, SimulationConfig(dt=0.1, t_end=1.0)).run()


def test_non_float_output_rejected_at_initialize():
    class Ints(Block):
        input_ports = ()

        def output_update(self, t, dt):
            self.outputs["out"] = np.array([1])

    m = Model("ints")
    m.add(Ints("i"))
    with pytest.raises(SimulationError, match=r"output i\.out must be a float64"):
        Simulator(m, SimulationConfig(dt=0.1, t_end=1.0)).run()


def test_vector_signals_and_matrix_gain():
    m = Model("vec")
    m.add(Constant("c", [1.0, 2.0]), Gain("g", [[0.0, 1.0], [2.0, 0.0]]))
    m.connect("c.out", "g.in")
    logs = Simulator(m, SimulationConfig(dt=0.1, t_end=0.2)).run()
    np.testing.assert_array_equal(logs["g.out"], [[2.0, 2.0]] * 3)


def test_import_cosim_stays_light():
    code = "import sys, cosim, blocks; print(any(m in sys.modules for m in ('ray', 'zmq')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_giving_free_heap_memory_back_is_harmless():
    """``heap.trim`` returns the C allocator's free memory (glibc) or does nothing, without
    raising, however often it is called."""
    from cosim.run import heap
    heap.trim()
    heap.trim()
