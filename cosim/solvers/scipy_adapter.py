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

Checkpoints
-----------
`get_state` captures everything the scipy solver's next step reads, as plain floats, ints,
strings and arrays: the time, state and bound, and per method its step history
(`ScipyAdapter.step_attributes`: BDF's difference array, order, step size, equal-step count,
Jacobian and LU factors; Radau's step sizes, collocation values ``Z``, derivative, Jacobian
and LU factors) or, for LSODA, ODEPACK's work arrays and the common-block state scipy keeps
beside them.  `set_state` rebuilds a scipy solver of the same class and options and writes
that history back, so ``set_state(get_state())`` continues bit for bit from any point, like
every other solver.  The rebuilt solver's constructor evaluates the right-hand side (initial
derivative, initial step, finite-difference Jacobian); those evaluations are replaced by a
placeholder that never reaches the model, since the restored history overwrites their
results (model blocks, statistics and callbacks see nothing of a restore).

Limitations
-----------
* Statistics: ``nfev`` counts every call of ``fun`` (including scipy's finite-difference
  Jacobians); ``njev`` and ``nlu`` are scipy's; ``nreject`` and ``nnewton`` are not exposed by
  scipy and stay 0.
* Every restart begins again at order 1 (BDF, LSODA) with a fresh initial step: frequent
  discontinuities make these solvers slow; prefer ESDIRK32 there.
* ``SolverOptions.fixed``, ``newton_tol``, ``newton_max`` and the controller factors do not
  apply; ``dt_min`` is checked after scipy's step, only on steps scipy shrank (start-up
  steps are scipy's own heuristics).
* Moving ``t_bound`` of a running scipy solver writes its ``t_bound`` and ``status`` attributes
  (and, for LSODA, the critical time in its work array), ``h_next`` reads scipy's next step
  size (``h_abs``; LSODA's ``HCUR``), and checkpoints read and write the undocumented step
  history named above: the only places that rely on scipy internals, kept in this module
  (`ScipyAdapter._move_bound`, `ScipyAdapter._proposal`, `ScipyAdapter._capture` and
  `ScipyAdapter._rebuild`; tested bit for bit with scipy 1.17).  The state records the scipy
  version: a state written under another version (or by a cosim before these checkpoints)
  is not written into internals that may have changed; the solver restarts scipy at the next
  step instead (same tolerances, different rounding) and says so with a `RuntimeWarning`.
"""

from __future__ import annotations

import math
import warnings
from typing import ClassVar

import numpy as np

from cosim.errors import SimulationError
from cosim.solvers.base import Solver, StepResult
from cosim.solvers.options import EPS


class ScipyAdapter(Solver):
    """One scipy ``OdeSolver`` class, stepped one internal step per `step` call.

    Class attributes (of a concrete adapter)
    -----------------------------------------
    scipy_name : str
        The name of the ``scipy.integrate.OdeSolver`` subclass (`method` is the class;
        scipy.integrate is imported when a solver is made, not with cosim).
    step_attributes : tuple of str
        The attributes of ``method`` that its next step reads besides ``t``, ``y``,
        ``t_old``, ``t_bound``, ``status``, ``njev`` and ``nlu`` (checkpointed).
    """

    adaptive = True
    implicit = True
    scipy_name: ClassVar[str]
    step_attributes: ClassVar[tuple[str, ...]] = ()
    #: Attributes every scipy ``OdeSolver`` has that its next step (or its counters) reads.
    common_attributes: ClassVar[tuple[str, ...]] = (
        "t", "y", "t_old", "t_bound", "status", "njev", "nlu")

    def __init__(self, fun, n, options=None, jac=None):
        super().__init__(fun, n, options, jac)
        if self.options.fixed:
            raise ValueError(f"{self.name} (scipy) controls its own steps: "
                             f"SolverOptions.fixed=True is not supported; use ESDIRK32Fixed, "
                             f"BackwardEuler or an explicit fixed-step solver")
        self._ode = None
        self._seen = {"njev": 0, "nlu": 0}  # scipy counters already added to stats
        self._h_prev = math.inf             # last step of the current scipy solver
        self._rebuilding = False            # a restore is constructing a scipy solver
        import scipy
        import scipy.integrate
        self.method = getattr(scipy.integrate, self.scipy_name)
        self._scipy_version = scipy.__version__

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
            ode = self._ode = self._start(t, x, t_bound, h)
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

    def _get_extra_state(self):
        return {
            "scipy_version": self._scipy_version,
            "seen": dict(self._seen),
            "h_prev": self._h_prev,
            # None at a reset point: the next step starts a scipy solver afresh anyway.
            "scipy": None if self._ode is None else self._capture(self._ode),
        }

    def _set_extra_state(self, state):
        self._ode = None
        if "scipy" not in state:
            # Written before scipy's history was saved: only a reset point restores exactly.
            if not state.get("at_reset_point", True):
                self._warn_restart("by an older cosim, without scipy's step history", "")
            return
        captured = state["scipy"]
        if captured is None:
            return                      # a reset point: the next step starts scipy afresh
        version = state.get("scipy_version")
        if version != self._scipy_version:
            self._warn_restart(f"with scipy {version}", f"; resume under scipy {version} for "
                               f"an exact continuation")
            return
        self._seen = {k: int(v) for k, v in state["seen"].items()}
        self._h_prev = float(state["h_prev"])
        self._ode = self._rebuild(captured)

    def _warn_restart(self, saved: str, remedy: str) -> None:
        warnings.warn(f"{self.name}: the solver state was saved {saved}, this is scipy "
                      f"{self._scipy_version}: scipy's step history is not restored and "
                      f"{self.name} restarts at the next step, so the continued run is not "
                      f"bit for bit the uninterrupted one (same tolerances){remedy}",
                      RuntimeWarning, stacklevel=4)

    # ------------------------------------------------------------------ scipy specifics
    def _rhs(self, t, x):
        """The right-hand side scipy calls: the model's, except while a restore constructs a
        scipy solver (whose start-up evaluations the restored history overwrites)."""
        if self._rebuilding:
            return np.zeros(self.n)
        return self._f(t, x)

    def _jac(self, t, x):
        if self._rebuilding:
            return np.zeros((self.n, self.n))
        return self.jac(t, x)

    def _start(self, t, x, t_bound, h=None):
        """A new scipy solver at ``(t, x)`` towards ``t_bound`` (``h``: the caller's step,
        bounding ``options.h0``)."""
        opts = self.options
        kwargs = dict(rtol=opts.rtol, atol=opts.atol, max_step=opts.dt_max)
        if opts.h0 is not None and h is not None:
            kwargs["first_step"] = min(opts.h0, h)
        if self.jac is not None:
            kwargs["jac"] = self._jac
        ode = self.method(self._rhs, t, np.array(x, dtype=float), t_bound, **kwargs)
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

    def _capture(self, ode) -> dict:
        """Everything ``ode``'s next step reads, as plain values and array copies."""
        return {name: _plain(getattr(ode, name))
                for name in self.common_attributes + self.step_attributes}

    def _rebuild(self, captured: dict):
        """A scipy solver of this class and options standing where `_capture` found one."""
        seen = self._seen
        self._rebuilding = True
        try:
            ode = self._start(float(captured["t"]), captured["y"], float(captured["t_bound"]))
        finally:
            self._rebuilding = False
        for name in self.common_attributes + self.step_attributes:
            setattr(ode, name, _unplain(captured[name]))
        self._seen = seen
        return ode


def _plain(value):
    """A scipy solver attribute as a checkpointable value (LU factors as a dict)."""
    if isinstance(value, tuple):            # scipy.linalg.lu_factor's (lu, piv)
        lu, piv = value
        return {"lu": lu.copy(), "piv": piv.copy()}
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, (np.floating, np.integer, np.bool_)):
        return value.item()
    return value


def _unplain(value):
    """Inverse of `_plain`."""
    if isinstance(value, dict):
        return np.array(value["lu"]), np.array(value["piv"])
    if isinstance(value, np.ndarray):
        return value.copy()
    return value


class BDF(ScipyAdapter):
    """scipy ``BDF``: variable-order (1-5) backward differentiation formulas, for stiff systems."""

    name = "BDF"
    order = 5
    scipy_name = "BDF"
    step_attributes = ("h_abs", "h_abs_old", "error_norm_old", "D", "order", "n_equal_steps",
                       "J", "LU", "jac_factor")


class Radau(ScipyAdapter):
    """scipy ``Radau``: implicit Runge-Kutta Radau IIA of order 5, for stiff systems."""

    name = "Radau"
    order = 5
    scipy_name = "Radau"
    step_attributes = ("f", "y_old", "h_abs", "h_abs_old", "error_norm_old", "Z", "J",
                       "LU_real", "LU_complex", "current_jac", "jac_factor")

    def _rebuild(self, captured):
        ode = super()._rebuild(captured)
        if ode.Z is not None:
            # The dense output of the last step seeds the next step's Newton iteration;
            # scipy computes it from the restored Z, t_old, t and y_old.
            ode.sol = ode._compute_dense_output()
        return ode


class LSODA(ScipyAdapter):
    """scipy ``LSODA``: Adams (order <= 12) / BDF (order <= 5), switching on stiffness."""

    name = "LSODA"
    order = 12

    scipy_name = "LSODA"

    def _move_bound(self, ode, t_bound):
        super()._move_bound(ode, t_bound)
        # LSODA is called with itask=5 and reads the critical time from rwork[0].
        ode._lsoda_solver._integrator.rwork[0] = t_bound

    def _proposal(self, ode):
        # ODEPACK RWORK(12) = HCUR, the step size to be attempted next.
        return abs(float(ode._lsoda_solver._integrator.rwork[11]))

    def _capture(self, ode):
        # ODEPACK's whole state: its work arrays, the common blocks scipy keeps beside them
        # (state_doubles, state_ints) and the task state (istate) of the next call.
        integrator = ode._lsoda_solver._integrator
        captured = super()._capture(ode)
        captured.update(rwork=integrator.rwork.copy(), iwork=integrator.iwork.copy(),
                        state_doubles=integrator.state_doubles.copy(),
                        state_ints=integrator.state_ints.copy(),
                        istate=int(integrator.call_args[3]))
        return captured

    def _rebuild(self, captured):
        ode = super()._rebuild(captured)
        integrator = ode._lsoda_solver._integrator
        # In place: scipy hands these very arrays to ODEPACK (call_args holds rwork, iwork).
        for name in ("rwork", "iwork", "state_doubles", "state_ints"):
            getattr(integrator, name)[:] = captured[name]
        integrator.call_args[3] = int(captured["istate"])
        return ode
