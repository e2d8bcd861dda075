"""What the translated ensemble step function calls (its globals), and the constant
tables it reads, made once per run (:mod:`cosim.fastpath.ensemble` writes the calls).

Each helper computes per member what the member's own run computes on Python floats: numpy
ufuncs for the arithmetic and comparisons (elementwise IEEE operations), numpy's extrema
against a limit only where this machine's loops select as Python's ``min``/``max`` do
(probed at import), ``math.*`` called per member, lookups as gathers from tables of
constants (a member's own where its parameters make them), and Python's division errors.
"""

from __future__ import annotations

import bisect
import itertools
import math

import numpy as np

__all__ = ["EXTREMA_EXACT", "UFUNCS", "Cells", "Chain", "Gather", "Product", "make_table"]

#: The numpy functions the translated code calls (its globals).
UFUNCS = {"_add": np.add, "_sub": np.subtract, "_mul": np.multiply, "_div": np.true_divide,
          "_neg": np.negative, "_abs": np.absolute, "_lt": np.less, "_le": np.less_equal,
          "_gt": np.greater, "_ge": np.greater_equal, "_eq": np.equal, "_ne": np.not_equal,
          "_and": np.logical_and, "_or": np.logical_or, "_not": np.logical_not,
          "_copyto": np.copyto, "_arr": np.array}

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


class Chain:
    """Which branch of ``v0 if L op0 R0 else v1 if L op1 R1 else ... else vm`` each member
    takes: the first test that holds (``m``, the else, if none).

    With the right sides shared and no NaN, the branch is a function of the cell of ``L``
    among the sorted thresholds (each test is a threshold function of ``L``): one
    ``searchsorted`` on the whole member vector (a NaN threshold appended, so that a NaN
    ``L`` has a cell of its own), where each cell ``[v_i, v_i+1)`` takes one branch
    throughout (true of a lookup table's chain), each cell's branch found by evaluating the
    tests on Python floats. The call then gives each member's *cell*, and the lookup's
    tables are laid out by cell (:meth:`by_cell`): no second lookup of the branch.
    Otherwise (a member's own threshold, a cell that mixes branches) every test is compared
    for every member, consecutive tests of one comparison as one call on a ``(tests, N)``
    array of right sides, and the first true one found (``argmax`` over the tests, an
    always-true row last): the call gives each member's *branch*.

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
        if self.lut is not None:
            self._search = self.edges.searchsorted
            self._finite = self.edges[:-1].tolist()
            return
        self.rows = np.zeros((len(ops) + 1, n), dtype=bool)
        self.rows[-1] = True
        self.groups = []
        a = 0
        while a < len(ops):
            b = a
            while b < len(ops) and ops[b] == ops[a]:
                b += 1
            shared = not any(np.ndim(r) for r in rights[a:b])
            right = np.array([[float(r)] for r in rights[a:b]]) if shared else \
                np.array([np.broadcast_to(np.asarray(r, dtype=np.float64), (n,))
                          for r in rights[a:b]])
            self.groups.append((UFUNCS[ops[a]], right, self.rows[a:b]))
            a = b

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
        return lut

    def cell_of(self, left: float) -> int:
        """The cell :meth:`__call__` gives a member whose left side is ``left`` (a chain
        found by cells): ``searchsorted(edges, left, "right")``, whose NaN edge sorts
        last."""
        return bisect.bisect_right(self._finite, left) if left == left else \
            len(self._finite) + 1

    def bounds(self) -> list[tuple[float, float]] | None:
        """``(lo, hi)`` of each cell :meth:`__call__` gives: a left side ``L`` is in cell
        ``c`` exactly when ``lo <= L < hi`` (NaN bounds for the cell of a NaN, which no value
        is found in again); None for a chain found by branches."""
        if self.lut is None:
            return None
        v = self.edges[:-1].tolist()
        return list(zip([-math.inf, *v, math.nan], [*v, math.inf, math.nan]))

    @property
    def size(self) -> int:
        """How many values :meth:`__call__` gives: cells, or branches."""
        return len(self.ops) + 1 if self.lut is None else len(self.lut)

    def branch_of(self, i: int) -> int:
        """The branch of what :meth:`__call__` gives ``i`` for."""
        return i if self.lut is None else self.lut[i]

    def by_cell(self, entries: list) -> list:
        """``entries`` (one per branch) in the order of what :meth:`__call__` gives: one
        per cell (a branch's entry repeated for each of its cells), or as they are."""
        return entries if self.lut is None else [entries[b] for b in self.lut]

    def __call__(self, left, idx):
        """Each member's cell (or branch), ``(N,)`` intp: a new array, or ``idx``
        (preallocated) filled."""
        if self.lut is not None:
            return self._search(left, "right")
        for ufunc, right, rows in self.groups:
            ufunc(left, right, out=rows)
        np.argmax(self.rows, 0, out=idx)
        return idx


class Product:
    """The cell of each member in a product of chains (a 2-D table's rows and columns):
    ``index = ((i0 * n1) + i1) * n2 + ...`` over each chain's index ``i<a>`` (its cell or
    branch, see :meth:`Chain.__call__`) and its number of them ``n<a>``; the leaves of the
    nested chain, row-major over the branches, laid out by it (:meth:`by_cell`).

    Parameters
    ----------
    chains : list of Chain
    """

    def __init__(self, chains: list):
        self.chains = chains
        self.sizes = [c.size for c in chains]

    def by_cell(self, entries: list) -> list:
        """``entries`` (one per combination of branches, the first chain's slowest) in the
        order of :meth:`__call__`'s index."""
        branches = [len(c.ops) + 1 for c in self.chains]
        out = []
        for combo in itertools.product(*(range(n) for n in self.sizes)):
            flat = 0
            for c, i, nb in zip(self.chains, combo, branches):
                flat = flat * nb + c.branch_of(i)
            out.append(entries[flat])
        return out

    def __call__(self, *args):
        """``(i0, i1, ..., out)``: the combined index into ``out`` (returned)."""
        *indices, out = args
        np.multiply(indices[0], self.sizes[1], out=out)
        np.add(out, indices[1], out=out)
        for i, n in zip(indices[2:], self.sizes[2:]):
            np.multiply(out, n, out=out)
            np.add(out, i, out=out)
        return out


#: Most entries of a lookup's member-major table (members x cells x slots): a larger one
#: whose slots are partly shared keeps those apart (64 MB at most per table here).
GATHER_MAX = 1 << 23


class Gather:
    """A lookup's constants per member: ``out[s, m]`` is slot ``s``'s entry for member
    ``m``'s cell (or branch) ``idx[m]``, each a member's own where its parameters make it.

    The slots are the rows of one table, so every slot of a member comes from one column:
    one ``take`` of columns for all slots (at ``m * entries + idx`` from a member-major
    ``(slots, N * entries)`` table when some entry is a member's own, the flat index one
    add; at ``idx`` from a ``(slots, entries)`` table when none is), no Python loop over
    members or slots, every output preallocated; each slot lands in a contiguous row, as
    the arithmetic reading it wants.

    Parameters
    ----------
    values : list of list
        Slot -> entry -> a float, or an ``(n,)`` array for members' own values.
    n : int
        Members.
    """

    def __init__(self, values: list, n: int):
        slots, entries = len(values), len(values[0]) if values else 0
        self.offset = self.slots = None
        self.entries = entries
        if not any(isinstance(v, np.ndarray) for row in values for v in row):
            self.table = np.array(values, dtype=np.float64).reshape(slots, entries)
        elif n * entries * slots <= GATHER_MAX:
            table = np.empty((slots, n, entries), dtype=np.float64)
            for s, row in enumerate(values):
                for e, v in enumerate(row):
                    table[s, :, e] = v
            self.table = table.reshape(slots, n * entries)
        else:
            # A large table shared by all members is not repeated per member: each slot
            # taken on its own, from a member-major ``(N * entries,)`` row when it is a
            # member's own.
            self.slots = []
            for row in values:
                if any(isinstance(v, np.ndarray) for v in row):
                    cells = np.array([np.broadcast_to(v, (n,)) for v in row], dtype=np.float64)
                    self.slots.append((True, np.ascontiguousarray(cells.T).ravel()))
                else:
                    self.slots.append((False, np.array(row, dtype=np.float64)))
        if self.slots is not None or self.table.shape[1] != entries:
            self.flat = np.empty(n, dtype=np.intp)
            self.offset = np.arange(n, dtype=np.intp) * entries
        if self.slots is None:
            self._take = self.table.take

    def some(self, members: list, idx: list, out) -> None:
        """Fill the columns ``members`` (a few members' indices) of ``out`` (shape
        ``(slots, N)``) from those members' indices ``idx`` (ints; as :meth:`__call__` fills
        every column), a column at a time."""
        entries = self.entries
        if self.slots is None:
            table = self.table
            for m, i in zip(members, idx):
                out[:, m] = table[:, m * entries + i if self.offset is not None else i]
            return
        for m, i in zip(members, idx):
            for s, (own, row) in enumerate(self.slots):
                out[s, m] = row[m * entries + i if own else i]

    def __call__(self, idx, out) -> None:
        """Fill ``out``, shape ``(slots, N)`` (C-contiguous), from each member's index."""
        # Every index is in range by construction: ``mode="clip"`` spares numpy the copy of
        # the output that its bounds check makes.
        if self.slots is None:
            if self.offset is not None:
                np.add(self.offset, idx, out=self.flat)
                idx = self.flat
            self._take(idx, 1, out, "clip")
            return
        np.add(self.offset, idx, out=self.flat)
        for s, (own, row) in enumerate(self.slots):
            row.take(self.flat if own else idx, None, out[s], "clip")


class Cells:
    """A lookup's cell per member and the constants of that cell: gathered values (the
    rows of :attr:`vals`) and masks (:attr:`masks`: which members take a further branch
    group; :attr:`taken`: whether any does), found again only when some member's input has
    left its cell.

    One object serves every evaluation of the same lookup (the Runge-Kutta stages' repeats
    are spelt alike): between two evaluations most members' inputs stay in their cells, and
    a cell's constants are the same wherever in it the input is. Whether every member is
    still in its cell is asked by the step function before it calls the object: two
    comparisons of an input with the bounds of the members' cells (kept per member, taken
    with the cells) and a comparison of their bytes. Called, it finds each axis's cells
    (:class:`Chain`), combines them (:class:`Product`) and gathers the constants
    (:class:`Gather`): for the members that left their cells alone where they are few
    (:data:`FEW`: on Python floats, a column each; the others' cells are the ones they
    would be found in again), for every member otherwise, and every time for chains found
    by branches (a member's own thresholds: no bounds).

    Parameters
    ----------
    chains : list of Chain
        One per axis of the table.
    values : list of list
        The gathered rows: slot -> branch -> a float, or an ``(n,)`` array for members' own
        values (as :class:`Gather` takes them, by branch).
    masks : list of list of bool
        Per further branch group: branch -> whether the group computes it.
    n : int
        Members.
    """

    def __init__(self, chains: list, values: list, masks: list, n: int):
        self.chains = chains
        self.product = Product(chains) if len(chains) > 1 else None
        order = (self.product or chains[0]).by_cell
        rows = [order(row) for row in values]
        width = len(rows)
        self.taken = [True] * len(masks)
        self.mask_tables = [np.array(order(m), dtype=bool) for m in masks]
        self.masks = [np.zeros(n, dtype=bool) for _ in masks]
        self.none = bytes(n)                  # a mask that no member takes
        self.flat = np.zeros(n, dtype=np.intp)
        self.idx = [np.zeros(n, dtype=np.intp) for _ in chains]
        # Each member's cell bounds per axis, ``bounds[a]`` = (lo, hi) rows, gathered with
        # the constants: the step function keeps a member's cell while L < lo is False and
        # L < hi True, compared into ``pairs[a]`` by ``less`` and read as bytes
        # (``pair_bytes[a]``) against ``inside`` (NaN bounds: not found yet). Without
        # bounds (cells found by branches) ``less`` does nothing and the pairs never read
        # as inside.
        cell_bounds = [c.bounds() for c in chains]
        tracked = all(b is not None for b in cell_bounds)
        if tracked:
            cells = list(itertools.product(*(range(c.size) for c in chains)))
            for a, b in enumerate(cell_bounds):
                rows += [[b[c[a]][0] for c in cells], [b[c[a]][1] for c in cells]]
        self.gather = Gather(rows, n) if rows else None
        # The gathered constants, a slot per row (contiguous, as the arithmetic reads them).
        self.vals = np.full((len(rows), n), math.nan)
        self.bounds = self.vals[width:].reshape(len(chains), 2, n) if tracked else \
            np.full((len(chains), 2, n), math.nan)
        self.pairs = np.zeros((len(chains), 2, n), dtype=bool)
        self.pair_bytes = [p.tobytes for p in self.pairs]
        self.inside = b"\x00" * n + b"\x01" * n
        self.less = np.less if tracked else _nothing
        self.tracked = tracked
        # Each axis's comparisons as bytes, and the most members found alone.
        self.pair_rows = [(p[0].tobytes, p[1].tobytes) for p in self.pairs]
        self.few = min(FEW, n // 4)

    def __call__(self, *lefts) -> None:
        """Make :attr:`vals` (with :attr:`bounds`) and :attr:`masks` those of each
        member's cell of ``lefts`` (one ``(N,)`` array per axis), as the step function
        calls it: :attr:`pairs` are the comparisons of ``lefts`` with :attr:`bounds`."""
        if self.tracked:
            members = self._away()
            if members is not None:
                self._some(members, lefts)
                return
        if self.product is None:
            flat = self.chains[0](lefts[0], self.idx[0])
        else:
            idx = [c(left, i) for c, left, i in zip(self.chains, lefts, self.idx)]
            flat = self.product(*idx, self.flat)
        if self.gather is not None:
            self.gather(flat, self.vals)
        for g, (table, out) in enumerate(zip(self.mask_tables, self.masks)):
            table.take(flat, None, out, "clip")
            self.taken[g] = out.tobytes() != self.none

    def _away(self) -> list | None:
        """The members whose inputs left their cells (on some axis), as the step function
        compared them (:attr:`pairs`: a member is in its cell while ``L < lo`` is False and
        ``L < hi`` True; NaN bounds before its cell is found, a NaN input: never), or None
        when they are more than :attr:`few`."""
        found: list = []
        few = self.few
        for a in range(len(self.pairs)):
            for b, outside in ((0, 1), (1, 0)):
                row = self.pair_rows[a][b]()
                i = row.find(outside)
                while i >= 0:
                    if len(found) == few:
                        return None
                    found.append(i)
                    i = row.find(outside, i + 1)
        return found

    def _some(self, members: list, lefts) -> None:
        """:meth:`__call__` for the members ``members`` (a few indices) alone, on Python
        floats: their cells found (:meth:`Chain.cell_of`) and their columns of :attr:`vals`
        and :attr:`masks` gathered."""
        sizes = self.product.sizes if self.product is not None else (0,)
        cells = []
        for m in members:
            flat = 0
            for chain, left, size in zip(self.chains, lefts, sizes):
                flat = flat * size + chain.cell_of(float(left[m] if left.ndim else left))
            cells.append(flat)
        if self.gather is not None:
            self.gather.some(members, cells, self.vals)
        for g, (table, out) in enumerate(zip(self.mask_tables, self.masks)):
            for m, i in zip(members, cells):
                out[m] = table[i]
            self.taken[g] = out.tobytes() != self.none


#: A lookup's members whose inputs left their cells are found alone while they are at most
#: FEW (and a quarter of the members, :class:`Cells`); more, every member is found again (a
#: fixed number of calls).
FEW = 8


def _nothing(*args) -> None:
    """What a check does whose answer is always "found again"."""


def _nonzero(divisor, where=None) -> None:
    """Raise ZeroDivisionError as a run's float division does when a divisor (of the
    members ``where`` selects) is zero."""
    if not (divisor.all() if where is None else np.logical_or(divisor, ~where).all()):
        raise ZeroDivisionError("float division by zero")


UFUNCS.update(_mapf=_mapf, _nonzero=_nonzero)


def make_table(spec: dict, value_of, n: int, chains: list):
    """The constant object of a lookup (see :attr:`Translation.tables`); ``value_of(text)``
    gives a constant's value (a float, or an ``(n,)`` array for a member's).

    A chain is a :class:`Chain` of its tests (``texts``, one row); cells are the
    :class:`Cells` of ``chains`` (the axes' chains, made first) with the gathered rows
    ``texts`` and the groups' ``masks``.
    """
    if spec["kind"] == "chain":
        return Chain(spec["ops"], [value_of(t) for t in spec["texts"][0]], n)
    return Cells(chains, [[value_of(t) for t in row] for row in spec["texts"]],
                 [[t != "0" for t in row] for row in spec["masks"]], n)
