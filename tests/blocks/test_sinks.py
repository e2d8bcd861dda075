"""Recorder and Terminator."""

from __future__ import annotations

import numpy as np
import pytest

from blocks import Clock, Constant, Recorder, Terminator
from cosim import Model, ModelError, SimulationConfig, Simulator


@pytest.mark.parametrize("fast", [False, True])
def test_recorder_logs_its_inputs_at_its_rate_whatever_config_log_says(fast):
    m = Model("rec")
    m.add(Clock("clk"), Constant("v", [[1.0, 2.0]]), Recorder("one"),
          Recorder("two", 2, sample_time=0.3))
    m.connect("clk.out", "one.in", "two.in1")
    m.connect("v.out", "two.in2")
    logs = Simulator(m, SimulationConfig(dt=0.1, t_end=1.0, log=["clk.out"],
                                         fast=fast)).run()
    assert sorted(logs) == ["clk.out", "one.in", "two.in1", "two.in2"]
    np.testing.assert_array_equal(logs["one.in"][:, 0], np.arange(11) * 0.1)
    np.testing.assert_array_equal(logs.time_of("two.in1"), np.arange(0, 11, 3) * 0.1)
    np.testing.assert_array_equal(logs["two.in1"][:, 0], np.arange(0, 11, 3) * 0.1)
    assert logs["two.in2"].shape == (4, 1, 2)


def test_terminator_consumes_a_signal_and_logs_nothing():
    m = Model("term")
    m.add(Clock("clk"), Terminator("t"))
    m.connect("clk.out", "t.in")
    logs = Simulator(m, SimulationConfig(dt=0.1, t_end=0.5)).run()
    assert sorted(logs) == ["clk.out"]


@pytest.mark.parametrize("n", [0, -1, 1.5, True])
def test_recorder_needs_a_positive_integer_number_of_inputs(n):
    with pytest.raises(ModelError, match=r"Recorder 'r': n_inputs must be an integer"):
        Recorder("r", n)


def test_scope_plots_its_inputs_after_a_run(tmp_path):
    from blocks import Scope, Sine
    from cosim import Model, SimulationConfig, Simulator
    m = Model("scoped")
    png = tmp_path / "scope.png"
    m.add(Sine("s", 1.0, 1.0), Sine("c", 0.5, 1.0, phase=1.0),
          Scope("scope", 2, path=str(png), title="two sines"))
    m.connect("s.out", "scope.in1")
    m.connect("c.out", "scope.in2")
    logs = Simulator(m, SimulationConfig(dt=0.01, t_end=1.0)).run()
    assert png.stat().st_size > 10_000
    assert "scope.in1" in logs and len(logs["scope.in2"]) == 101
