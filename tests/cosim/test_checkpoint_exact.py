"""Checkpoints keep their promise: a run stopped and continued, in the same simulator or from a
checkpoint loaded into a fresh one, is the run that never stopped, bit for bit.

The oracle is always the uninterrupted run of the same model and configuration (compared
with ``np.array_equal``, time vectors included), for every solver of ``cosim.solvers.SOLVERS``
on a stiff Van der Pol oscillator, and for co-simulations with a fixed macro step (compiled
and protocol exchange) and an adaptive one, stopped at times that are not macro points.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from blocks import Constant, Gain, MathFunction, Product, Sum
from blocks.continuous import Integrator
from cosim import CosimConfig, Model, SimulationConfig, Simulator, simulation
from cosim.master.records import StepStatus
from cosim.solvers import RK4, SOLVERS
from tests.cluster import scenarios
from tests.cosim.test_hybrid import bouncing_ball

MU = 10.0
T_END = 20.0          # one relaxation cycle and more: the slow drift and the fast jumps


def vanderpol() -> Model:
    """x1' = x2, x2' = mu (1 - x1^2) x2 - x1, x(0) = (2, 0), as a block diagram."""
    m = Model("vdp")
    m.add(Integrator("x1", 2.0), Integrator("x2", 0.0), MathFunction("sq", "square"),
          Constant("one", 1.0), Sum("d", "+-"), Product("p", "**"), Gain("mu", MU),
          Sum("acc", "+-"))
    m.connect("x2.out", "x1.in", "p.in2")
    m.connect("x1.out", "sq.in", "acc.in2")
    m.connect("one.out", "d.in1")
    m.connect("sq.out", "d.in2")
    m.connect("d.out", "p.in1")
    m.connect("p.out", "mu.in")
    m.connect("mu.out", "acc.in1")
    m.connect("acc.out", "x2.in")
    return m


def vdp_config(name: str) -> SimulationConfig:
    # Adaptive solvers step between sample hits 50 ms apart; fixed steps of 10 ms keep the
    # explicit methods stable on this stiffness.
    return SimulationConfig(dt=0.05 if SOLVERS[name].adaptive else 0.01, t_end=T_END,
                            solver=name)


def assert_same_logs(got, ref):
    """``got`` is ``ref`` bit for bit (a run resumed from a checkpoint has the logs from t0:
    the checkpoint carries those before it)."""
    assert set(got) == set(ref)
    assert np.array_equal(got.time, ref.time)
    for key in ref:
        t_ref, v_ref = ref.time_of(key), ref[key]
        assert np.array_equal(got.time_of(key), t_ref), key
        assert np.array_equal(got[key], v_ref), key


def test_the_model_is_van_der_pol():
    """The diagram against scipy's Radau on the same equations (outside oracle)."""
    logs = Simulator(vanderpol(), vdp_config("Radau")).run()
    ref = solve_ivp(lambda t, x: [x[1], MU * (1 - x[0] ** 2) * x[1] - x[0]], (0, T_END),
                    [2.0, 0.0], method="LSODA", rtol=1e-10, atol=1e-12,
                    t_eval=logs.time_of("x1.out"))
    np.testing.assert_allclose(logs["x1.out"][:, 0], ref.y[0], atol=1e-4)


# ---------------------------------------------------------------------- monolithic, per solver

@pytest.mark.parametrize("name", list(SOLVERS))
def test_resume_from_a_checkpoint_is_the_uninterrupted_run(tmp_path, name):
    cfg = vdp_config(name)
    ref = Simulator(vanderpol(), cfg).run()
    sim = Simulator(vanderpol(), cfg)
    sim.run(t_end=T_END / 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # every built-in solver resumes exactly
        sim.save_checkpoint(tmp_path / "cp")
        other = Simulator(vanderpol(), cfg)
        other.load_checkpoint(tmp_path / "cp")
    logs = other.run()
    assert other.solver_stats["naccept"] > sim.solver_stats["naccept"] > 0
    assert_same_logs(logs, ref)
    # The stiff phase was crossed after the stop: the check compares real work.
    assert np.ptp(logs["x2.out"]) > 10.0


@pytest.mark.parametrize("name", list(SOLVERS))
def test_stop_and_continue_is_the_uninterrupted_run(name):
    cfg = vdp_config(name)
    ref = Simulator(vanderpol(), cfg).run()
    sim = Simulator(vanderpol(), cfg)
    sim.run(t_end=T_END / 2)
    assert sim.t == T_END / 2
    assert_same_logs(sim.run(), ref)


@pytest.mark.parametrize("name", list(SOLVERS))
def test_resume_with_events_is_the_uninterrupted_run(tmp_path, name):
    """A bouncing ball stopped between impacts: the event detector's memory and the event log
    travel with the checkpoint; the impacts after it are located as if it never stopped."""
    cfg = SimulationConfig(dt=0.01, t_end=6.0, solver=name)
    uninterrupted = Simulator(bouncing_ball(), cfg)
    ref = uninterrupted.run()
    sim = Simulator(bouncing_ball(), cfg)
    sim.run(t_end=2.5)
    assert 0 < len(sim.event_log) < len(uninterrupted.event_log)
    sim.save_checkpoint(tmp_path / "cp")
    other = Simulator(bouncing_ball(), cfg)
    other.load_checkpoint(tmp_path / "cp")
    assert_same_logs(other.run(), ref)
    assert other.event_log == uninterrupted.event_log
    assert_same_logs(sim.run(), ref)
    assert sim.event_log == uninterrupted.event_log


def test_a_solver_that_cannot_resume_exactly_is_named_when_saving(tmp_path, monkeypatch):
    class ForgetfulRK4(RK4):
        name = "ForgetfulRK4"
        checkpoint_exact = False

    monkeypatch.setitem(SOLVERS, "ForgetfulRK4", ForgetfulRK4)
    sim = Simulator(vanderpol(), SimulationConfig(dt=0.01, t_end=1.0, solver="ForgetfulRK4"))
    sim.run(t_end=0.5)
    with pytest.warns(RuntimeWarning, match="ForgetfulRK4.*not bit for bit"):
        sim.save_checkpoint(tmp_path / "cp")
    # Saved all the same: the run resumes (to the solver's own accuracy).
    other = Simulator(vanderpol(), SimulationConfig(dt=0.01, t_end=1.0, solver="ForgetfulRK4"))
    other.load_checkpoint(tmp_path / "cp")
    assert other.t == 0.5


# ---------------------------------------------------------------------- co-simulation

ADAPTIVE = CosimConfig(H=0.2, adaptive=True, extrapolation=1, rtol=1e-2, atol=1e-3, H_max=0.2)
KINDS = ("adaptive", "adaptive-scipy-units", "fixed-compiled", "fixed-protocol")


def cosim_config(kind: str) -> SimulationConfig:
    cosim = {
        # Loose tolerances: the macro step varies (0.002 .. 0.2 s) and is rejected at times.
        "adaptive": ADAPTIVE,
        # Units on BDF and LSODA: rejected macro steps and provisional steps roll them back.
        "adaptive-scipy-units": ADAPTIVE,
        "fixed-compiled": CosimConfig(H=0.03, extrapolation=2, scheme="gauss-seidel"),
        "fixed-protocol": CosimConfig(H=0.03, extrapolation=2, scheme="gauss-seidel",
                                      compiled=False),
    }[kind]
    return SimulationConfig(dt=0.002, t_end=1.0, solver="RK4", cosim=cosim)


def three_units(kind: str):
    return scenarios.three_units(solvers=("BDF", "LSODA") if "scipy" in kind else None)


def macro_points(sim) -> list[float]:
    return [r.t + r.H for r in sim.step_log if r.status is StepStatus.ACCEPTED]


def records(sim) -> list[tuple]:
    return [(r.t, r.H, r.status, r.iterations, r.coupling_error) for r in sim.step_log]


STOPS = (0.35, 0.47, 0.77)        # none is a macro point of the runs below


@pytest.fixture(scope="module")
def uninterrupted():
    """kind -> (logs, step records, stats, macro points) of the run that never stops."""
    out = {}
    for kind in KINDS:
        sim = simulation(three_units(kind), cosim_config(kind))
        logs = sim.run()
        out[kind] = (logs, records(sim), dict(sim.stats), macro_points(sim))
        sim.close()
    return out


@pytest.mark.parametrize("kind", KINDS)
def test_cosim_stop_and_continue_is_the_uninterrupted_run(uninterrupted, kind):
    ref, ref_records, ref_stats, points = uninterrupted[kind]
    assert not any(abs(p - s) < 1e-9 for p in points for s in STOPS)
    if kind.startswith("adaptive"):
        assert len({round(b - a, 9) for a, b in zip(points, points[1:])}) > 3
        assert ref_stats["rejected"] > 0
    sim = simulation(three_units(kind), cosim_config(kind))
    for stop in STOPS:
        logs = sim.run(t_end=stop)
        # An intermediate end is reached exactly and logged inclusively ...
        assert sim.t == pytest.approx(stop, abs=1e-12)
        assert logs.time_of("b/x.out")[-1] == pytest.approx(stop, abs=1e-12)
    # ... and the steps cut to reach them left no trace on the run that goes on.
    assert_same_logs(sim.run(), ref)
    assert records(sim) == ref_records
    assert sim.stats == ref_stats
    if kind == "fixed-compiled":
        assert sim.master.compiled.steps > 0


@pytest.mark.parametrize("kind", KINDS)
def test_cosim_resume_from_a_checkpoint_is_the_uninterrupted_run(tmp_path, uninterrupted,
                                                                kind):
    ref, ref_records, _, points = uninterrupted[kind]
    config = cosim_config(kind)
    sim = simulation(three_units(kind), config)
    sim.run(t_end=0.47)
    sim.save_checkpoint(tmp_path / "cp")
    other = simulation(three_units(kind), config)
    other.load_checkpoint(tmp_path / "cp")
    # The checkpoint holds the last macro point before 0.47, where the run goes on.
    resumed_at = max(p for p in points if p < 0.47)
    assert other.t == pytest.approx(resumed_at, abs=1e-12)
    logs = other.run()
    # The checkpoint file carries the logs before it: the resumed run's logs are the whole
    # uninterrupted run's, every key, every sample from t0.
    assert_same_logs(logs, ref)
    assert records(other)[-5:] == ref_records[-5:]
    # The interrupted simulator itself continues as if it had not stopped either.
    assert_same_logs(sim.run(), ref)
