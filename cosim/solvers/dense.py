"""Continuous extensions ("dense output") of one step: ``x(tq)`` for ``t <= tq <= t + h``.

The simulator calls them to locate zero crossings inside a step, often many times per step,
so each object does its setup once, on the first call, and then costs a few numpy operations
per evaluation.  Each holds its own arrays (never buffers a solver reuses), so it stays valid
after later steps.
"""

from __future__ import annotations

from typing import Callable

import numpy as np


class HermiteDense:
    """Cubic Hermite interpolant through ``(x0, f0)`` at ``t`` and ``(x1, f1)`` at ``t + h``.

    Its local error is O(h**4), so it does not lower the accuracy of methods up to order 3,
    and it needs no extra stage: ``f1`` is often known (FSAL), otherwise it is evaluated on
    the first call only.

    Parameters
    ----------
    t, h : float
        Start and size of the step [s].
    x0, x1 : ndarray, shape (n,)
        State at ``t`` and at ``t + h``.
    f0 : ndarray, shape (n,)
        ``fun(t, x0)``.
    f1 : ndarray, shape (n,) or None
        ``fun(t + h, x1)``; None to have ``f1_source(t + h, x1)`` compute it when first needed.
    f1_source : callable, optional
        ``(t1, x1) -> f1``, required when ``f1`` is None.
    """

    __slots__ = ("t", "h", "x0", "x1", "f0", "f1", "_f1_source", "_dx", "_hf0", "_hf1")

    def __init__(self, t: float, h: float, x0: np.ndarray, x1: np.ndarray, f0: np.ndarray,
                 f1: np.ndarray | None = None,
                 f1_source: Callable[[float, np.ndarray], np.ndarray] | None = None):
        self.t = t
        self.h = h
        self.x0 = x0
        self.x1 = x1
        self.f0 = f0
        self.f1 = f1
        self._f1_source = f1_source
        self._dx = None

    def __call__(self, tq: float) -> np.ndarray:
        """State at ``tq``, shape (n,)."""
        if self._dx is None:
            if self.f1 is None:
                self.f1 = self._f1_source(self.t + self.h, self.x1)
            self._dx = self.x1 - self.x0
            self._hf0 = self.h * self.f0
            self._hf1 = self.h * self.f1
        th = (tq - self.t) / self.h
        # x0 + th dx + th (th - 1) [(1 - 2 th) dx + (th - 1) h f0 + th h f1]
        # (Hairer's form: exact at both ends and cheap in scalars).
        a = th * (th - 1.0)
        return self.x0 + (th + a * (1.0 - 2.0 * th)) * self._dx + (a * (th - 1.0)) * self._hf0 \
            + (a * th) * self._hf1


class PolynomialDense:
    """Interpolant ``x0 + h * (K.T @ P) @ [th, th**2, ..., th**m]``, ``th = (tq - t) / h``.

    This is the form of the continuous extensions of Runge-Kutta pairs (scipy ``RkDenseOutput``):
    the coefficients of the polynomial in ``th`` are combinations of the stages.

    Parameters
    ----------
    t, h : float
        Start and size of the step [s].
    x0 : ndarray, shape (n,)
        State at ``t``.
    K : ndarray, shape (s, n)
        Stage derivatives of the step (owned by this object from now on).
    P : ndarray, shape (s, m)
        Interpolation coefficients of the method.
    """

    __slots__ = ("t", "h", "x0", "_K", "_P", "_hQ", "_m")

    def __init__(self, t: float, h: float, x0: np.ndarray, K: np.ndarray, P: np.ndarray):
        self.t = t
        self.h = h
        self.x0 = x0
        self._K = K
        self._P = P
        self._hQ = None
        self._m = P.shape[1]

    def __call__(self, tq: float) -> np.ndarray:
        """State at ``tq``, shape (n,)."""
        if self._hQ is None:
            self._hQ = self.h * np.dot(self._K.T, self._P)  # (n, m), once per step
        th = (tq - self.t) / self.h
        powers = np.empty(self._m)
        p = 1.0
        for i in range(self._m):
            p *= th
            powers[i] = p
        return self.x0 + np.dot(self._hQ, powers)
