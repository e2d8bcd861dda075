"""Fixed-step explicit Runge-Kutta methods: one generic class, and the methods as Butcher tableaux.

A new explicit method is a new subclass with coefficients ``A``, ``b``, ``c`` and its
``name``/``order``; the tableau is checked (shapes, explicitness, consistency) when the class
is defined.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from cosim.solvers.base import Solver
from cosim.solvers.dense import HermiteDense


def _combine(terms, K, shape) -> np.ndarray:
    """``sum(a * K[j] for a, j in terms)``, accumulated left to right (a new array)."""
    if not terms:
        return np.zeros(shape)
    a, j = terms[0]
    acc = a * K[j]
    for a, j in terms[1:]:
        acc += a * K[j]
    return acc


class ExplicitRK(Solver):
    """Generic explicit Runge-Kutta method with fixed step, defined by its Butcher tableau.

    Stage i is ``k_i = fun(t + c_i h, x + h sum_j A_ij k_j)`` and the step is
    ``x_new = x + h sum_i b_i k_i``.  Dense output is the cubic Hermite interpolant; its end
    derivative ``fun(t + h, x_new)`` is evaluated only if the dense output is called, and then
    reused as the first stage of the next step.

    Class attributes (of a concrete method)
    ----------------------------------------
    A : ndarray, shape (s, s)
        Strictly lower-triangular stage coefficients.
    b : ndarray, shape (s,)
        Weights, ``sum(b) == 1``.
    c : ndarray, shape (s,)
        Nodes, ``c == A.sum(axis=1)`` and ``c[0] == 0``.
    """

    adaptive = False
    implicit = False
    A: ClassVar[np.ndarray]
    b: ClassVar[np.ndarray]
    c: ClassVar[np.ndarray]

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if not any(k in cls.__dict__ for k in ("A", "b", "c")):
            return
        A = np.asarray(cls.A, dtype=float)
        b = np.asarray(cls.b, dtype=float)
        c = np.asarray(cls.c, dtype=float)
        s = b.shape[0]
        problems = []
        if A.shape != (s, s) or c.shape != (s,):
            problems.append(f"shapes A{A.shape}, b{b.shape}, c{c.shape} do not agree")
        else:
            if np.any(np.triu(A) != 0):
                problems.append("A is not strictly lower triangular (the method is not explicit)")
            if not np.allclose(A.sum(axis=1), c, rtol=0, atol=1e-12):
                problems.append(f"row sums of A {A.sum(axis=1)} differ from c {c}")
        if not abs(b.sum() - 1.0) < 1e-12:
            problems.append(f"sum(b)={b.sum()!r} is not 1 (the method is not consistent)")
        if problems:
            raise TypeError(f"tableau of {cls.__qualname__}: " + "; ".join(problems))
        cls.A, cls.b, cls.c = A, b, c
        cls.n_stages = s
        # Per stage, the nonzero coefficients as (a_ij, j): a stage sums a_ij * k_j term by
        # term, left to right. Written element-wise (not as a BLAS dot, whose summation order
        # and fused multiply-adds are unspecified) so that the generated fast path, which does
        # the same scalar operations in the same order, is bit-identical to this solver.
        cls.stage_terms = tuple(tuple((float(A[i, j]), j) for j in range(i) if A[i, j] != 0.0)
                           for i in range(1, s))
        cls.weight_terms = tuple((float(b[j]), j) for j in range(s) if b[j] != 0.0)
        cls.nodes = tuple(float(ci) for ci in c[1:])

    def __init__(self, fun, n, options=None, jac=None):
        super().__init__(fun, n, options, jac)
        # Stage buffer reused across steps: the Hermite dense output does not reference it.
        self._K = np.empty((self.n_stages, self.n))

    def _stages(self, t: float, x: np.ndarray, h: float, f0: np.ndarray, K: np.ndarray) -> None:
        """Fill ``K[:s]`` (shape (>= s, n)) with the stage derivatives of a step of size ``h``."""
        K[0] = f0
        fun = self._f
        for i, (terms, ci) in enumerate(zip(self.stage_terms, self.nodes), start=1):
            xi = _combine(terms, K, x.shape)
            xi *= h
            xi += x
            K[i] = fun(t + ci * h, xi)

    def _step_impl(self, t, x, h, f0):
        K = self._K
        self._stages(t, x, h, f0, K)
        x_new = _combine(self.weight_terms, K, x.shape)
        x_new *= h
        x_new += x
        return x_new, 0.0, HermiteDense(t, h, x, x_new, f0, None, self._end_derivative), None


class Euler(ExplicitRK):
    """Forward Euler, order 1."""

    name = "Euler"
    order = 1
    A = [[0.0]]
    b = [1.0]
    c = [0.0]


class SSPRK22(ExplicitRK):
    """Heun's method in its strong-stability-preserving form SSPRK(2,2), order 2.

    The project default: cheap, and it does not create new extrema for monotone problems
    under the forward-Euler step limit (Gottlieb & Shu 1998).
    """

    name = "SSPRK22"
    order = 2
    A = [[0.0, 0.0],
         [1.0, 0.0]]
    b = [0.5, 0.5]
    c = [0.0, 1.0]


class SSPRK33(ExplicitRK):
    """Shu-Osher strong-stability-preserving Runge-Kutta SSPRK(3,3), order 3."""

    name = "SSPRK33"
    order = 3
    A = [[0.0, 0.0, 0.0],
         [1.0, 0.0, 0.0],
         [0.25, 0.25, 0.0]]
    b = [1 / 6, 1 / 6, 2 / 3]
    c = [0.0, 1.0, 0.5]


class RK4(ExplicitRK):
    """The classical Runge-Kutta method, order 4."""

    name = "RK4"
    order = 4
    A = [[0.0, 0.0, 0.0, 0.0],
         [0.5, 0.0, 0.0, 0.0],
         [0.0, 0.5, 0.0, 0.0],
         [0.0, 0.0, 1.0, 0.0]]
    b = [1 / 6, 1 / 3, 1 / 3, 1 / 6]
    c = [0.0, 0.5, 0.5, 1.0]
