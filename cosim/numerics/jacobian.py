"""Finite-difference Jacobians: the one implementation behind every ``dF/dx`` in the engine.

Callers and their rules (each keeps the numbers it always had):

- algebraic loops (Newton fallback) and the co-simulation master (Newton acceleration):
  forward, ``h_j = 1e-7 * max(1, |x_j|)``, divided by the nominal ``h_j``;
- implicit solvers (``cosim.solvers.newton``): forward, ``h_j = sqrt(eps) * max(floor, |x_j|)``
  with ``floor = max(atol/rtol, 1e-10)``, divided by the represented increment;
- linearization (``cosim.run.analysis``): central, ``h_j = eps**(1/3) * max(1, |x_j|)`` (or the
  caller's ``eps``), divided by the represented increment.

The step rule is ``h_j = rel * max(floor, |x_j|)``: relative to the component, with ``floor``
as the magnitude below which a component counts as zero. ``rel ~ sqrt(eps)`` balances the
forward difference's truncation error ``O(h)`` against rounding ``O(eps/h)``;
``rel ~ eps**(1/3)`` does the same for the central difference's ``O(h**2)``.
"Represented" divides by the increment actually stored, ``(x_j + h_j) - x_j`` (forward) or
``(x_j + h_j) - (x_j - h_j)`` (central), which removes the rounding of ``x_j + h_j`` from the
quotient; "nominal" divides by ``h_j`` itself.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["CENTRAL_REL_STEP", "FORWARD_REL_STEP", "NonFiniteJacobian", "fd_jacobian",
           "forward_points"]

#: Relative step of the forward differences of the algebraic-loop and master Newton iterations.
FORWARD_REL_STEP = 1e-7

#: Relative step of central differences: ``eps**(1/3)`` (about 6e-6) balances truncation
#: ``O(h**2)`` against rounding ``O(eps/h)``.
CENTRAL_REL_STEP = float(np.finfo(np.float64).eps ** (1.0 / 3.0))


class NonFiniteJacobian(ArithmeticError):
    """A column of the Jacobian is not finite (raised only with ``check_finite=True``).

    Attributes
    ----------
    column : int
        The perturbed component ``j``.
    step : float
        The nominal step ``h_j``.
    """

    def __init__(self, column: int, step: float):
        super().__init__(f"column {column} is not finite (step {step:.3g})")
        self.column = column
        self.step = step


def fd_jacobian(fun: Callable[[np.ndarray], np.ndarray], x: np.ndarray,
                f0: np.ndarray | None = None, *, rel: float, floor: float = 1.0,
                central: bool = False, represented_step: bool = True,
                check_finite: bool = False) -> np.ndarray:
    """Finite-difference Jacobian ``J[i, j] = d fun_i / d x_j`` at ``x``.

    Parameters
    ----------
    fun : callable
        ``fun(v) -> ndarray, shape (m,)`` for ``v`` of shape ``(n,)``. Each call gets its own
        copy of ``x`` with one component changed, so ``fun`` may keep or modify it. Calls come
        in column order; for central differences ``x + h`` before ``x - h``.
    x : ndarray, shape (n,)
        The point (float64); not modified.
    f0 : ndarray, shape (m,), optional
        ``fun(x)``, when the caller has it (forward differences only); otherwise it is
        evaluated first.
    rel : float
        Relative step: ``h_j = rel * max(floor, |x_j|)``.
    floor : float
        Magnitude below which a component's step no longer shrinks with it.
    central : bool
        Central differences ``(fun(x + h e_j) - fun(x - h e_j)) / (2h)`` (two calls per column,
        error ``O(h**2)``) instead of forward ``(fun(x + h e_j) - f0) / h`` (one call, ``O(h)``).
    represented_step : bool
        Divide by the increment as represented in floating point (see the module docstring);
        False divides by the nominal ``h_j`` (forward only).
    check_finite : bool
        Raise :class:`NonFiniteJacobian` at the first column with an inf or NaN, before
        evaluating the next column.

    Returns
    -------
    ndarray, shape (m, n)
        With ``n == 0`` the shape is ``(m, 0)``, ``m`` from ``f0`` or one call of ``fun(x)``.
    """
    n = x.size
    if central:
        if n == 0:
            return np.zeros((fun(x).size, 0))
        cols = []
        for j in range(n):
            h = rel * max(floor, abs(x[j]))
            xp, xm = x.copy(), x.copy()
            xp[j] += h
            xm[j] -= h
            col = (fun(xp) - fun(xm)) / (xp[j] - xm[j])
            if check_finite and not np.all(np.isfinite(col)):
                raise NonFiniteJacobian(j, h)
            cols.append(col)
        return np.column_stack(cols)
    if f0 is None:
        f0 = fun(x)
    J = np.empty((f0.size, n))
    for j, (xp, d, h) in enumerate(forward_points(x, rel=rel, floor=floor,
                                                  represented_step=represented_step)):
        J[:, j] = (fun(xp) - f0) / d
        if check_finite and not np.all(np.isfinite(J[:, j])):
            raise NonFiniteJacobian(j, h)
    return J


def forward_points(x: np.ndarray, *, rel: float, floor: float = 1.0,
                   represented_step: bool = True):
    """The points and divisors of :func:`fd_jacobian`'s forward differences, column by
    column: for a caller that evaluates ``fun`` elsewhere (the co-simulation master's
    Newton step, whose evaluations are rounds of messages).

    Yields
    ------
    xp : ndarray, shape (n,)
        A copy of ``x`` with component ``j`` stepped by ``h_j``.
    d : float
        What column ``j``'s difference is divided by (see ``represented_step``).
    h : float
        The nominal step ``h_j``.
    """
    for j in range(x.size):
        h = rel * max(floor, abs(x[j]))
        xp = x.copy()
        xp[j] += h
        yield xp, (xp[j] - x[j] if represented_step else h), h
