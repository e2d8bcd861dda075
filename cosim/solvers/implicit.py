"""Implicit one-step methods for stiff systems: diagonally implicit Runge-Kutta (DIRK) tableaux.

One generic class, `DIRK`, solves the stages of any singly diagonally implicit tableau with
an explicit first stage (ESDIRK form; backward Euler is written in it too), so a new method is
new coefficients.  Newton, Jacobian and LU reuse come from `ImplicitSolver`; step-size control
from the base `Solver`.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from cosim.solvers.base import error_norm
from cosim.solvers.dense import HermiteDense
from cosim.solvers.newton import ImplicitSolver


class DIRK(ImplicitSolver):
    """Generic singly diagonally implicit Runge-Kutta method with explicit first stage.

    Stage i >= 1 solves ``z_i = x + h sum_{j<i} A_ij k_j + h gamma k_i`` with
    ``k_i = fun(t + c_i h, z_i)``; ``k_0 = fun(t, x)``.  After Newton converges, ``k_i`` is
    taken from the stage relation ``(z_i - r_i) / (h gamma)`` rather than a new call of
    ``fun``: cheaper, and for stiff components it does not amplify the Newton error.
    For stiffly accurate tableaux (``b == A[-1]``) ``x_new = z_last`` and ``k_last`` serves as
    the next step's first stage (FSAL) and as the end slope of the Hermite dense output.

    The embedded error estimate ``h (b - b_hat) @ K`` is filtered through ``(I - h gamma J)^-1``
    (Hairer & Wanner IV.8): unfiltered, stiff components make it large for steps that are in
    fact accurate, and the controller would crawl.

    Class attributes (of a concrete method)
    ----------------------------------------
    A : ndarray, shape (s, s)
        Lower triangular, first row zero, ``A[i, i] == gamma`` for i >= 1.
    b : ndarray, shape (s,)
    c : ndarray, shape (s,)
    b_hat : ndarray, shape (s,), optional
        Weights of the embedded method; required when ``adaptive``.
    """

    A: ClassVar[np.ndarray]
    b: ClassVar[np.ndarray]
    c: ClassVar[np.ndarray]
    b_hat: ClassVar[np.ndarray | None] = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if not any(k in cls.__dict__ for k in ("A", "b", "c", "b_hat")):
            return
        A = np.asarray(cls.A, dtype=float)
        b = np.asarray(cls.b, dtype=float)
        c = np.asarray(cls.c, dtype=float)
        s = b.shape[0]
        problems = []
        if A.shape != (s, s) or c.shape != (s,) or s < 2:
            problems.append(f"shapes A{A.shape}, b{b.shape}, c{c.shape} do not agree "
                            f"(need s >= 2 with an explicit first stage)")
        else:
            gamma = A[1, 1]
            if np.any(np.triu(A, 1) != 0):
                problems.append("A is not lower triangular")
            if np.any(A[0] != 0):
                problems.append("the first stage is not explicit (A[0] != 0)")
            if not (gamma > 0 and np.all(np.diag(A)[1:] == gamma)):
                problems.append(f"diagonal {np.diag(A)} is not a constant gamma > 0 after "
                                f"the first stage (one LU must serve all stages)")
            if not np.allclose(A.sum(axis=1), c, rtol=0, atol=1e-12):
                problems.append(f"row sums of A {A.sum(axis=1)} differ from c {c}")
        if not abs(b.sum() - 1.0) < 1e-12:
            problems.append(f"sum(b)={b.sum()!r} is not 1")
        E = None
        if cls.b_hat is not None:
            b_hat = np.asarray(cls.b_hat, dtype=float)
            if b_hat.shape != (s,) or not abs(b_hat.sum() - 1.0) < 1e-12:
                problems.append(f"b_hat {b_hat} must have shape ({s},) and sum to 1")
            E = b - b_hat
        elif cls.adaptive:
            problems.append("an adaptive DIRK needs b_hat (the embedded method)")
        if problems:
            raise TypeError(f"tableau of {cls.__qualname__}: " + "; ".join(problems))
        cls.A, cls.b, cls.c, cls.E = A, b, c, E
        cls.n_stages = s
        cls.gamma = float(A[1, 1])
        cls._rows = tuple(np.ascontiguousarray(A[i, :i]) for i in range(1, s))
        cls._nodes = tuple(float(ci) for ci in c[1:])
        cls._stiffly_accurate = bool(np.array_equal(b, A[-1]) and c[-1] == 1.0)

    def __init__(self, fun, n, options=None, jac=None):
        super().__init__(fun, n, options, jac)
        # Error estimate only where it is used: when controlling steps, or when an adaptive
        # method runs with fixed steps on request (then it is reported in StepResult.error).
        self._estimate = self.E is not None and type(self).adaptive

    def _step_impl(self, t, x, h, f0):
        opts = self.options
        hg = h * self.gamma
        scale = np.abs(x)
        scale *= opts.rtol
        scale += opts.atol
        self._prepare_jacobian(t, x)
        while True:
            self._factor(hg)
            self._slow = False
            K, z, failure = self._stages(t, x, h, hg, f0, scale)
            if failure is None:
                break
            if not self._newton_failed(t, x, h, *failure):
                return x, math.inf, None, None
        # Slow convergence: the Jacobian drifted; take a new one at the start of the next step.
        self._jac_refresh = self._slow
        if self._stiffly_accurate:
            x_new, f_new = z, K[-1]
        else:
            x_new = np.dot(self.b, K)
            x_new *= h
            x_new += x
            f_new = None
        err = 0.0
        if self._estimate:
            e = np.dot(self.E, K)
            e *= h
            err = error_norm(self._solve(e), x, x_new, opts.rtol, opts.atol)
        dense = HermiteDense(t, h, x, x_new, f0, f_new, self._end_derivative)
        return x_new, err, dense, f_new

    def _stages(self, t, x, h, hg, f0, scale):
        """Solve the stages; returns ``(K, z_last, None)`` or ``(None, None, (norm, iters))``."""
        K = np.empty((self.n_stages, self.n))  # fresh: the dense output and FSAL keep K[-1]
        K[0] = f0
        z = None
        for i, (row, ci) in enumerate(zip(self._rows, self._nodes), start=1):
            r = np.dot(row, K[:i])
            r *= h
            r += x
            z = hg * K[i - 1]  # predictor: continue with the latest slope
            z += r
            ok, norm, iters = self._newton(t + ci * h, z, r, hg, scale)
            if not ok:
                return None, None, (norm, iters)
            k = z - r
            k /= hg
            K[i] = k
        return K, z, None


class BackwardEuler(DIRK):
    """Backward (implicit) Euler, fixed step, L-stable, order 1.

    Written as the ESDIRK tableau ``c = [0, 1]``, ``A = [[0, 0], [0, 1]]``: the explicit
    first stage costs nothing with FSAL and gives the Euler predictor and the Hermite slope.
    """

    name = "BackwardEuler"
    order = 1
    adaptive = False
    A = [[0.0, 0.0],
         [0.0, 1.0]]
    b = [0.0, 1.0]
    c = [0.0, 1.0]


_G = 1767732205903 / 4055673282236


class ESDIRK32(DIRK):
    """Kennedy & Carpenter ESDIRK3(2)4L[2]SA: L-stable, stiffly accurate, order 3, stage order 2.

    Adaptive with its embedded second-order method.  This is the implicit tableau of
    ARK3(2)4L[2]SA.

    References
    ----------
    C. A. Kennedy, M. H. Carpenter, "Additive Runge-Kutta schemes for convection-diffusion-
    reaction equations", Appl. Numer. Math. 44(1-2), 139-181, 2003.
    """

    name = "ESDIRK32"
    order = 3
    error_order = 2
    adaptive = True
    A = [[0.0, 0.0, 0.0, 0.0],
         [_G, _G, 0.0, 0.0],
         [2746238789719 / 10658868560708, -640167445237 / 6845629431997, _G, 0.0],
         [1471266399579 / 7840856788654, -4482444167858 / 7529755066697,
          11266239266428 / 11593286722821, _G]]
    b = A[-1]
    c = [0.0, 2 * _G, 3 / 5, 1.0]
    b_hat = [2756255671327 / 12835298489170, -10771552573575 / 22201958757719,
             9247589265047 / 10645013368117, 2193209047091 / 5459859503100]


class ESDIRK32Fixed(ESDIRK32):
    """`ESDIRK32` with fixed steps (no error estimate): an L-stable third-order method for
    stiff models run at a fixed rate."""

    name = "ESDIRK32Fixed"
    adaptive = False
