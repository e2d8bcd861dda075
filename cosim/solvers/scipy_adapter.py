"""scipy's multistep and collocation solvers (BDF, Radau, LSODA) behind the one-step contract.

The simulator may change ``x`` at any sample hit and never lets a step cross a hit, while a
scipy ``OdeSolver`` owns its state and integrates towards a fixed ``t_bound``.  The adapter
bridges the two:

* it creates the scipy solver at ``(t, x)`` with ``t_bound = t + h`` after `reset`, and
  whenever the ``(t, x)`` passed to `step` is not where the scipy solver stands (the caller
  changed the state);
* otherwise it continues the same scipy solver (keeping BDF's history and Radau's step size),
  moving ``t_bound`` to the new ``t + h``;
* each `step` is one internal scipy step, clipped by scipy at ``t_bound``, with scipy's own
  dense output.

Limitations
-----------
* Checkpoints: the scipy solver's history is not exported, so ``set_state(get_state())``
  continues bit-identically only from a reset point (right after `reset` or creation);
  elsewhere the restored solver restarts scipy at the next step (same tolerances, different
  rounding).  ``checkpoint_exact`` is False for these classes.
* Statistics: ``nfev`` counts every call of ``fun`` (including scipy's finite-difference
  Jacobians); ``njev`` and ``nlu`` are scipy's; ``nreject`` and ``nnewton`` are not exposed by
  scipy and stay 0.
* Every restart begins again at order 1 (BDF, LSODA) with a fresh initial step: frequent
  discontinuities make these solvers slow; prefer ESDIRK32 there.
* ``SolverOptions.fixed``, ``newton_tol``, ``newton_max`` and the controller factors do not
  apply; ``dt_min`` is checked after scipy's step, only on steps scipy shrank (start-up
  steps are scipy's own heuristics).
* Moving ``t_bound`` of a running scipy solver writes its ``t_bound`` and ``status`` attributes
  (and, for LSODA, the critical time in its work array), and ``h_next`` reads scipy's next
  step size (``h_abs``; LSODA's ``HCUR``): the only places that rely on scipy internals, kept
  in `ScipyAdapter._move_bound` and `ScipyAdapter._proposal` (tested with scipy 1.17).
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
import scipy.integrate

from cosim.errors import SimulationError
from cosim.solvers.base import Solver, StepResult
from cosim.solvers.options import EPS


class ScipyAdapter(Solver):
    """One scipy ``OdeSolver`` class, stepped one internal step per `step` call.

    Class attributes (of a concrete adapter)
    -----------------------------------------
    method : type
        The ``scipy.integrate.OdeSolver`` subclass.
    """

    adaptive = True
    implicit = True
    checkpoint_exact = False
    method: ClassVar[type]

    def __init__(self, fun, n, options=None, jac=None):
        super().__init__(fun, n, options, jac)
        if self.options.fixed:
            raise ValueError(f"{self.name} (scipy) controls its own steps: "
                             f"SolverOptions.fixed=True is not supported; use ESDIRK32Fixed, "
                             f"BackwardEuler or an explicit fixed-step solver")
        self._ode = None
        self._seen = {"njev": 0, "nlu": 0}  # scipy counters already added to stats
        self._h_prev = math.inf             # last step of the current scipy solver

    def reset(self, t, x):
        super().reset(t, x)
        self._ode = None

    @property
    def h_next(self):
        if self._ode is None:
            return super().h_next
        return min(self._proposal(self._ode), self.options.dt_max)

    def step(self, t, x, h):
        if not h > 0:
            raise ValueError(f"{self.name}: step h={h!r} at t={t!r} must be > 0")
        if self.n == 0:
            return self._empty_step(t, x, h)
        opts = self.options
        t_bound = t + h
        ode = self._ode
        started = ode is None or not self._stands_at(ode, t, x)
        if started:
            ode = self._ode = self._start(t, x, h, t_bound)
        else:
            self._move_bound(ode, t_bound)
        message = ode.step()
        self._count(ode)
        if ode.status == "failed":
            self._ode = None
            raise SimulationError(
                f"{self.name} (scipy) failed: {message} (tried step h<={h:.3g} s); the model "
                f"may be discontinuous or blowing up: add an event for the discontinuity or "
                f"loosen rtol={opts.rtol:g}, atol={opts.atol:g}", t=t)
        # scipy lands exactly on t_bound when it clips; report the caller's own h then.
        h_taken = h if ode.t == t_bound else float(ode.t - t)
        # Only a step that scipy *shrank* below dt_min counts (as our controller's rejections
        # do): start-up steps are scipy's heuristics, and LSODA begins far below dt_min on
        # short intervals (its h0 ~ sqrt(rtol) * |t_bound|) before growing.
        h_prev, self._h_prev = self._h_prev, h_taken
        if (not started and h_taken < h and h_taken < h_prev
                and h_taken < max(opts.dt_min, 10 * abs(math.ulp(t)))):
            self._ode = None
            raise SimulationError(
                f"{self.name} (scipy): step size {h_taken:.3g} s is below dt_min="
                f"{opts.dt_min:g} s; the model may be stiff beyond the tolerances, "
                f"discontinuous or blowing up: loosen rtol={opts.rtol:g}, atol={opts.atol:g}, "
                f"lower dt_min, or add an event for the discontinuity", t=t)
        self.stats["naccept"] += 1
        # Evaluated now: scipy's dense output reads solver state that the next step overwrites.
        return StepResult(h_taken, ode.y.copy(), 0.0, ode.dense_output())

    def get_state(self):
        state = super().get_state()
        state["at_reset_point"] = self._ode is None
        return state

    def set_state(self, state):
        super().set_state(state)
        self._ode = None  # scipy restarts at the next step (see the module limitations)

    # ------------------------------------------------------------------ scipy specifics
    def _start(self, t, x, h, t_bound):
        opts = self.options
        kwargs = dict(rtol=opts.rtol, atol=opts.atol, max_step=opts.dt_max)
        if opts.h0 is not None:
            kwargs["first_step"] = min(opts.h0, h)
        if self.jac is not None:
            kwargs["jac"] = self.jac
        ode = self.method(self._f, t, np.array(x, dtype=float), t_bound, **kwargs)
        self._seen = {"njev": 0, "nlu": 0}
        return ode

    @staticmethod
    def _stands_at(ode, t, x):
        return (ode.status != "failed" and abs(ode.t - t) <= 64 * EPS * max(abs(t), abs(ode.t))
                and np.array_equal(ode.y, x))

    def _move_bound(self, ode, t_bound):
        ode.t_bound = t_bound
        ode.status = "running"

    def _proposal(self, ode):
        """scipy's next internal step size [s]."""
        return float(ode.h_abs)

    def _count(self, ode):
        for key in ("njev", "nlu"):
            value = getattr(ode, key)
            self.stats[key] += int(value) - self._seen[key]
            self._seen[key] = int(value)


class BDF(ScipyAdapter):
    """scipy ``BDF``: variable-order (1-5) backward differentiation formulas, for stiff systems."""

    name = "BDF"
    order = 5
    method = scipy.integrate.BDF


class Radau(ScipyAdapter):
    """scipy ``Radau``: implicit Runge-Kutta Radau IIA of order 5, for stiff systems."""

    name = "Radau"
    order = 5
    method = scipy.integrate.Radau


class LSODA(ScipyAdapter):
    """scipy ``LSODA``: Adams (order <= 12) / BDF (order <= 5), switching on stiffness."""

    name = "LSODA"
    order = 12

    method = scipy.integrate.LSODA

    def _move_bound(self, ode, t_bound):
        super()._move_bound(ode, t_bound)
        # LSODA is called with itask=5 and reads the critical time from rwork[0].
        ode._lsoda_solver._integrator.rwork[0] = t_bound

    def _proposal(self, ode):
        # ODEPACK RWORK(12) = HCUR, the step size to be attempted next.
        return abs(float(ode._lsoda_solver._integrator.rwork[11]))
