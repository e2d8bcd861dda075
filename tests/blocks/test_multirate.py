"""ZeroOrderHold and RateTransition between a fast and a slow task behave as documented, in
the reference interpreter and the fast path alike.

Base step 0.1 s (the fast task), slow task 0.4 s (every 4th tick).
"""

from __future__ import annotations

import numpy as np
import pytest

from blocks import (Clock, DiscreteIntegrator, Gain, RateTransition, Recorder, Sum,
                    ZeroOrderHold)
from cosim import CompileError, Model, SimulationConfig, Simulator

from tests.blocks.support import assert_same_bits, count_calls

DT, SLOW, T_END = 0.1, 0.4, 2.0
K = np.arange(21)                       # ticks 0 .. 20
FAST_T = K * DT


def run(m, fast):
    calls = [count_calls(b) for b in m.blocks]
    logs = Simulator(m, SimulationConfig(dt=DT, t_end=T_END, fast=fast)).run()
    ran_fast = all(c["output_update"] <= 1 and c["state_update"] == 0 for c in calls)
    assert ran_fast is fast
    return logs


def both(make_model):
    """Logs of the reference interpreter, after checking the fast path gives the same bits."""
    ref, fast = run(make_model(), False), run(make_model(), True)
    for key in ref:
        assert_same_bits(ref[key], fast[key], key)
    return ref


def fast_to_slow(hold):
    """A base-rate clock sampled by ``hold`` at the slow rate, read back at the base rate."""
    m = Model("fast_to_slow")
    m.add(Clock("clk"), hold, Gain("reader", 1.0))
    m.connect("clk.out", "h.in")
    m.connect("h.out", "reader.in")
    return m


@pytest.mark.parametrize("make_hold", [lambda: ZeroOrderHold("h", sample_time=SLOW),
                                       lambda: RateTransition("h", "zoh", sample_time=SLOW)])
def test_hold_from_fast_to_slow_samples_at_the_slow_hit_itself(make_hold):
    logs = both(lambda: fast_to_slow(make_hold()))
    # Logged at the slow rate: the input's value at that same hit (direct feedthrough).
    np.testing.assert_array_equal(logs.time_of("h.out"), FAST_T[::4])
    np.testing.assert_array_equal(logs["h.out"][:, 0], FAST_T[::4])
    # A base-rate reader sees it held for the whole slow period.
    np.testing.assert_array_equal(logs["reader.out"][:, 0], FAST_T[K // 4 * 4])


def test_hold_with_an_offset_starts_at_its_first_hit():
    logs = both(lambda: fast_to_slow(ZeroOrderHold("h", sample_time=(SLOW, 0.1))))
    hits = (K - 1) // 4 * 4 + 1                 # last hit at or before each tick
    # Before the first hit (tick 1) the output is the input at t0 (set at initialize).
    expected = np.where(K < 1, 0.0, FAST_T[np.maximum(hits, 0)])
    np.testing.assert_array_equal(logs["reader.out"][:, 0], expected)


def test_rate_transition_delay_from_slow_to_fast_lags_one_slow_period():
    def model():
        m = Model("slow_to_fast")
        m.add(Clock("clk", sample_time=SLOW), RateTransition("rt", "delay", -1.0,
                                                             sample_time=SLOW),
              Gain("reader", 1.0))
        m.connect("clk.out", "rt.in")
        m.connect("rt.out", "reader.in")
        return m

    logs = both(model)
    j = K // 4                                  # slow period of each fast tick
    expected = np.where(j == 0, -1.0, SLOW * (j - 1))
    np.testing.assert_allclose(logs["reader.out"][:, 0], expected, rtol=1e-15)


def test_slow_blocks_get_their_own_period_as_dt():
    """A slow integrator behind a fast-to-slow transition integrates with T = 0.4 s."""
    def model():
        m = Model("slow_integrator")
        m.add(Clock("clk"), RateTransition("rt", "zoh", sample_time=SLOW),
              DiscreteIntegrator("i", 1.0, 0.0, "forward", sample_time=SLOW), Recorder("rec"))
        m.connect("clk.out", "rt.in")
        m.connect("rt.out", "i.in")
        m.connect("i.out", "rec.in")
        return m

    logs = both(model)
    slow_t = FAST_T[::4]
    np.testing.assert_allclose(logs["i.out"][:, 0],
                               SLOW * np.concatenate([[0.0], np.cumsum(slow_t)[:-1]]),
                               rtol=1e-14)
    # The base-rate recorder sees the slow output held.
    assert len(logs["rec.in"]) == len(K)


@pytest.mark.parametrize("mode, loop", [("zoh", True), ("delay", False)])
def test_only_the_delay_mode_breaks_a_feedback_loop(mode, loop):
    m = Model("feedback")
    m.add(Clock("clk"), Sum("s", "+-"), RateTransition("rt", mode, sample_time=SLOW))
    m.connect("clk.out", "s.in1")
    m.connect("s.out", "rt.in")
    m.connect("rt.out", "s.in2")
    if loop:
        with pytest.raises(CompileError, match="algebraic loop"):
            Simulator(m, SimulationConfig(dt=DT, t_end=T_END))
    else:
        logs = Simulator(m, SimulationConfig(dt=DT, t_end=T_END)).run()
        # s[k] = t[k] - s[4*(j-1)] with j = k // 4 (0 while j == 0): a deterministic
        # difference equation, no loop to solve.
        held, sampled, expected = 0.0, 0.0, []
        for k in K:
            if k % 4 == 0:
                held = sampled          # the output at a slow hit: the previous hit's sample
            s = FAST_T[k] - held
            if k % 4 == 0:
                sampled = s             # the state update at a slow hit samples the input
            expected.append(s)
        np.testing.assert_allclose(logs["s.out"][:, 0], expected, rtol=1e-15)
