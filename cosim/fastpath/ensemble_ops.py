"""What the translated ensemble step function calls (its globals), and the constant
tables it reads, made once per run (:mod:`cosim.fastpath.ensemble` writes the calls).

Each helper computes per member what the member's own run computes on Python floats: numpy
ufuncs for the arithmetic and comparisons (elementwise IEEE operations), numpy's extrema
against a limit only where this machine's loops select as Python's ``min``/``max`` do
(probed at import), ``math.*`` called per member, lookups as gathers from tables of
constants (a member's own where its parameters make them), and Python's division errors.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["EXTREMA_EXACT", "UFUNCS", "Chain", "MemberTable", "make_table"]

#: The numpy functions the translated code calls (its globals).
UFUNCS = {"_add": np.add, "_sub": np.subtract, "_mul": np.multiply, "_div": np.true_divide,
          "_neg": np.negative, "_abs": np.absolute, "_lt": np.less, "_le": np.less_equal,
          "_gt": np.greater, "_ge": np.greater_equal, "_eq": np.equal, "_ne": np.not_equal,
          "_and": np.logical_and, "_or": np.logical_or, "_not": np.logical_not,
          "_copyto": np.copyto, "_arr": np.array, "_argmax": np.argmax, "_take": np.take}

def _probe_extrema() -> bool:
    """True if ``numpy.minimum(c, a)`` / ``numpy.maximum(c, a)`` select, element by element,
    what Python's ``min(a, c)`` / ``max(a, c)`` select for every non-NaN ``c``: ``a`` on
    ties (signed zeros) and when ``a`` is NaN, ``c`` where it is smaller (greater). Checked
    bit for bit on this machine's loops (SIMD bodies and scalar tails, several lengths and
    offsets), since numpy documents neither choice."""
    a0 = [-0.0, 0.0, -0.0, 0.0, math.nan, 1.0, -1.0, 2.5, -math.inf, math.inf, 3.0, -0.0]
    c0 = [0.0, -0.0, -0.0, 0.0, 0.5, 1.0, -1.0, 1.5, 0.0, 0.0, math.inf, -math.inf]
    for length in (1, 3, 7, 16, 33, 1000):
        for shift in range(len(a0)):
            a = np.array([a0[(i + shift) % len(a0)] for i in range(length + 1)])[1:]
            c = np.array([c0[(i + shift) % len(c0)] for i in range(length + 1)])[1:]
            for fn, ufunc in ((min, np.minimum), (max, np.maximum)):
                want = np.array([fn(x, y) for x, y in zip(a.tolist(), c.tolist())])
                got = ufunc(c, a)
                if want.tobytes() != got.tobytes():
                    return False
            for fn, ufunc in ((min, np.minimum), (max, np.maximum)):   # 0-d limit
                want = np.array([fn(x, c0[shift]) for x in a.tolist()])
                if want.tobytes() != ufunc(np.array(c0[shift]), a).tobytes():
                    return False
    return True


#: Whether ``min``/``max`` against a limit may use numpy's extrema (:func:`_probe_extrema`).
EXTREMA_EXACT = _probe_extrema()
UFUNCS.update(_minimum=np.minimum, _maximum=np.maximum)

def _mapf(f, a, out, where=None) -> None:
    """``out = f(a)`` element by element with the function a run calls (``math.*``); with
    ``where``, only the selected elements."""
    if where is None:
        out[...] = np.array(list(map(f, a.ravel().tolist()))).reshape(out.shape)
    elif where.any():
        out[where] = list(map(f, a[where].tolist()))


class MemberTable:
    """A lookup's constants when some are members' own, ``values`` of shape ``(slots,
    branches, N)``: :meth:`gather` picks each member's own entry of each slot."""

    def __init__(self, values: np.ndarray):
        n_s, n_b, n = values.shape
        # entry (s, b) of member m at flat[(s * n + m) * n_b + b]
        self.flat = np.ascontiguousarray(values.transpose(0, 2, 1)).ravel()
        self.base = (np.arange(n_s)[:, None] * n + np.arange(n)[None, :]) * n_b
        self.at = np.empty((n_s, n), dtype=np.intp)

    def gather(self, idx, out) -> None:
        np.add(self.base, idx, out=self.at)
        np.take(self.flat, self.at, out=out, mode="clip")


# Every index taken is in range by construction: ``mode="clip"`` spares numpy the copy of
# ``out`` that its bounds check ("raise") makes (about half a take's time here).

def _gather(table, idx, out) -> None:
    """Each member's entry ``idx[m]`` of each slot of a lookup's constants (shared or its
    own): ``out[s, m] = table[s, idx[m]]``."""
    if isinstance(table, np.ndarray):
        np.take(table, idx, axis=1, out=out, mode="clip")
    else:
        table.gather(idx, out)


class Chain:
    """Which branch of ``v0 if L op0 R0 else v1 if L op1 R1 else ... else vm`` each member
    takes: the first test that holds (``m``, the else, if none).

    With the right sides shared and no NaN, the branch is a function of the cell of ``L``
    among the sorted thresholds (each test is a threshold function of ``L``): one
    ``searchsorted`` (a NaN threshold appended, so that a NaN ``L`` has a cell of its own)
    and one lookup, where each cell ``[v_i, v_i+1)`` takes one branch throughout (true of a
    lookup table's chain), each cell's branch found by evaluating the tests on Python floats.
    Otherwise every test is compared for every member and the first true one found
    (``argmax`` over the tests, an always-true row last).

    Parameters
    ----------
    ops : list of str
        Each test's comparison (a key of :data:`UFUNCS`: ``_lt``, ``_ge``, ...).
    rights : list of float or ndarray
        Each test's right side (an ``(n,)`` array for a member's own).
    n : int
        Members.
    """

    _PY = {"_lt": float.__lt__, "_le": float.__le__, "_gt": float.__gt__,
           "_ge": float.__ge__, "_eq": float.__eq__, "_ne": float.__ne__}

    def __init__(self, ops: list[str], rights: list, n: int):
        self.ops, self.rights = ops, rights
        self.lut = self._cells(ops, rights)
        if self.lut is None:
            self.rows = np.zeros((len(ops) + 1, n), dtype=bool)
            self.rows[-1] = True
            self.cols = [np.asarray(r, dtype=np.float64)[None] if np.ndim(r) else
                         np.array([[r]]) for r in rights]

    def _first(self, u: float) -> int:
        return next((j for j, (op, r) in enumerate(zip(self.ops, self.rights))
                     if self._PY[op](u, r)), len(self.ops))

    def _cells(self, ops, rights):
        """The branch of each cell of ``searchsorted(self.edges, L, 'right')``, or None."""
        if any(np.ndim(r) for r in rights) or any(math.isnan(r) for r in rights):
            return None
        v = sorted(set(float(r) for r in rights))
        self.edges = np.array(v + [math.nan])
        lut = [self._first(math.nextafter(v[0], -math.inf)) if v[0] > -math.inf else 0]
        for i, x in enumerate(v):
            branch = self._first(x)
            after = math.nextafter(x, math.inf)
            if after < (v[i + 1] if i + 1 < len(v) else math.inf) and \
                    self._first(after) != branch:
                return None     # the point and the interval after it differ
            lut.append(branch)
        lut.append(self._first(math.nan))
        return np.array(lut, dtype=np.intp)

    def __call__(self, left, idx) -> None:
        if self.lut is not None:
            np.take(self.lut, np.searchsorted(self.edges, left, "right"), out=idx,
                    mode="clip")
            return
        for j, (op, col) in enumerate(zip(self.ops, self.cols)):
            UFUNCS[op](left, col[0], out=self.rows[j])
        np.argmax(self.rows, 0, out=idx)


def _nonzero(divisor, where=None) -> None:
    """Raise ZeroDivisionError as a run's float division does when a divisor (of the
    members ``where`` selects) is zero."""
    if not (divisor.all() if where is None else np.logical_or(divisor, ~where).all()):
        raise ZeroDivisionError("float division by zero")


def _branch(chain, left, idx) -> None:
    chain(left, idx)


UFUNCS.update(_mapf=_mapf, _gather=_gather, _branch=_branch, _nonzero=_nonzero)


def make_table(spec: dict, value_of, n: int):
    """The constant array of a lookup (see :attr:`Translation.tables`); ``value_of(text)``
    gives a constant's value (a float, or an ``(n,)`` array for a member's).

    ``texts`` is a list of rows (slots) of entries (branches or tests). A gathered table is ``(slots, branches)`` (shared) or
    a :class:`MemberTable`; an int or bool table ``(1, k)``.
    """
    if spec["kind"] == "chain":
        return Chain(spec["ops"], [value_of(t) for t in spec["texts"][0]], n)
    if spec["kind"] != "float":
        return np.array([[float(t) for t in row] for row in spec["texts"]]).astype(
            np.intp if spec["kind"] == "int" else bool)
    values = [[value_of(t) for t in row] for row in spec["texts"]]
    member = any(isinstance(v, np.ndarray) for row in values for v in row)
    if member:
        return MemberTable(np.array([[np.broadcast_to(v, (n,)) for v in row]
                                     for row in values], dtype=np.float64))
    return np.array(values, dtype=np.float64)
