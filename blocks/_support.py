"""Shared helpers of the block library: parameter checks, clipping and kernel source snippets.

Every block validates its parameters through :class:`Params`, so every message has one shape,
``"<Class> '<name>': <parameter> must be ..., got ..."``. Operations that a block's reference
method and its fast-path :class:`~cosim.model.block.Kernel` must both perform (clipping, piecewise
linear interpolation, affine forms) live here side by side in each spelling a block needs —
numpy arrays, Python floats, kernel source — with the same IEEE operations in the same order.
"""

from __future__ import annotations

import math
import numbers
from bisect import bisect_right

import numpy as np

from cosim.errors import ModelError

#: Tolerance of time switches, in sample periods. A switch time (a step time, a pulse edge, a
#: FromArray sample) that falls on a tick is hit at that tick although ``t = t0 + k*dt`` is
#: rounded: switches are decided on ``t + TIME_TOL*dt``.
TIME_TOL = 1e-9

#: Longest piecewise-linear table that gets a fast-path kernel (the kernel is one chained
#: conditional expression with one branch per segment).
KERNEL_MAX_SEGMENTS = 64


def lit(x) -> str:
    """Kernel literal of a float parameter.

    ``repr`` round-trips a finite float exactly; ``inf`` and ``nan`` are not names in the
    generated code, so non-finite values become ``float('inf')`` etc. (a NaN's payload is not
    kept).
    """
    x = float(x)
    return repr(x) if math.isfinite(x) else f"float('{x!r}')"


def read_only(a: np.ndarray) -> np.ndarray:
    """``a`` as a C-contiguous float64 copy that cannot be written (it is shared by outputs)."""
    a = np.array(a, dtype=np.float64)
    a.flags.writeable = False
    return a


class Params:
    """Validates the parameters of one block; every error names the block and the parameter.

    Parameters
    ----------
    block : Block
        The block being constructed (only its class name is used, so this works before
        ``Block.__init__``).
    name : str
        The block's name.
    """

    def __init__(self, block, name):
        self.where = f"{type(block).__name__} {name!r}"

    def error(self, param: str, message: str) -> ModelError:
        """A :class:`ModelError` ``"<Class> '<name>': <param> <message>"``."""
        return ModelError(f"{self.where}: {param} {message}")

    def real(self, param: str, value, *, positive=False, nonnegative=False) -> float:
        """A finite real number (optionally > 0 or >= 0) as a float."""
        ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
        v = float(value) if ok else math.nan
        if not math.isfinite(v):
            raise self.error(param, f"must be a finite number, got {value!r}")
        if positive and not v > 0:
            raise self.error(param, f"must be > 0, got {value!r}")
        if nonnegative and not v >= 0:
            raise self.error(param, f"must be >= 0, got {value!r}")
        return v

    def bound(self, param: str, value) -> float:
        """A limit: a real number or an infinity (unbounded), not NaN."""
        ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
        v = float(value) if ok else math.nan
        if math.isnan(v):
            raise self.error(param, f"must be a number (or +-inf for no limit), got {value!r}")
        return v

    def optional_real(self, param: str, value) -> float | None:
        """None, or a finite real number."""
        return None if value is None else self.real(param, value)

    def array(self, param: str, value, *, ndim: int | None = None,
              finite: bool = True) -> np.ndarray:
        """A finite float64 array (a scalar gives shape ``(1,)`` unless ``ndim`` says 2).

        ``ndim=1`` requires a vector (a scalar becomes ``(1,)``); ``ndim=2`` a matrix (a
        scalar becomes ``(1, 1)``). ``finite=False`` lets NaN and infinities through (a block
        whose parameter may mean them, on the user's explicit request).
        """
        try:
            a = np.array(value, dtype=np.float64)
        except (TypeError, ValueError):
            raise self.error(param, f"must be a number or an array of numbers, got "
                                    f"{value!r}") from None
        if a.ndim == 0:
            a = a.reshape((1, 1) if ndim == 2 else (1,))
        if ndim is not None and a.ndim != ndim:
            what = "a vector (1-D)" if ndim == 1 else "a matrix (2-D)"
            raise self.error(param, f"must be {what}, got shape {a.shape}")
        if finite and not np.all(np.isfinite(a)):
            raise self.error(param, f"must be finite, got {value!r}")
        return a

    def choice(self, param: str, value, allowed):
        """``value`` if it is one of ``allowed`` (the message lists them)."""
        if not isinstance(value, str) or value not in allowed:
            raise self.error(param, f"must be one of {', '.join(map(repr, allowed))}, "
                                    f"got {value!r}")
        return value

    def count(self, param: str, value, *, minimum: int = 1) -> int:
        """An integer >= ``minimum``."""
        if not isinstance(value, numbers.Integral) or isinstance(value, bool) \
                or value < minimum:
            raise self.error(param, f"must be an integer >= {minimum}, got {value!r}")
        return int(value)

    def limits(self, lower, upper, names=("lower", "upper")):
        """Optional lower/upper limits (None = unbounded), scalars or arrays, lower <= upper.

        Returns each as None, a float, or a read-only array.
        """
        out = []
        for param, v in zip(names, (lower, upper)):
            if v is None:
                out.append(None)
            else:
                a = self.array(param, v)
                out.append(float(a[0]) if a.shape == (1,) else read_only(a))
        lo, hi = out
        if lo is not None and hi is not None:
            try:
                bad = not np.all(np.asarray(lo) <= np.asarray(hi))
            except ValueError:
                raise self.error(f"{names[0]}/{names[1]}", "must have broadcastable shapes, "
                                 f"got {np.shape(lo)} and {np.shape(hi)}") from None
            if bad:
                raise self.error(f"{names[0]}/{names[1]}", f"must satisfy {names[0]} <= "
                                 f"{names[1]}, got {lower!r} and {upper!r}")
        return lo, hi


# -- clipping: values below lower become lower, above upper become upper, NaN passes -------
# Written with comparisons (not np.clip / np.maximum, whose handling of signed zeros differs
# from a comparison's), so the three spellings select the same value bit for bit.

def clip_array(v: np.ndarray, lower, upper) -> np.ndarray:
    """Clip an array to optional limits (None, float or array)."""
    if upper is not None:
        v = np.where(v > upper, upper, v)
    if lower is not None:
        v = np.where(v < lower, lower, v)
    return v


def clip_float(v: float, lower, upper) -> float:
    """Clip a float to optional float limits (selects the same value as :func:`clip_expr`)."""
    if lower is not None and v < lower:
        return lower
    if upper is not None and v > upper:
        return upper
    return v


def clip_expr(expr: str, lower, upper) -> str:
    """Kernel source clipping ``expr`` to optional float limits.

    Python's ``min(v, hi)`` is ``hi if hi < v else v`` and ``max(v, lo)`` is
    ``lo if lo > v else v``: the same selections as :func:`clip_float`, NaN and signed zeros
    included, with ``expr`` evaluated once.
    """
    if upper is not None:
        expr = f"min({expr}, {lit(upper)})"
    if lower is not None:
        expr = f"max({expr}, {lit(lower)})"
    return expr


# -- affine forms: c0*v0 + c1*v1 + ... evaluated left to right -----------------------------

def affine_terms(coefs, variables) -> list[tuple[float, object]]:
    """The nonzero terms ``(coefficient, variable)`` of a linear form, in order.

    Zero coefficients are structural zeros: they are dropped from both the reference and the
    kernel, so they cost nothing (a canonical realisation is mostly zeros).
    """
    return [(float(c), v) for c, v in zip(coefs, variables) if c != 0]


def affine_value(terms, values) -> float:
    """``c0*values[v0] + c1*values[v1] + ...``, left to right (0.0 with no terms)."""
    if not terms:
        return 0.0
    c, v = terms[0]
    acc = c * values[v]
    for c, v in terms[1:]:
        acc = acc + c * values[v]
    return acc


def affine_expr(terms, names) -> str:
    """Kernel source of :func:`affine_value`; ``names[v]`` is the source of variable ``v``."""
    if not terms:
        return "0.0"
    return "(" + " + ".join(f"{lit(c)} * {names[v]}" for c, v in terms) + ")"


# -- piecewise-linear interpolation (numpy.interp's formula) --------------------------------

def segment_slopes(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Slopes ``(y[j+1]-y[j]) / (x[j+1]-x[j])`` of each segment (rows of ``y`` for 2-D)."""
    dx = np.diff(x)
    return np.diff(y, axis=0) / (dx[:, None] if y.ndim == 2 else dx)


def interp_expr(var: str, x, y, slope, extrapolate: bool) -> str:
    """Kernel source of :func:`interp_array` for a scalar table (``x``, ``y`` 1-D).

    Inside segment ``j`` the value is ``slope[j]*(var - x[j]) + y[j]`` (numpy.interp's
    formula); at the last breakpoint ``y[-1]``; outside the table the end values (clip) or the
    end segments' lines (extrapolate).
    """
    n = len(x)
    if n == 1:
        return f"{lit(y[0])}"

    def seg(j):
        return f"{lit(slope[j])} * ({var} - {lit(x[j])}) + {lit(y[j])}"

    first = seg(0) if extrapolate else lit(y[0])
    parts = [f"{first} if {var} < {lit(x[0])}"]
    parts += [f"{seg(j)} if {var} < {lit(x[j + 1])}" for j in range(n - 2)]
    last = "==" if extrapolate else ">="
    parts.append(f"{lit(y[-1])} if {var} {last} {lit(x[-1])}")
    return "(" + " else ".join(parts) + f" else {seg(n - 2)})"


def interp_at(u: float, x: list, y: list, slope: list, extrapolate: bool):
    """:func:`interp_array` at one point ``u``, the same operations.

    ``x`` is a list of floats; ``y`` and ``slope`` are lists of floats, or of equal-shape
    arrays (one row per breakpoint) to interpolate several columns at once.
    """
    n = len(x)
    if n == 1:
        return y[0]
    j = min(max(bisect_right(x, u) - 1, 0), n - 2)
    v = slope[j] * (u - x[j]) + y[j]
    if extrapolate:
        return y[-1] if u == x[-1] else v
    return y[0] if u < x[0] else (y[-1] if u >= x[-1] else v)


def interp_array(u: np.ndarray, x, y, slope, extrapolate: bool) -> np.ndarray:
    """Piecewise-linear interpolation of ``y(x)`` at every element of ``u`` (see
    :func:`interp_expr`); NaN inputs give NaN."""
    n = len(x)
    if n == 1:
        return np.full(u.shape, y[0])
    j = np.searchsorted(x, u, side="right") - 1
    np.clip(j, 0, n - 2, out=j)
    v = slope[j] * (u - x[j]) + y[j]
    if extrapolate:
        return np.where(u == x[-1], y[-1], v)
    return np.where(u < x[0], y[0], np.where(u >= x[-1], y[-1], v))


# -- cells of a grid (Lookup2D): the cell of a point and its fraction along the cell ------

def grid_axis(x: np.ndarray) -> tuple[list, list]:
    """``(breakpoints, widths)`` of one axis of a grid as Python floats: ``widths[i] =
    x[i+1] - x[i]``."""
    return x.tolist(), np.diff(x).tolist()


def grid_fraction(u: float, x: list, dx: list, clip: bool) -> tuple[int, float]:
    """Cell ``i`` of ``u`` on breakpoints ``x`` (the last ``i <= len(x) - 2`` with ``x[i] <=
    u``: 0 below the grid, the last cell above it and for NaN) and the fraction ``(u - x[i])
    / dx[i]``, limited to ``[0, 1]`` with ``clip`` as ``min(max(f, 0.0), 1.0)`` selects."""
    i = min(max(bisect_right(x, u) - 1, 0), len(x) - 2)
    f = (u - x[i]) / dx[i]
    return i, (min(max(f, 0.0), 1.0) if clip else f)


def grid_fraction_array(u: np.ndarray, x: list, dx: list, clip: bool):
    """:func:`grid_fraction` at every element of ``u``: ``(i, f)``, arrays of ``u``'s shape."""
    xa, da = np.asarray(x), np.asarray(dx)
    i = np.searchsorted(xa, u, side="right") - 1
    np.clip(i, 0, len(x) - 2, out=i)
    f = (u - xa[i]) / da[i]
    if clip:
        # Python's max(f, 0.0) keeps f unless 0.0 > f; min(., 1.0) keeps it unless 1.0 < it.
        f = np.where(0.0 > f, 0.0, f)
        f = np.where(1.0 < f, 1.0, f)
    return i, f


def state_space(p: Params, A, B, C, D, x0):
    """Validated state-space matrices ``(A, B, C, D, x0)``; ``D`` and ``x0`` default to zero.

    Shapes: A (n, n), B (n, m), C (q, n), D (q, m), x0 (n,). Every error names the block and
    the matrix.
    """
    A = p.array("A", A, ndim=2)
    n = A.shape[0]
    if A.shape != (n, n):
        raise p.error("A", f"must be square, got shape {A.shape}")
    B = p.array("B", B, ndim=2)
    if B.shape[0] != n:
        raise p.error("B", f"must have {n} rows (the order of A), got shape {B.shape}")
    C = p.array("C", C, ndim=2)
    if C.shape[1] != n:
        raise p.error("C", f"must have {n} columns (the order of A), got shape {C.shape}")
    shape_d = (C.shape[0], B.shape[1])
    D = np.zeros(shape_d) if D is None else p.array("D", D, ndim=2)
    if D.shape != shape_d:
        raise p.error("D", f"must have shape {shape_d} (rows of C, columns of B), got "
                           f"{D.shape}")
    x0 = np.zeros(n) if x0 is None else p.array("x0", x0, ndim=1)
    if x0.shape != (n,):
        raise p.error("x0", f"must have shape ({n},) (one entry per state), got {x0.shape}")
    return A, B, C, D, x0
