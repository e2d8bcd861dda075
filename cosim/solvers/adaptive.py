"""Adaptive explicit Runge-Kutta pairs with first-same-as-last stage and dense output.

The pair is data: the tableau of the propagating method, the error weights ``E`` over all
``s + 1`` stages (the last is ``fun(t + h, x_new)``, which is also the first stage of the next
step), and the interpolation matrix ``P``.  Step-size control is not here: the base class
`Solver` runs one controller for every adaptive method.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from cosim.solvers.base import error_norm
from cosim.solvers.dense import PolynomialDense
from cosim.solvers.explicit import ExplicitRK


class EmbeddedRK(ExplicitRK):
    """Explicit Runge-Kutta pair with local extrapolation, FSAL and a continuous extension.

    Class attributes (of a concrete pair), in addition to those of `ExplicitRK`
    ---------------------------------------------------------------------------
    E : ndarray, shape (s + 1,)
        Error weights: the local error estimate is ``h * E @ K`` with ``K`` the ``s`` stages
        and ``fun(t + h, x_new)``.
    P : ndarray, shape (s + 1, m)
        Dense output ``x0 + h * (K.T @ P) @ [th, ..., th**m]``.
    error_order : int
        Order of the embedded (error-estimating) method.
    """

    adaptive = True
    E: ClassVar[np.ndarray]
    P: ClassVar[np.ndarray]

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "E" not in cls.__dict__ and "P" not in cls.__dict__:
            return
        s = cls.n_stages
        E = np.asarray(cls.E, dtype=float)
        P = np.asarray(cls.P, dtype=float)
        problems = []
        if E.shape != (s + 1,):
            problems.append(f"E has shape {E.shape}, expected ({s + 1},)")
        elif not abs(E.sum()) < 1e-12:
            problems.append(f"sum(E)={E.sum()!r} is not 0 (both methods must be consistent)")
        if P.ndim != 2 or P.shape[0] != s + 1:
            problems.append(f"P has shape {P.shape}, expected ({s + 1}, m)")
        elif not np.allclose(P.sum(axis=1), np.append(cls.b, 0.0), rtol=0, atol=1e-12):
            problems.append("P does not reproduce x_new at th=1 (its rows must sum to [b, 0])")
        if problems:
            raise TypeError(f"tableau of {cls.__qualname__}: " + "; ".join(problems))
        cls.E, cls.P = E, P

    def _step_impl(self, t, x, h, f0):
        s = self.n_stages
        # A fresh K per attempt: the dense output of the accepted step keeps it.
        K = np.empty((s + 1, self.n))
        self._stages(t, x, h, f0, K)
        x_new = np.dot(self.b, K[:s])
        x_new *= h
        x_new += x
        K[s] = self._f(t + h, x_new)
        err = np.dot(self.E, K)
        err *= h
        opts = self.options
        err_norm = error_norm(err, x, x_new, opts.rtol, opts.atol)
        return x_new, err_norm, PolynomialDense(t, h, x, K, self.P), K[s]


class RK23(EmbeddedRK):
    """Bogacki-Shampine 3(2) pair; steps with the third-order formula, cubic Hermite dense output.

    References
    ----------
    P. Bogacki, L. F. Shampine, "A 3(2) pair of Runge-Kutta formulas", Appl. Math. Lett. 2(4),
    321-325, 1989.  Coefficients as scipy ``RK23``.
    """

    name = "RK23"
    order = 3
    error_order = 2
    A = [[0, 0, 0],
         [1 / 2, 0, 0],
         [0, 3 / 4, 0]]
    b = [2 / 9, 1 / 3, 4 / 9]
    c = [0, 1 / 2, 3 / 4]
    E = [5 / 72, -1 / 12, -1 / 9, 1 / 8]
    P = [[1, -4 / 3, 5 / 9],
         [0, 1, -2 / 3],
         [0, 4 / 3, -8 / 9],
         [0, -1, 1]]


class RK45(EmbeddedRK):
    """Dormand-Prince 5(4) pair with Shampine's quartic continuous extension.

    References
    ----------
    J. R. Dormand, P. J. Prince, "A family of embedded Runge-Kutta formulae", J. Comput. Appl.
    Math. 6(1), 19-26, 1980.  L. W. Shampine, "Some practical Runge-Kutta formulas", Math.
    Comp. 46(173), 135-150, 1986.  Coefficients as scipy ``RK45``.
    """

    name = "RK45"
    order = 5
    error_order = 4
    A = [[0, 0, 0, 0, 0, 0],
         [1 / 5, 0, 0, 0, 0, 0],
         [3 / 40, 9 / 40, 0, 0, 0, 0],
         [44 / 45, -56 / 15, 32 / 9, 0, 0, 0],
         [19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729, 0, 0],
         [9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656, 0]]
    b = [35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84]
    c = [0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1]
    E = [-71 / 57600, 0, 71 / 16695, -71 / 1920, 17253 / 339200, -22 / 525, 1 / 40]
    P = [[1, -8048581381 / 2820520608, 8663915743 / 2820520608, -12715105075 / 11282082432],
         [0, 0, 0, 0],
         [0, 131558114200 / 32700410799, -68118460800 / 10900136933,
          87487479700 / 32700410799],
         [0, -1754552775 / 470086768, 14199869525 / 1410260304, -10690763975 / 1880347072],
         [0, 127303824393 / 49829197408, -318862633887 / 49829197408,
          701980252875 / 199316789632],
         [0, -282668133 / 205662961, 2019193451 / 616988883, -1453857185 / 822651844],
         [0, 40617522 / 29380423, -110615467 / 29380423, 69997945 / 29380423]]
