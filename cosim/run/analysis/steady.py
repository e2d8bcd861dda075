"""Equilibria and periodic steady states of a simulated model; the run moves to what is found.

:func:`steady_state` solves ``dx/dt = 0`` with the inputs held; :func:`periodic_steady_state`
finds the start of a cycle of a given period by shooting (every shot rolled back). Both leave
the simulator at the state they find, at its current tick, so that continuing the run
continues from there.
"""

from __future__ import annotations

import math

import numpy as np

from cosim.errors import ConvergenceError, ModelError, SimulationError
from cosim.numerics.fixedpoint import Anderson
from cosim.numerics.timegrid import tick_time, ticks
from cosim.run.analysis.point import OperatingPoint, move_to, require_simulator, state_vector_arg
from cosim.run.checkpoint import restore_snapshot, snapshot

__all__ = ["periodic_steady_state", "steady_state"]


def steady_state(sim, *, t=None, x0=None, tol=1e-10) -> np.ndarray:
    """The continuous state with zero derivatives, inputs held at time ``t``; move there.

    Solves ``sim.derivatives(t, x) = 0`` with :func:`scipy.optimize.root` (Powell's hybrid
    method, then Levenberg–Marquardt if that fails). Feedback loops are part of the
    right-hand side, so an equilibrium set by a loop (an integrator driven by ``r - k*y``) is
    found like any other.

    Parameters
    ----------
    sim : Simulator
        Initialized (it is initialized if it was not).
    t : float, optional
        Time (s) at which time-dependent sources are evaluated; default ``sim.t``.
    x0 : array_like, shape (n,), optional
        Initial guess; default the current state.
    tol : float
        Accept ``x`` when ``max|dx/dt| <= tol`` (state units per second).

    Returns
    -------
    ndarray, shape (n,)
        The equilibrium. The simulator is left at it, at its current tick: state vector set,
        outputs evaluated at it, the current tick's logged sample replaced by them.

    Raises
    ------
    ConvergenceError
        When neither method reaches ``tol``; the simulator is then left as it was.

    Notes
    -----
    Discrete blocks hold their outputs: the equilibrium is that of the continuous part with
    the discrete signals frozen at their current values.
    """
    from scipy.optimize import root

    require_simulator(sim, "steady_state")
    if not (math.isfinite(tol) and tol > 0):
        raise ModelError(f"steady_state: tol must be a finite number > 0, got {tol!r}")
    t = sim.t if t is None else float(t)
    point = OperatingPoint(sim)
    guess = point.x if x0 is None else state_vector_arg(sim, x0, "steady_state: x0")
    best_x, best_res, nfev = guess, math.inf, 0
    try:
        def rhs(x):
            return sim.derivatives(t, x)

        for method, options in (("hybr", {"xtol": 1e-14}), ("lm", {"xtol": 1e-14,
                                                                   "ftol": 1e-14})):
            sol = root(rhs, best_x, method=method, options=options)
            nfev += int(getattr(sol, "nfev", 0))
            res = float(np.max(np.abs(rhs(sol.x)))) if sol.x.size else 0.0
            if res < best_res:
                best_x, best_res = np.array(sol.x, dtype=np.float64), res
            if best_res <= tol:
                break
    except BaseException:
        point.restore(sim)
        raise
    if not best_res <= tol:
        point.restore(sim)
        raise ConvergenceError(
            f"steady_state of model {sim.plan.name!r} (hybr, then lm; {nfev} evaluations)",
            nfev, best_res, t=t,
            remedy="start from an x0 nearer the equilibrium, check one exists (an integrator "
                   "with a nonzero constant input has none), or loosen tol")
    point.restore(sim)
    move_to(sim, best_x)
    return best_x.copy()


# -- periodic steady state ---------------------------------------------------------------------


def _duration_ticks(sim, duration, name: str, positive: bool) -> int:
    """``duration`` as a whole number of base steps, or a ModelError saying how to fix it."""
    dt = sim.config.dt
    try:
        d = float(duration)
    except (TypeError, ValueError):
        raise ModelError(f"periodic_steady_state: {name} must be a number of seconds, got "
                         f"{duration!r}") from None
    if not math.isfinite(d) or d < 0 or (positive and d == 0):
        raise ModelError(f"periodic_steady_state: {name} must be a finite number "
                         f"{'> 0' if positive else '>= 0'} (s), got {duration!r}")
    k = ticks(d, dt)
    if k is None:
        steps = d / dt
        raise ModelError(f"periodic_steady_state: {name} {d!r} s is not a whole number of "
                         f"base steps dt={dt!r} s ({steps:.6g} steps); use {name} = n*dt "
                         f"(e.g. {max(round(steps), 1) * dt!r}) or a dt that divides it")
    return k


def periodic_steady_state(sim, period, *, transient=0.0, tol=1e-9, max_iterations=100,
                          m=5) -> np.ndarray:
    """Initial state of the periodic steady state of period ``period``, by shooting; move there.

    Runs ``transient`` seconds first (a real part of the run, logged), then solves
    ``Phi(x0) = x0`` where ``Phi(x0)`` is the continuous state after one period simulated from
    ``x0`` at the current tick, by Anderson-accelerated fixed-point iteration. Every shot starts
    from a snapshot of the simulator (tick, discrete state, held outputs, solver, event
    detector) with the state vector replaced by ``x0`` and is rolled back afterwards: the
    shots leave no trace in the logs, statistics or event log.

    Parameters
    ----------
    sim : Simulator
        Initialized (it is initialized if it was not).
    period : float
        Period (s): a whole number of base steps ``sim.config.dt``. For a driven system, the
        forcing's period (or a multiple of it).
    transient : float
        Seconds run before shooting (a whole number of base steps); a transient brings the
        first guess near the cycle.
    tol : float
        Accept ``x0`` when ``max|Phi(x0) - x0| <= tol * max(1, max|x0|)``.
    max_iterations : int
        Shots before giving up.
    m : int
        Anderson depth (0: plain iteration ``x0 <- Phi(x0)``).

    Returns
    -------
    ndarray, shape (n,)
        The state at the cycle start, ``sim.t`` after the transient. The simulator is left
        there (state set, outputs evaluated, the tick's logged sample replaced by them), so
        continuing the run follows the cycle.

    Raises
    ------
    ModelError
        For a period or transient that is not a whole number of base steps, or bad options.
    SimulationError
        When an event stops the run during a shot.
    ConvergenceError
        When ``max_iterations`` shots do not reach ``tol``; the simulator is left at the cycle
        start guess (after the transient).

    Notes
    -----
    The unknown is the continuous state only: every shot starts from the discrete state
    (blocks' ``state``, held outputs) of the cycle start. For a hybrid model the result is a
    periodic steady state when the discrete part is periodic with it too, which needs the
    period to be a multiple of every discrete sample period. An autonomous oscillator (a
    limit cycle of unknown period and phase) is out of scope: the period is given, the phase
    is fixed by the start time.
    """
    require_simulator(sim, "periodic_steady_state")
    n_period = _duration_ticks(sim, period, "period", positive=True)
    _duration_ticks(sim, transient, "transient", positive=False)
    if not (math.isfinite(tol) and tol > 0):
        raise ModelError(f"periodic_steady_state: tol must be a finite number > 0, got {tol!r}")
    if not (isinstance(max_iterations, int) and max_iterations >= 1):
        raise ModelError(f"periodic_steady_state: max_iterations must be an int >= 1, got "
                         f"{max_iterations!r}")
    if not (isinstance(m, int) and m >= 0):
        raise ModelError(f"periodic_steady_state: m must be an int >= 0, got {m!r}")
    if float(transient) > 0:
        sim.run(duration=float(transient))
    start = snapshot(sim)
    k0, t0 = sim.k, sim.t
    x = sim.get_state_vector()
    if x.size == 0:
        return x

    def shoot(x0: np.ndarray) -> np.ndarray:
        restore_snapshot(sim, start)
        move_to(sim, x0)
        # Steps, not run(): run() would finalize every block and build the logs each shot.
        for _ in range(n_period):
            sim.step()
        if sim.k != k0 + n_period or sim.t != tick_time(sim.k, sim.config.dt, sim.config.t0):
            t_stop = sim.t
            restore_snapshot(sim, start)
            raise SimulationError(f"periodic_steady_state: an event stopped the run at "
                                  f"t={t_stop!r} during a shot from t={t0!r}; remove the stop "
                                  "event or shoot a period without it")
        return sim.get_state_vector()

    accel = Anderson(m)
    res = math.inf
    try:
        for it in range(1, max_iterations + 1):
            g = shoot(x)
            if not np.all(np.isfinite(g)):
                break
            res = float(np.max(np.abs(g - x)))
            if res <= tol * max(1.0, float(np.max(np.abs(x)))):
                # g = Phi(x) is the better estimate of a contraction's fixed point.
                restore_snapshot(sim, start)
                move_to(sim, g)
                return g
            x = accel.update(x, g)
            if not np.all(np.isfinite(x)):
                break
    except BaseException:
        restore_snapshot(sim, start)
        raise
    restore_snapshot(sim, start)
    raise ConvergenceError(
        f"periodic_steady_state of model {sim.plan.name!r} (period {float(period)!r} s from "
        f"t={t0!r})", it, res, t=t0,
        remedy="raise transient so the shots start nearer the cycle, raise max_iterations, "
               "or check the system has a stable periodic solution of this period (an "
               "unstable or undamped mode has none that shooting can reach)")
