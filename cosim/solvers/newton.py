"""Newton machinery of implicit solvers: Jacobian, LU of the iteration matrix, simplified Newton.

Stage equations of diagonally implicit methods have the form ``z = r + hg * fun(t, z)``; all of
them share the iteration matrix ``M = I - hg * J``.  ``J`` is kept across steps and ``M``'s LU
factorization across stages and steps while Newton converges, because a Jacobian costs ``n``
right-hand-side calls (finite differences) and an LU O(n**3):

* ``M`` is re-factored only when ``hg`` changes or ``J`` was re-evaluated;
* ``J`` is re-evaluated at the start of a step when the previous step's Newton iteration
  converged slowly, and immediately (then the attempt is repeated) when Newton fails with a
  ``J`` that was not evaluated in the current step;
* Newton failing with a fresh ``J`` rejects the attempt (adaptive: the step shrinks) or raises
  `ConvergenceError` (fixed step).
"""

from __future__ import annotations

import math

import numpy as np

from cosim.errors import ConvergenceError
from cosim.numerics.jacobian import fd_jacobian
from cosim.solvers.base import Solver, rms_norm
from cosim.solvers.options import EPS

SQRT_EPS = math.sqrt(EPS)
#: Re-evaluate J for the next step if Newton needed more than 2 iterations at a contraction
#: rate above this (scipy Radau's rule): the Jacobian has drifted from the solution.
SLOW_RATE = 1e-3
#: A contraction rate this close to 1 means divergence or stagnation.
DIVERGING_RATE = 0.99


class ImplicitSolver(Solver):
    """Base of implicit solvers: owns ``J``, the LU of ``I - hg J``, and the Newton iteration.

    Subclasses call `_prepare_jacobian` once per attempt, `_factor` before solving stages
    with a given ``hg``, `_newton` per stage, and `_newton_failed` when it returns False.
    """

    implicit = True

    def __init__(self, fun, n, options=None, jac=None):
        super().__init__(fun, n, options, jac)
        opts = self.options
        self._newton_tol = opts.newton_tolerance
        self._eye = np.eye(self.n)
        # scipy.linalg is imported with the first implicit solver, not with cosim: commands
        # that never integrate (cosim check, plan, --help) start without it.
        from scipy.linalg import lu_factor
        from scipy.linalg.lapack import dgetrs
        self._lu_factor, self._getrs = lu_factor, dgetrs
        # Below this magnitude a component counts as zero for the finite-difference increment.
        self._fd_floor = max(opts.atol / opts.rtol, 1e-10)
        self._J = None
        self._jac_step = -1        # value of stats['naccept'] when J was evaluated
        self._jac_refresh = False  # re-evaluate J at the next step (slow Newton convergence)
        self._lu = None            # (lu, piv) of I - _lu_hg * J
        self._lu_hg = None
        self._eta = 1.0            # Newton convergence factor carried to the next iteration
        self._slow = False         # slow convergence seen in the current attempt

    # ------------------------------------------------------------------ Jacobian and LU
    def _jac_is_current(self) -> bool:
        """Whether J was evaluated at the start of the current step (no step accepted since)."""
        return self._jac_step == self.stats["naccept"]

    def _prepare_jacobian(self, t: float, x: np.ndarray) -> None:
        """Make sure a Jacobian exists, re-evaluating it if the last step asked for that."""
        if self._J is None or (self._jac_refresh and not self._jac_is_current()):
            self._evaluate_jacobian(t, x)

    def _evaluate_jacobian(self, t: float, x: np.ndarray) -> None:
        """J at ``(t, x)``: the user's ``jac`` or forward differences (n + 1 calls of fun)."""
        self.stats["njev"] += 1
        if self.jac is not None:
            J = np.array(self.jac(t, x), dtype=float)
            if J.shape != (self.n, self.n):
                raise ValueError(f"{self.name}: jac(t, x) returned shape {J.shape}, "
                                 f"expected {(self.n, self.n)}")
        else:
            # A true f(t, x), evaluated first: the cached first stage may come from a Newton
            # relation. Steps sqrt(eps) * max(floor, |x_j|), divided as represented.
            J = fd_jacobian(lambda v: self._f(t, v), x, rel=SQRT_EPS, floor=self._fd_floor)
        self._J = J
        self._jac_step = self.stats["naccept"]
        self._jac_refresh = False
        self._lu = None

    def _factor(self, hg: float) -> None:
        """LU of ``I - hg J`` unless the current one was formed with the same ``hg``."""
        if self._lu is not None and self._lu_hg == hg:
            return
        M = self._eye - hg * self._J
        self._lu = self._lu_factor(M, overwrite_a=True, check_finite=False)
        self._lu_hg = hg
        self.stats["nlu"] += 1

    def _solve(self, v: np.ndarray) -> np.ndarray:
        """``(I - hg J)^{-1} v`` with the current factorization.

        LAPACK ``getrs`` on the ``lu_factor`` factors, as ``scipy.linalg.lu_solve`` does, but
        without its ~5 us of argument checking: this runs once per Newton iteration.
        """
        return self._getrs(self._lu[0], self._lu[1], v)[0]

    # ------------------------------------------------------------------ Newton
    def _newton(self, t: float, z: np.ndarray, r: np.ndarray, hg: float,
                scale: np.ndarray) -> tuple[bool, float, int]:
        """Solve ``z = r + hg * fun(t, z)`` by simplified Newton, updating ``z`` in place.

        Convergence is judged from the contraction rate, as in Hairer & Wanner's RADAU5:
        the error left after a correction ``dz`` is about ``rate / (1 - rate) * |dz|``; the
        first iteration borrows the rate of the previous solve, so an easy stage costs one
        call of ``fun``.

        Parameters
        ----------
        t : float
            Time of the stage [s].
        z : ndarray, shape (n,)
            Initial guess, overwritten with the solution.
        r : ndarray, shape (n,)
            Known part of the stage equation.
        hg : float
            ``h * gamma``; the LU of ``I - hg J`` must be current.
        scale : ndarray, shape (n,)
            ``atol + rtol * |x|``: corrections are measured in these units.

        Returns
        -------
        converged : bool
        norm : float
            Scaled norm of the last correction.
        iterations : int
        """
        tol = self._newton_tol
        nmax = self.options.newton_max
        eta = max(self._eta, EPS) ** 0.8
        dz_old = math.inf
        dz_norm = math.inf
        for k in range(nmax):
            res = hg * self._f(t, z)
            res += r
            res -= z          # r + hg f(z) - z: minus the residual
            dz = self._solve(res)
            z += dz
            self.stats["nnewton"] += 1
            dz /= scale
            dz_norm = rms_norm(dz)
            if not dz_norm < math.inf:
                return False, dz_norm, k + 1
            if k > 0:
                rate = dz_norm / dz_old
                if rate >= DIVERGING_RATE:
                    return False, dz_norm, k + 1  # diverging or stagnating
                if self.adaptive and rate ** (nmax - 1 - k) / (1 - rate) * dz_norm > tol:
                    # Too slow to make it in the iterations left: a smaller step is cheaper.
                    # (A fixed-step solver has no smaller step, so it keeps iterating.)
                    return False, dz_norm, k + 1
                eta = rate / (1.0 - rate)
                if k > 1 and rate > SLOW_RATE:
                    self._slow = True
            if eta * dz_norm <= tol or dz_norm == 0.0:
                self._eta = eta
                return True, dz_norm, k + 1
            dz_old = dz_norm
        return False, dz_norm, nmax

    def _newton_failed(self, t: float, x: np.ndarray, h: float, norm: float,
                       iterations: int) -> bool:
        """Handle a failed Newton solve; True if the attempt should be repeated.

        A stale Jacobian is re-evaluated (repeat).  With a fresh one, an adaptive solver
        gives up the attempt (the controller shrinks ``h``) and a fixed-step one raises.
        """
        self._eta = 1.0  # the borrowed rate was wrong; judge the next solve afresh
        if not self._jac_is_current():
            self._evaluate_jacobian(t, x)
            return True
        if self.adaptive:
            return False
        raise ConvergenceError(
            f"{self.name} Newton iteration (step h={h:.6g} s)", iterations, norm, t=t,
            remedy="use a smaller step, an adaptive implicit solver (ESDIRK32, BDF, Radau), "
                   "or raise SolverOptions.newton_max / newton_tol")

    # ------------------------------------------------------------------ checkpoint, reset
    def _get_extra_state(self):
        return {
            "J": None if self._J is None else self._J.copy(),
            "jac_step": self._jac_step,
            "jac_refresh": self._jac_refresh,
            "lu": None if self._lu is None else self._lu[0].copy(),
            "piv": None if self._lu is None else self._lu[1].copy(),
            "lu_hg": self._lu_hg,
            "eta": self._eta,
        }

    def _set_extra_state(self, state):
        self._J = None if state["J"] is None else np.array(state["J"], dtype=float)
        self._jac_step = int(state["jac_step"])
        self._jac_refresh = bool(state["jac_refresh"])
        if state["lu"] is None:
            self._lu = None
        else:
            # LAPACK layout (Fortran order, int32 pivots), whatever a codec made of them.
            self._lu = (np.array(state["lu"], dtype=float, order="F"),
                        np.array(state["piv"], dtype=np.int32))
        self._lu_hg = state["lu_hg"]
        self._eta = float(state["eta"])

    def _reset_extra(self, t, x):
        # J and its LU stay as an approximation (Newton failing re-evaluates them); but J is
        # no longer "current" and the borrowed convergence rate means nothing after a jump.
        self._jac_step = -1
        self._eta = 1.0
