"""Every run mode on every run: streaming, real time, manual stepping and ``run(duration=...)``
on a co-simulation (per macro step) as on a monolithic simulation (per tick).

The oracle is the plain ``run()`` of the same model and configuration: a run taken in any
other mode logs the same samples at the same times, bit for bit.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from cosim import CosimConfig, ModelError, SimulationConfig, Simulator, simulation
from cosim.master.records import StepStatus
from tests.cluster import scenarios

KINDS = {
    "fixed": CosimConfig(H=0.02, extrapolation=1),                      # compiled exchange
    "adaptive": CosimConfig(H=0.2, adaptive=True, extrapolation=1, rtol=1e-2, atol=1e-3,
                            H_max=0.2),
}


def config(kind: str | None, t_end: float = 1.0) -> SimulationConfig:
    return SimulationConfig(dt=0.002, t_end=t_end, solver="RK4",
                            cosim=None if kind is None else KINDS[kind])


def model(kind: str | None):
    # The monolithic reference is the same diagram with virtual subsystems.
    return scenarios.three_units(atomic=kind is not None, solvers=None)


def run_of(kind, t_end=1.0):
    sim = simulation(model(kind), config(kind, t_end))
    return sim, sim.run()


def assert_same_logs(got: dict, ref):
    """``got`` (key -> (time, values)) is ``ref``'s logs bit for bit."""
    assert set(got) == set(ref)
    for key in ref:
        t, v = got[key]
        assert np.array_equal(t, ref.time_of(key)), key
        assert np.array_equal(v, ref[key]), key


def as_dict(logs) -> dict:
    return {key: (logs.time_of(key), logs[key]) for key in logs}


def joined(chunks: list[dict]) -> dict:
    """Chunks of ``logs_since`` put together."""
    out = {}
    for chunk in chunks:
        for key, (t, v) in chunk.items():
            ts, vs = out.setdefault(key, ([], []))
            ts.append(t)
            vs.append(v)
    return {key: (np.concatenate(ts), np.concatenate(vs)) for key, (ts, vs) in out.items()}


@pytest.mark.parametrize("kind", [None, "fixed", "adaptive"])
def test_streamed_chunks_are_the_run(kind):
    _, ref = run_of(kind)
    sim = simulation(model(kind), config(kind))
    marks: dict = {}
    chunks = list(sim.run_streaming(tickrate=1e6, callback=lambda s: s.logs_since(marks)))
    # Streaming yields as it goes (more than once), and the last chunk holds the end point.
    assert len(chunks) > 1
    assert_same_logs(joined(chunks), ref)
    assert_same_logs(as_dict(sim.logs), ref)


@pytest.mark.parametrize("kind", [None, "fixed", "adaptive"])
def test_real_time_is_paced_and_is_the_run(kind):
    _, ref = run_of(kind, t_end=0.5)
    sim = simulation(model(kind), config(kind, t_end=0.5))
    speed = 5.0
    start = time.perf_counter()
    times = list(sim.run_realtime(speed=speed, tickrate=40))
    wall = time.perf_counter() - start
    # Never ahead of the wall clock (a loaded machine may be slower: no upper bound).
    assert wall >= 0.5 / speed - 0.01
    assert times[-1] == pytest.approx(0.5, abs=1e-12)
    assert times == sorted(times) and len(times) > 1
    assert_same_logs(as_dict(sim.logs), ref)


@pytest.mark.parametrize("kind", ["fixed", "adaptive"])
def test_manual_steps_are_the_macro_steps_of_the_run(kind):
    ref_sim, ref = run_of(kind)
    ends = [r.t + r.H for r in ref_sim.step_log if r.status is StepStatus.ACCEPTED]
    sim = simulation(model(kind), config(kind))
    sim.initialize()
    for T in ends:
        H = sim.step()
        assert sim.t == pytest.approx(T, abs=1e-12) and H > 0
        # The logs hold every sample before the new macro time, as the run's do.
        logs = sim.logs
        for key in ("b/x.out", "a/x.out"):
            n = len(logs.time_of(key))
            assert logs.time_of(key)[-1] < sim.t
            assert np.array_equal(logs[key], ref[key][:n])
    assert_same_logs(as_dict(sim.run()), ref)      # at the end: logs the end point only
    assert sim.stats == ref_sim.stats


def test_monolithic_manual_steps_are_the_run():
    _, ref = run_of(None, t_end=0.2)
    sim = Simulator(model(None), config(None, t_end=0.2))
    sim.initialize()
    while sim.t < 0.2 - 1e-12:
        sim.step()
    assert_same_logs(as_dict(sim.run()), ref)


@pytest.mark.parametrize("kind", [None, "fixed", "adaptive"])
def test_run_for_a_duration_continues_the_run(kind):
    _, ref = run_of(kind)
    sim = simulation(model(kind), config(kind))
    sim.run(duration=0.31)
    assert sim.t == pytest.approx(0.31, abs=1e-12)
    sim.run(duration=0.4)
    assert sim.t == pytest.approx(0.71, abs=1e-12)
    assert_same_logs(as_dict(sim.run()), ref)
    with pytest.raises(ModelError, match="duration or t_end"):
        sim.run(duration=0.1, t_end=2.0)


@pytest.mark.parametrize("kind", [None, "fixed", "adaptive"])
def test_streaming_for_a_duration_continues_as_the_run(kind):
    _, ref = run_of(kind)
    sim = simulation(model(kind), config(kind))
    times = list(sim.run_streaming(duration=0.47, tickrate=1e6))
    assert times[-1] == pytest.approx(0.47, abs=1e-12) == sim.t
    assert sim.logs.time_of("b/x.out")[-1] == pytest.approx(0.47, abs=1e-12)
    assert_same_logs(as_dict(sim.run()), ref)


@pytest.mark.parametrize("kind", [None, "fixed", "adaptive"])
def test_a_stopped_paced_run_continues_as_the_run(kind):
    _, ref = run_of(kind)
    sim = simulation(model(kind), config(kind))
    seen = []

    def stop_after_three(s):
        seen.append(s.t)
        if len(seen) == 3:
            s.stop()
        return s.t

    times = list(sim.run_streaming(tickrate=1e4, callback=stop_after_three))
    assert len(times) == 3 and sim.t < 1.0
    assert_same_logs(as_dict(sim.run()), ref)


def test_cosim_realtime_refuses_a_speed_that_is_not_positive():
    sim = simulation(model("fixed"), config("fixed"))
    with pytest.raises(ModelError, match="speed must be > 0"):
        next(sim.run_realtime(speed=0.0))
