"""Numerical-oracle and contract tests of cosim.solvers.

Oracles: analytic solutions (convergence order of every method and of its dense output),
scipy ``solve_ivp`` (adaptive explicit pairs step for step; stiff problems against a tight
Radau reference).  Contract: the step/reset/dense/checkpoint API the simulator relies on.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.integrate import solve_ivp

from cosim.errors import ConvergenceError, SimulationError
from cosim.solvers import SOLVERS, ExplicitRK, ScipyAdapter, Solver, SolverOptions, get_solver
from cosim.solvers.implicit import DIRK

# ----------------------------------------------------------------------------- problems


def linear_rhs(t, x):
    return -x + np.sin(t)


def linear_exact(t):
    """x' = -x + sin t, x(0) = 1."""
    return np.array([1.5 * np.exp(-t) + 0.5 * (np.sin(t) - np.cos(t))])


def nonlinear_rhs(t, x):
    return np.array([x[0] * (1.0 - x[0]), -t * x[1] ** 2])


def nonlinear_exact(t):
    """Logistic growth and a non-autonomous Riccati equation, x(0) = (0.1, 1)."""
    return np.array([1.0 / (1.0 + 9.0 * np.exp(-t)), 2.0 / (2.0 + t * t)])


PROBLEMS = {"linear": (linear_rhs, linear_exact), "nonlinear": (nonlinear_rhs, nonlinear_exact)}

MU = 1000.0


def vanderpol(t, x):
    return np.array([x[1], MU * (1.0 - x[0] ** 2) * x[1] - x[0]])


def vanderpol_jac(t, x):
    return np.array([[0.0, 1.0], [-2.0 * MU * x[0] * x[1] - 1.0, MU * (1.0 - x[0] ** 2)]])


def vanderpol_mu10(t, x):
    return np.array([x[1], 10.0 * (1.0 - x[0] ** 2) * x[1] - x[0]])


def vanderpol_mu10_jac(t, x):
    return np.array([[0.0, 1.0], [-20.0 * x[0] * x[1] - 1.0, 10.0 * (1.0 - x[0] ** 2)]])


def robertson(t, y):
    return np.array([-0.04 * y[0] + 1e4 * y[1] * y[2],
                     0.04 * y[0] - 1e4 * y[1] * y[2] - 3e7 * y[1] ** 2,
                     3e7 * y[1] ** 2])


# name: (rhs, x0, t_end, atol); rtol is 1e-6 throughout.
STIFF = {
    "vanderpol_mu1000": (vanderpol, np.array([2.0, 0.0]), 3.0, 1e-6),
    "robertson": (robertson, np.array([1.0, 0.0, 0.0]), 10.0, 1e-10),
}

FIXED_STEP = [name for name, cls in SOLVERS.items() if not cls.adaptive]
ADAPTIVE = [name for name, cls in SOLVERS.items() if cls.adaptive]
SCIPY = [name for name, cls in SOLVERS.items() if issubclass(cls, ScipyAdapter)]
OWN_CONTROLLER = [name for name in ADAPTIVE if name not in SCIPY]
# Methods with a fixed-step mode, hence a measurable order: all but the scipy adapters.
ORDER_TESTED = FIXED_STEP + OWN_CONTROLLER


def integrate(solver, x0, grid):
    """Drive ``solver`` like the simulator: reset at grid[0], never cross a grid point.

    Returns the state at grid[-1] and the accepted steps as (t, h, StepResult) tuples.
    """
    t = float(grid[0])
    x = np.array(x0, dtype=float)
    solver.reset(t, x)
    steps = []
    for t_hit in grid[1:]:
        while t < t_hit:
            h = t_hit - t
            r = solver.step(t, x, h)
            steps.append((t, r.h, r))
            t = t_hit if r.h == h else t + r.h  # the simulator's own boundary time
            x = r.x
    return x, steps


def fixed_mode(name, **kw):
    """Options that make ``name`` take exactly the step it is given; tight Newton."""
    return SolverOptions(fixed=SOLVERS[name].adaptive, rtol=1e-10, atol=1e-10, newton_max=20,
                         **kw)


def step_counts(name):
    """Step counts per T for the order fits: low orders need smaller steps to be asymptotic,
    high orders larger ones to stay above rounding."""
    order = SOLVERS[name].order
    return np.array([16, 32, 64, 128]) if order <= 2 else np.array([8, 16, 32, 64])


def slope(h, err):
    return np.polyfit(np.log(h), np.log(err), 1)[0]


# ----------------------------------------------------------------------------- order


@pytest.mark.parametrize("problem", sorted(PROBLEMS))
@pytest.mark.parametrize("name", ORDER_TESTED)
def test_convergence_order(name, problem):
    """The global error at T shrinks like h**order."""
    rhs, exact = PROBLEMS[problem]
    T = 1.0
    ns = step_counts(name)
    errors = []
    for n_steps in ns:
        x0 = exact(0.0)
        solver = get_solver(name)(rhs, x0.size, fixed_mode(name))
        x, steps = integrate(solver, x0, np.linspace(0.0, T, n_steps + 1))
        assert len(steps) == n_steps
        errors.append(np.max(np.abs(x - exact(T))))
    p = slope(T / ns, errors)
    assert p >= SOLVERS[name].order - 0.2, f"{name} on {problem}: slope {p:.3f}, errors {errors}"


@pytest.mark.parametrize("problem", sorted(PROBLEMS))
@pytest.mark.parametrize("name", ORDER_TESTED)
def test_dense_output_order(name, problem):
    """Midpoint dense output converges like h**min(order, 4): the Hermite interpolant (and
    RK45's quartic) add a local error of O(h**5) at worst."""
    rhs, exact = PROBLEMS[problem]
    T = 1.0
    ns = step_counts(name)
    errors = []
    for n_steps in ns:
        x0 = exact(0.0)
        solver = get_solver(name)(rhs, x0.size, fixed_mode(name))
        _, steps = integrate(solver, x0, np.linspace(0.0, T, n_steps + 1))
        errors.append(max(np.max(np.abs(r.dense(t + h / 2) - exact(t + h / 2)))
                          for t, h, r in steps))
    p = slope(T / ns, errors)
    expected = min(SOLVERS[name].order, 4)
    assert p >= expected - 0.2, f"{name} on {problem}: dense slope {p:.3f}, errors {errors}"


@pytest.mark.parametrize("rtol", [1e-4, 1e-6, 1e-8])
@pytest.mark.parametrize("name", SCIPY)
def test_scipy_adapter_tolerance_convergence(name, rtol):
    """The adapters have no fixed-step mode; their error must follow the tolerance."""
    rhs, exact = PROBLEMS["nonlinear"]
    x0 = exact(0.0)
    opts = SolverOptions(rtol=rtol, atol=rtol * 1e-3)
    x, _ = integrate(get_solver(name)(rhs, 2, opts), x0, np.array([0.0, 5.0]))
    assert np.all(np.abs(x - exact(5.0)) <= 20 * (opts.atol + rtol * np.abs(exact(5.0))))


# ----------------------------------------------------------------------------- vs scipy


@pytest.mark.parametrize("rtol, atol", [(1e-6, 1e-9), (1e-9, 1e-12)])
@pytest.mark.parametrize("problem", sorted(PROBLEMS))
@pytest.mark.parametrize("name", ["RK23", "RK45"])
def test_adaptive_pair_matches_solve_ivp(name, problem, rtol, atol):
    """Same pair, same controller as scipy: same answer, and the same number of steps."""
    rhs, exact = PROBLEMS[problem]
    x0, T = exact(0.0), 5.0
    solver = get_solver(name)(rhs, x0.size, SolverOptions(rtol=rtol, atol=atol))
    x, steps = integrate(solver, x0, np.array([0.0, T]))
    ref = solve_ivp(rhs, (0.0, T), x0, method=name, rtol=rtol, atol=atol)
    y = ref.y[:, -1]
    assert np.all(np.abs(x - y) <= atol + rtol * np.abs(y))
    # Global error accumulates local errors held at the tolerance: allow a factor.
    assert np.all(np.abs(x - exact(T)) <= 10 * (atol + rtol * np.abs(exact(T))))
    assert abs(len(steps) - (ref.t.size - 1)) <= 1


@pytest.mark.parametrize("name", ["RK23", "RK45", "ESDIRK32"])
def test_adaptive_dense_output_within_tolerance(name):
    """Inside steps the dense output stays within a few local tolerances of the solution.

    The interpolants are one order below the propagating formula (RK45's quartic, the cubic
    Hermite), so they can exceed the step's own error: measured up to ~3.4 tolerances for
    RK45 (identical to scipy's dense output), hence the factor 10.
    """
    rhs, exact = PROBLEMS["nonlinear"]
    rtol, atol = 1e-8, 1e-10
    x0, T = exact(0.0), 5.0
    _, steps = integrate(get_solver(name)(rhs, 2, SolverOptions(rtol=rtol, atol=atol)), x0,
                         np.array([0.0, T]))
    ref = solve_ivp(rhs, (0.0, T), x0, method=name if name != "ESDIRK32" else "Radau",
                    rtol=rtol, atol=atol, dense_output=True).sol
    for t, h, r in steps:
        for theta in (0.25, 0.5, 0.75):
            tq = t + theta * h
            scale = atol + rtol * np.abs(exact(tq))
            assert np.all(np.abs(r.dense(tq) - exact(tq)) <= 10 * scale), (t, h, theta)
            if name != "ESDIRK32":  # same steps as scipy, so the same interpolant
                assert np.all(np.abs(r.dense(tq) - ref(tq)) <= scale)


# ----------------------------------------------------------------------------- stiff


@pytest.fixture(scope="module")
def rk45_steps():
    """Accepted RK45 steps per stiff problem (computed once: it is the slow part)."""
    counts = {}
    for key, (rhs, x0, T, atol) in STIFF.items():
        solver = get_solver("RK45")(rhs, x0.size, SolverOptions(rtol=1e-6, atol=atol))
        integrate(solver, x0, np.array([0.0, T]))
        counts[key] = solver.stats["naccept"]
    return counts


@pytest.mark.parametrize("problem", sorted(STIFF))
@pytest.mark.parametrize("name", ["ESDIRK32", "BDF", "Radau", "LSODA"])
def test_stiff_solvers_beat_rk45(name, problem, rk45_steps):
    """>= 10x fewer steps than RK45, and within 10 local tolerances of a tight Radau answer."""
    rhs, x0, T, atol = STIFF[problem]
    rtol = 1e-6
    solver = get_solver(name)(rhs, x0.size, SolverOptions(rtol=rtol, atol=atol))
    x, steps = integrate(solver, x0, np.array([0.0, T]))
    ratio = rk45_steps[problem] / solver.stats["naccept"]
    assert ratio >= 10, f"{name}: {solver.stats['naccept']} steps vs RK45 {rk45_steps[problem]}"
    ref = solve_ivp(rhs, (0.0, T), x0, method="Radau", rtol=1e-11, atol=atol * 1e-4).y[:, -1]
    assert np.all(np.abs(x - ref) <= 10 * (atol + rtol * np.abs(ref)))


def test_analytic_jacobian_replaces_finite_differences():
    rhs, x0, T, atol = STIFF["vanderpol_mu1000"]
    opts = SolverOptions(rtol=1e-6, atol=atol)
    fd = get_solver("ESDIRK32")(rhs, 2, opts)
    an = get_solver("ESDIRK32")(rhs, 2, opts, jac=vanderpol_jac)
    x_fd, _ = integrate(fd, x0, np.array([0.0, T]))
    x_an, _ = integrate(an, x0, np.array([0.0, T]))
    assert np.all(np.abs(x_fd - x_an) <= 10 * (atol + 1e-6 * np.abs(x_an)))
    assert an.stats["njev"] >= 1
    # Finite differences cost n + 1 calls of fun per Jacobian; the analytic one none.
    assert an.stats["nfev"] < fd.stats["nfev"]


def test_fixed_step_newton_failure_raises_convergence_error():
    solver = get_solver("BackwardEuler")(lambda t, x: -x ** 3, 1, SolverOptions(newton_max=4))
    x = np.array([10.0])
    solver.reset(0.0, x)
    with pytest.raises(ConvergenceError, match=r"t=0.*BackwardEuler Newton") as info:
        solver.step(0.0, x, 10.0)
    assert info.value.iterations >= 1


# ----------------------------------------------------------------------------- contract


@pytest.mark.parametrize("name", list(SOLVERS))
def test_step_contract(name):
    cls = get_solver(name)
    rhs, exact = PROBLEMS["nonlinear"]
    solver = cls(rhs, 2, SolverOptions(rtol=1e-6, atol=1e-9))
    assert isinstance(solver, Solver) and cls.name == name
    assert isinstance(cls.order, int) and isinstance(cls.implicit, bool)
    x = exact(0.0)
    x_before = x.copy()
    solver.reset(0.0, x)
    h = 0.05
    r = solver.step(0.0, x, h)
    assert np.array_equal(x, x_before)  # input untouched
    assert r.x is not x and r.x.shape == (2,) and r.x.dtype == np.float64
    assert isinstance(r.h, float) and 0 < r.h <= h
    assert np.allclose(r.x, exact(r.h), rtol=0, atol=1e-2)  # it integrates this ODE
    assert r.error >= 0.0
    assert np.allclose(r.dense(0.0), x, rtol=1e-13, atol=1e-15)
    assert np.allclose(r.dense(r.h), r.x, rtol=1e-13, atol=1e-15)
    if cls.adaptive:
        assert r.error <= 1.0
        assert solver.h_next > 0
    else:
        assert r.h == h and r.error == 0.0 and solver.h_next is None
    assert set(solver.stats) == {"nfev", "njev", "naccept", "nreject", "nnewton", "nlu"}
    assert solver.stats["naccept"] == 1 and solver.stats["nfev"] >= 1


@pytest.mark.parametrize("name", ADAPTIVE)
def test_first_adaptive_step_respects_given_h(name):
    rhs, exact = PROBLEMS["linear"]
    solver = get_solver(name)(rhs, 1)
    x = exact(0.0)
    solver.reset(0.0, x)
    assert solver.h_next == math.inf  # no proposal yet: the step will choose
    h = 1e-4  # far below the Hairer-Norsett-Wanner estimate for this smooth problem
    r = solver.step(0.0, x, h)
    if name in SCIPY:
        assert r.h <= h  # BDF and LSODA start with their own, smaller steps
    else:
        assert r.h == h


def test_step_cut_short_by_a_hit_does_not_throttle_the_controller():
    rhs, exact = PROBLEMS["linear"]
    solver = get_solver("RK45")(rhs, 1)
    x = exact(0.0)
    solver.reset(0.0, x)
    r = solver.step(0.0, x, 10.0)
    proposal = solver.h_next
    r2 = solver.step(r.h, r.x, 1e-7)  # a sample hit 1e-7 s ahead
    assert r2.h == 1e-7
    assert solver.h_next >= proposal


@settings(max_examples=25, deadline=None)
@given(name=st.sampled_from(ADAPTIVE),
       gaps=st.lists(st.floats(1e-9, 0.7), min_size=1, max_size=25))
def test_random_hits_are_never_crossed_and_accuracy_holds(name, gaps):
    """Whatever the hit pattern, a step never exceeds the h it is given, a completed step
    returns that very h, and the answer stays within the tolerance."""
    rhs, exact = PROBLEMS["nonlinear"]
    rtol, atol = 1e-7, 1e-10
    solver = get_solver(name)(rhs, 2, SolverOptions(rtol=rtol, atol=atol))
    hits = np.cumsum(gaps)
    t, x = 0.0, exact(0.0)
    solver.reset(t, x)
    for t_hit in hits:
        while t < t_hit:
            h = t_hit - t
            r = solver.step(t, x, h)
            assert r.h <= h
            t = t_hit if r.h == h else t + r.h
            x = r.x
    assert np.all(np.abs(x - exact(t)) <= 10 * (atol + rtol * np.abs(exact(t))))


def test_initial_step_matches_hairer_norsett_wanner():
    rhs, exact = PROBLEMS["nonlinear"]
    x0 = exact(0.0)
    solver = get_solver("RK45")(rhs, 2, SolverOptions(rtol=1e-6, atol=1e-9))
    _, steps = integrate(solver, x0, np.array([0.0, 5.0]))
    ref = solve_ivp(rhs, (0.0, 5.0), x0, method="RK45", rtol=1e-6, atol=1e-9)
    assert steps[0][1] == pytest.approx(ref.t[1], rel=1e-12)


@pytest.mark.parametrize("name", [n for n in SOLVERS if not SOLVERS[n].implicit])
def test_caller_changing_x_without_reset_is_not_served_a_stale_derivative(name):
    """The first-same-as-last derivative is reused only if x is really where the last step
    ended; a changed x gets a fresh derivative, as if the solver had been reset."""
    rhs, exact = PROBLEMS["nonlinear"]
    opts = fixed_mode(name)
    used = get_solver(name)(rhs, 2, opts)
    x = exact(0.0)
    used.reset(0.0, x)
    r = used.step(0.0, x, 0.1)
    r.dense(0.05)  # makes fixed-step explicit methods cache f at the end, too
    x_mod = r.x * 1.5
    fresh = get_solver(name)(rhs, 2, opts)
    fresh.reset(0.1, x_mod)
    assert np.array_equal(used.step(0.1, x_mod, 0.1).x, fresh.step(0.1, x_mod, 0.1).x)


@pytest.mark.parametrize("name", [n for n in SOLVERS if not SOLVERS[n].implicit])
def test_reset_forgets_history(name):
    """After reset an explicit solver behaves exactly like a fresh one."""
    rhs, exact = PROBLEMS["nonlinear"]
    used = get_solver(name)(rhs, 2)
    integrate(used, exact(0.0), np.linspace(0.0, 0.5, 6))
    fresh = get_solver(name)(rhs, 2)
    x2 = np.array([0.3, 0.7])
    a, _ = integrate(used, x2, np.linspace(0.5, 1.0, 6))
    b, _ = integrate(fresh, x2, np.linspace(0.5, 1.0, 6))
    assert np.array_equal(a, b)


def test_fsal_saves_a_stage():
    """RK45 in fixed-step mode: one initial f, then 6 calls per step (7 stages, FSAL)."""
    rhs, exact = PROBLEMS["nonlinear"]
    solver = get_solver("RK45")(rhs, 2, SolverOptions(fixed=True))
    integrate(solver, exact(0.0), np.linspace(0.0, 1.0, 11))
    assert solver.stats["nfev"] == 1 + 6 * 10


# ----------------------------------------------------------------------------- checkpoints

PLAIN_TYPES = (float, int, bool, str, type(None), np.ndarray)


def _run(solver, t, x, hits, n_steps):
    """n_steps accepted steps towards the hit times, recording everything observable."""
    trace = []
    hits = iter(hits)
    t_hit = next(hits)
    for _ in range(n_steps):
        while t >= t_hit:
            t_hit = next(hits)
        h = t_hit - t
        r = solver.step(t, x, h)
        trace.append((r.h, r.x, r.error, solver.h_next, r.dense(t + 0.5 * r.h)))
        t = t_hit if r.h == h else t + r.h
        x = r.x
    return t, x, trace


def _assert_same_trace(a, b):
    assert len(a) == len(b)
    for ra, rb in zip(a, b):
        assert ra[0] == rb[0] and ra[2] == rb[2] and ra[3] == rb[3]
        assert np.array_equal(ra[1], rb[1]) and np.array_equal(ra[4], rb[4])


def _check_plain(state):
    for key, value in state.items():
        if isinstance(value, dict):
            _check_plain(value)
        else:
            assert isinstance(value, PLAIN_TYPES), (key, type(value))


@pytest.mark.parametrize("jac", [None, vanderpol_mu10_jac], ids=["fd-jacobian", "jacobian"])
@pytest.mark.parametrize("name", list(SOLVERS))
def test_checkpoint_restore_continues_bit_identically(name, jac):
    """Stiff-ish Van der Pol (mu=10) with sample hits every 0.05 s exercises step control,
    Jacobian reuse and refresh, order changes (BDF, LSODA) and LSODA's method switch;
    continuing and restoring must agree bit for bit from a reset point and from points deep
    into the run, and the restore itself must not evaluate the right-hand side."""
    cls = get_solver(name)
    # Fixed steps of 0.05 s are unstable for explicit methods here: 0.01 s keeps them finite.
    hits = np.arange(1, 1000) * (0.05 if cls.adaptive else 0.01)
    opts = SolverOptions(rtol=1e-5, atol=1e-8)
    solver = cls(vanderpol_mu10, 2, opts, jac=jac)
    x = np.array([2.0, 0.0])
    solver.reset(0.0, x)
    t = 0.0
    for n_before in (0, 7, 60, 150):
        t, x, _ = _run(solver, t, x, hits, n_before)
        state = solver.get_state()
        _check_plain(state)
        h_next = solver.h_next
        t_end, x_end, continued = _run(solver, t, x, hits, 12)
        restored = cls(vanderpol_mu10, 2, opts, jac=jac)
        restored.set_state(state)
        assert restored.stats == state["stats"]
        assert restored.h_next == h_next
        _, _, replayed = _run(restored, t, x, hits, 12)
        _assert_same_trace(continued, replayed)
        assert np.all(np.isfinite(x_end))
        assert restored.stats == solver.stats
        # Go on with the restored solver: the next restore point is one it reached itself.
        solver, t, x = restored, t_end, x_end


@pytest.mark.parametrize("name", SCIPY)
@pytest.mark.parametrize("saved_by", ["0.0.0", "older cosim"])
def test_scipy_state_of_another_scipy_restarts_with_a_warning(name, saved_by):
    """A state saved under another scipy version (or before scipy's history was saved) is not
    written into scipy's internals: the solver says so and restarts, still accurate."""
    rhs, exact = PROBLEMS["nonlinear"]
    opts = SolverOptions(rtol=1e-8, atol=1e-10)
    solver = get_solver(name)(rhs, 2, opts)
    x = exact(0.0)
    solver.reset(0.0, x)
    t, x, _ = _run(solver, 0.0, x, [5.0], 5)
    state = solver.get_state()
    if saved_by == "older cosim":       # what get_state returned before the history was saved
        for key in ("scipy", "scipy_version", "seen", "h_prev"):
            del state[key]
        state["at_reset_point"] = False
    else:
        state["scipy_version"] = saved_by
    restored = get_solver(name)(rhs, 2, opts)
    with pytest.warns(RuntimeWarning, match=f"{name}: .*{saved_by}.*not bit"):
        restored.set_state(state)
    while t < 5.0:
        r = restored.step(t, x, 5.0 - t)
        t = 5.0 if r.h == 5.0 - t else t + r.h
        x = r.x
    assert np.allclose(x, exact(5.0), rtol=1e-6)


@pytest.mark.parametrize("name", SCIPY)
def test_scipy_adapter_continues_across_hits(name):
    """Across sample hits that leave x alone, the scipy solver is continued (history and step
    size kept), not restarted: fewer steps than restarting at every hit, same accuracy."""
    rhs, exact = PROBLEMS["nonlinear"]
    opts = SolverOptions(rtol=1e-8, atol=1e-11)
    hits = np.linspace(0.0, 5.0, 51)
    continued = get_solver(name)(rhs, 2, opts)
    x, _ = integrate(continued, exact(0.0), hits)
    restarted = get_solver(name)(rhs, 2, opts)
    x_restarted = exact(0.0)
    for a, b in zip(hits[:-1], hits[1:]):
        x_restarted, _ = integrate(restarted, x_restarted, np.array([a, b]))  # resets at a
    assert continued.stats["naccept"] < restarted.stats["naccept"]
    # Same accuracy as restarting, or within ten times the local tolerance: a tolerance bounds
    # the local error only (scipy 1.17's BDF ends 1.2e-8 off continued, 3.5e-8 restarted).
    err, err_restarted = np.abs(x - exact(5.0)), np.abs(x_restarted - exact(5.0))
    tol = 10 * (opts.atol + opts.rtol * np.abs(exact(5.0)))
    assert np.all(err <= np.maximum(2 * err_restarted, tol))


def test_state_of_another_solver_is_refused():
    rhs, _ = PROBLEMS["linear"]
    with pytest.raises(ValueError, match="RK45.*RK23"):
        get_solver("RK23")(rhs, 1).set_state(get_solver("RK45")(rhs, 1).get_state())


# ----------------------------------------------------------------------------- errors


def blowup(t, x):
    return x * x  # x(0) = 1: x = 1 / (1 - t) blows up at t = 1


@pytest.mark.parametrize("name", ADAPTIVE)
def test_dt_min_violation_raises_with_time(name):
    solver = get_solver(name)(blowup, 1, SolverOptions(dt_min=1e-6))
    t, x = 0.0, np.array([1.0])
    solver.reset(t, x)
    with pytest.raises(SimulationError, match=r"t=0\.9.*dt_min") as info:
        for _ in range(100_000):
            h = 2.0 - t
            r = solver.step(t, x, h)
            t, x = t + r.h, r.x
    assert 0.9 < info.value.t < 1.0


def test_unknown_solver_lists_valid_names():
    with pytest.raises(ValueError) as info:
        get_solver("RK99")
    message = str(info.value)
    assert "'RK99'" in message
    assert all(name in message for name in SOLVERS)


def test_get_solver_accepts_a_solver_class_and_refuses_others():
    assert get_solver(SOLVERS["RK4"]) is SOLVERS["RK4"]

    class Midpoint(ExplicitRK):
        name = "Midpoint"
        order = 2
        A = [[0, 0], [0.5, 0]]
        b = [0, 1]
        c = [0, 0.5]

    assert get_solver(Midpoint) is Midpoint
    with pytest.raises(ValueError, match="RK45"):
        get_solver(dict)
    with pytest.raises(ValueError, match="RK45"):
        get_solver(ExplicitRK)  # a family, not a method


def test_bad_tableau_fails_at_class_definition_naming_the_class():
    with pytest.raises(TypeError, match="BadRK.*row sums"):
        class BadRK(ExplicitRK):
            name = "BadRK"
            order = 2
            A = [[0, 0], [0.4, 0]]
            b = [0.5, 0.5]
            c = [0, 1]


def test_bad_dirk_diagonal_fails_at_class_definition():
    with pytest.raises(TypeError, match="BadDIRK.*gamma"):
        class BadDIRK(DIRK):
            name = "BadDIRK"
            order = 1
            adaptive = False
            A = [[0, 0, 0], [0.25, 0.25, 0], [0.2, 0.3, 0.5]]
            b = [0.2, 0.3, 0.5]
            c = [0, 0.5, 1.0]


def test_adaptive_solver_class_without_error_order_is_refused():
    with pytest.raises(TypeError, match="NoOrder.*error_order"):
        class NoOrder(Solver):
            name = "NoOrder"
            order = 1
            adaptive = True
            implicit = False


@pytest.mark.parametrize("bad", [
    {"rtol": 0.0}, {"atol": -1.0}, {"dt_min": 1.0, "dt_max": 0.5}, {"h0": 0.0},
    {"newton_max": 0}, {"safety": 1.5}, {"min_factor": 2.0},
])
def test_invalid_options_are_refused(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        SolverOptions(**bad)


def test_options_are_frozen():
    with pytest.raises(AttributeError):
        SolverOptions().rtol = 1.0


def test_fixed_step_solver_needs_finite_step():
    solver = get_solver("RK4")(linear_rhs, 1)
    with pytest.raises(ValueError, match="finite"):
        solver.step(0.0, np.array([1.0]), math.inf)


@pytest.mark.parametrize("name", SCIPY)
def test_scipy_adapter_refuses_fixed_mode(name):
    with pytest.raises(ValueError, match="fixed"):
        get_solver(name)(linear_rhs, 1, SolverOptions(fixed=True))
