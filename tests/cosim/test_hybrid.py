"""Hybrid simulation: algebraic loops, events, checkpoints and run modes, against oracles."""

import math
import time

import numpy as np
import pytest

from blocks import Constant, Gain, Sine, Sum, UnitDelay
from blocks.continuous import Integrator
from cosim import (CompileError, ConvergenceError, Model, SimulationConfig, Simulator)
from cosim.errors import ModelError
from cosim.model.events import Scheduled, ZeroCrossing


def loop_model(gain=0.5, n_blocks=1):
    """y = u - gain*y, with the loop closed through ``n_blocks`` feedthrough blocks."""
    m = Model("loop")
    m.add(Sine("u", amplitude=1.0, frequency=1.0, bias=0.3), Sum("s", "+-"))
    m.connect("u.out", "s.in1")
    prev = "s.out"
    gains = [gain] + [1.0] * (n_blocks - 1)
    for i, g in enumerate(gains):
        m.add(Gain(f"g{i}", g))
        m.connect(prev, f"g{i}.in")
        prev = f"g{i}.out"
    m.connect(prev, "s.in2")
    return m


@pytest.mark.parametrize("n_blocks", [1, 3])
def test_algebraic_loop_solution(n_blocks):
    sim = Simulator(loop_model(0.5, n_blocks), SimulationConfig(dt=0.01, t_end=1.0,
                                                                tolerance_fpi=1e-13))
    logs = sim.run()
    u = logs["u.out"][:, 0]
    np.testing.assert_allclose(logs["s.out"][:, 0], 2.0 * u / 3.0, rtol=0, atol=1e-12)
    assert sim.stats["loop_iterations"] > 0


def test_loop_solver_disabled_keeps_compile_error():
    with pytest.raises(CompileError, match="algebraic loop: s -> g0 -> s"):
        Simulator(loop_model(), SimulationConfig(dt=0.01, t_end=1.0, loop_solver=False))


def test_strong_loop_solved_by_anderson_or_newton():
    # |gain| > 1: plain fixed-point iteration diverges; acceleration/Newton still solve it.
    logs = Simulator(loop_model(3.0), SimulationConfig(dt=0.1, t_end=1.0)).run()
    np.testing.assert_allclose(logs["s.out"][:, 0], logs["u.out"][:, 0] / 4.0, atol=1e-12)


def test_loop_failure_names_blocks_iterations_and_residual():
    m = Model("bad")
    m.add(Constant("u", 1.0), Sum("s", "++"), Gain("g", 1.0))   # y = 1 + y: no solution
    m.connect("u.out", "s.in1")
    m.connect("s.out", "g.in")
    m.connect("g.out", "s.in2")
    with pytest.raises(ConvergenceError) as exc:
        Simulator(m, SimulationConfig(dt=0.1, t_end=1.0, iterations_max=20)).run()
    err = exc.value
    assert "s -> g -> s" in str(err) and err.iterations >= 20 and err.residual > 0.1


def bouncing_ball(e=0.8, h0=10.0, solver="RK4", dt=0.01):
    m = Model("ball")
    m.add(Constant("g", -9.81), Integrator("v", 0.0), Integrator("x", h0))
    m.connect("g.out", "v.in")
    m.connect("v.out", "x.in")
    m.add_event(ZeroCrossing("impact", "x", direction="falling",
                             reset={"v": lambda v: -e * v}, tol=1e-13))
    return m


def analytic_impacts(e, h0, g, n):
    t = math.sqrt(2 * h0 / g)
    v = g * t
    out = [t]
    for _ in range(n - 1):
        v *= e
        t += 2 * v / g
        out.append(t)
    return np.array(out)


@pytest.mark.parametrize("solver", ["RK4", "RK45"])
def test_bouncing_ball_impact_times(solver):
    sim = Simulator(bouncing_ball(solver=solver), SimulationConfig(dt=0.01, t_end=9.5,
                                                                  solver=solver, rtol=1e-10,
                                                                  atol=1e-12))
    sim.run()
    times = np.array([t for t, name in sim.event_log if name == "impact"])
    expect = analytic_impacts(0.8, 10.0, 9.81, len(times))
    assert len(times) >= 5
    np.testing.assert_allclose(times, expect, rtol=0, atol=1e-9)


def test_scheduled_event_between_ticks_resets_state():
    m = Model("sched")
    m.add(Constant("one", 1.0), Integrator("x", 0.0))
    m.connect("one.out", "x.in")
    m.add_event(Scheduled("zero", times=[0.255], reset={"x": [0.0]}))
    # x(t) = t until 0.255 (between ticks), then 0 again: afterwards x = t - 0.255.
    sim = Simulator(m, SimulationConfig(dt=0.01, t_end=1.0, solver="RK4"))
    logs = sim.run()
    assert sim.event_log == [(pytest.approx(0.255, abs=1e-12), "zero")]
    x = logs["x.out"][:, 0]
    t = logs.time
    np.testing.assert_allclose(x[t > 0.26], t[t > 0.26] - 0.255, atol=1e-12)


def test_event_callback_is_called_with_the_simulator_and_time():
    calls = []
    m = Model("cb")
    m.add(Constant("one", 1.0), Integrator("x", -0.5))
    m.connect("one.out", "x.in")
    m.add_event(ZeroCrossing("cross", "x", direction="rising", tol=1e-12,
                             callback=lambda sim, t: calls.append((sim.plan.name, t))))
    Simulator(m, SimulationConfig(dt=0.01, t_end=1.0)).run()
    assert calls == [("cb", pytest.approx(0.5, abs=1e-11))]


def test_stop_event_ends_run_at_located_time():
    m = Model("stop")
    m.add(Constant("one", 1.0), Integrator("x", -0.5))
    m.connect("one.out", "x.in")
    m.add_event(ZeroCrossing("done", "x", direction="rising", stop=True, tol=1e-12))
    sim = Simulator(m, SimulationConfig(dt=0.01, t_end=2.0))
    logs = sim.run()
    assert sim.event_log == [(pytest.approx(0.5, abs=1e-11), "done")]
    assert sim.t == pytest.approx(0.5, abs=1e-11)
    assert logs.time[-1] <= 0.5


def hybrid_model():
    """Continuous plant, discrete controller at 50 ms, a loop, a delay: everything at once."""
    m = Model("hybrid")
    m.add(Sine("ref", amplitude=1.0, frequency=0.3), Sum("e", "+-"), Gain("kp", 4.0),
          UnitDelay("zoh", sample_time=0.05), Integrator("x", 0.2), Gain("c", -0.7),
          Sum("y", "++"))
    m.connect("ref.out", "e.in1")
    m.connect("x.out", "y.in1")
    m.connect("y.out", "e.in2", "c.in")
    m.connect("c.out", "y.in2")          # y = x - 0.7 y: an algebraic loop
    m.connect("e.out", "kp.in")
    m.connect("kp.out", "zoh.in")
    m.connect("zoh.out", "x.in")
    return m


@pytest.mark.parametrize("solver", ["RK4", "RK45", "ESDIRK32"])
def test_checkpoint_continue_is_bit_identical(tmp_path, solver):
    cfg = SimulationConfig(dt=0.01, t_end=2.0, solver=solver)
    ref = Simulator(hybrid_model(), cfg).run()
    sim = Simulator(hybrid_model(), cfg)
    sim.run(t_end=0.83)
    sim.save_checkpoint(tmp_path / "cp")
    assert [p.name for p in tmp_path.iterdir()] == ["cp.npz"]        # one file
    other = Simulator(hybrid_model(), cfg)
    other.load_checkpoint(tmp_path / "cp")
    logs = other.run()
    assert sorted(logs) == sorted(ref)
    for key in ref:                     # from t0: the checkpoint carries the logs before it
        np.testing.assert_array_equal(ref.time_of(key), logs.time_of(key), err_msg=key)
        np.testing.assert_array_equal(ref[key], logs[key], err_msg=key)


def test_checkpoint_of_fast_discrete_run(tmp_path):
    def model():
        m = Model("disc")
        m.add(Sine("s"), Gain("g", 0.9), Sum("a", "++"), UnitDelay("d", sample_time=0.03))
        m.connect("s.out", "a.in1")
        m.connect("d.out", "g.in")
        m.connect("g.out", "a.in2")
        m.connect("a.out", "d.in")
        return m
    cfg = SimulationConfig(dt=0.01, t_end=1.0)
    ref = Simulator(model(), cfg).run()
    sim = Simulator(model(), cfg)
    sim.run(t_end=0.5)
    assert sim.fast_path is not None
    sim.save_checkpoint(tmp_path / "d")
    other = Simulator(model(), cfg)
    other.load_checkpoint(tmp_path / "d.json")
    logs = other.run()
    for key in ref:
        np.testing.assert_array_equal(ref[key], logs[key], err_msg=key)


def test_checkpoint_of_other_model_refused(tmp_path):
    cfg = SimulationConfig(dt=0.01, t_end=1.0)
    sim = Simulator(hybrid_model(), cfg)
    sim.run(t_end=0.1)
    sim.save_checkpoint(tmp_path / "cp")
    with pytest.raises(ModelError, match="is of another model"):
        Simulator(loop_model(), cfg).load_checkpoint(tmp_path / "cp")


def test_run_streaming_and_realtime():
    m = Model("rt")
    m.add(Constant("one", 1.0), Integrator("x", 0.0))
    m.connect("one.out", "x.in")
    sim = Simulator(m, SimulationConfig(dt=0.001, t_end=1.0))
    values = list(sim.run_streaming(tickrate=50, callback=lambda s: s.t))
    assert values and values[-1] == pytest.approx(1.0)
    sim = Simulator(m, SimulationConfig(dt=0.001, t_end=0.3))
    start = time.perf_counter()
    ts = list(sim.run_realtime(speed=1.0, tickrate=20))
    wall = time.perf_counter() - start
    assert ts[-1] == pytest.approx(0.3)
    # Paced to the wall clock: never faster than real time (a loaded machine may be slower).
    assert 0.27 <= wall <= 5.0
