"""The scalar fast-path strategy: one statement per block, every value a local float.

Every block is its own group. The step function loads the flat signals ``S``, discrete states
``D`` and continuous state ``C`` into local variables (``s3``, ``x1``, ``c0``) once per call,
runs many ticks on them and stores them back: per block and tick this costs a few bytecodes
instead of a method call and numpy dispatch (~0.03 µs vs ~1 µs). A block's state updates are
one tuple assignment (all right-hand sides evaluated first); each Runge–Kutta stage has one
variable per component and stage (``z0``, ``k1_0``).

A chunked step function (:mod:`cosim.fastpath.chunked`) holds the continuous state, stage
state and derivatives in numpy vectors instead: each Runge–Kutta combination is one line of
whole-vector arithmetic in the step function (``Z[:] = C + h * (1.0 * K0)``: the same IEEE
operations on each component, in the same order, as the statement per component it
replaces), so the generated source and its compile time no longer grow with a line per
component and combination.
"""

from __future__ import annotations

import re

import numpy as np

from cosim.fastpath.emitter import Strategy
from cosim.fastpath.layout import Singletons

__all__ = ["Scalar"]

#: Continuous states up to this many are stored back item by item (see ``Scalar``).
_ITEMWISE = 8

#: Local-variable prefix of each array the emitter names (stage derivatives ``K<i>``: ``k<i>_``).
_PREFIX = {"S": "s", "D": "x", "C": "c", "Z": "z"}

#: A local holding a value: a signal, discrete state, continuous state, stage state
#: (``s12``, ``x3``, ``c0``, ``z0``) or stage derivative (``k1_0``).
_LOCAL = re.compile(r"\b(?:([sxcz])(\d+)|k(\d+)_(\d+))\b")

#: The name of such a local, whole.
_NAME = re.compile(r"\b(?:[sxcz]\d+|k\d+_\d+)\b")

#: The targets of an assignment in a chunk function (indent 4: unguarded).
_ASSIGNED = re.compile(r"^( +)((?:(?:[sxcz]\d+|k\d+_\d+), )*(?:[sxcz]\d+|k\d+_\d+)) = ")

#: The array each local prefix is loaded from and stored to.
_ARRAY = {v: k for k, v in _PREFIX.items()}


class Scalar(Strategy):
    """Local floats, one per value (see :class:`~cosim.fastpath.emitter.Strategy`).

    Parameters
    ----------
    plan : Plan
    layout : Layout
        Flat slots of the plan's values.
    n_c : int
        Number of continuous-state components.
    prefix : str
        Prefix of every local (and of the Runge–Kutta step ``h``): a plan inlined in
        another's step function holds its values apart (:mod:`cosim.fastpath.nested`).
    arrays : dict, optional
        The names the values are loaded from and stored to, for ``"S"``, ``"D"`` and ``"C"``
        (default: the step function's arguments of those names).
    """

    def __init__(self, plan, layout, n_c: int, prefix: str = "", arrays: dict | None = None):
        super().__init__(Singletons(plan.positions), f"<cosim plan {plan.name}>")
        self.n_c = n_c
        self.prefix = prefix
        self.h = prefix + "h"
        self.namespace["_zeros"] = np.zeros
        arrays = arrays or {"S": "S", "D": "D", "C": "C"}
        loaded = [(v, arrays[a], a) for v, a in (
            ([self.ref("S", [j]) for j in range(len(layout.signal_slots))], "S"),
            ([self.ref("D", [j]) for j in range(len(layout.state_slots))], "D"),
            ([self.ref("C", [j]) for j in range(n_c)], "C")) if v]
        # The continuous state is the run state's numpy vector: unpacked to Python floats.
        self.prologue = [f"    {', '.join(v)}, = {src}" + (".tolist()" if a == "C" else "")
                         for v, src, a in loaded]
        self.epilogue = [f"        {src}[:] = [{', '.join(v)}]" for v, src, a in loaded
                         if a != "C" or n_c > _ITEMWISE]
        if 0 < n_c <= _ITEMWISE:
            # A few numpy items are stored 3-4x faster one by one than as a slice from a list
            # (a unit's macro step of one tick pays this store every call).
            self.epilogue.append("        " + "; ".join(f"{arrays['C']}[{j}] = "
                                                       f"{self.ref('C', [j])}"
                                                       for j in range(n_c)))

    def ref(self, array: str, slots: list[int]) -> str:
        (j,) = slots
        return self.prefix + _name(array, j)

    def assign(self, targets: list[str], exprs: list[str]) -> list[str]:
        # A value assigned to itself (a state an update keeps: ``x0 = x0``) is left out.
        pairs = [(tg, e) for tg, e in zip(targets, exprs) if tg != e]
        if not pairs:
            return []
        return [f"{', '.join(tg for tg, _ in pairs)} = {', '.join(e for _, e in pairs)}"]

    def row(self, task: int, slots: list[int]) -> str:
        # Rows are flat (the log store knows their width): a tuple per row kept until the
        # logs are read cost more than its values (a log row appended 1.3x faster, read
        # 1.6x faster, freed faster).
        values = ", ".join(self.ref("S", [j]) for j in slots)
        if len(slots) == 1:
            return f"{self.rows}[{task}].append({values})"
        return f"{self.rows}[{task}].extend(({values}))"

    def stage_sum(self, target: str, terms) -> list[str]:
        ref = self.ref
        if not terms:
            return [f"{ref(target, [g])} = {ref('C', [g])}" for g in range(self.n_c)]
        out = []
        for g in range(self.n_c):
            total = " + ".join(f"{a!r} * {ref('K%d' % j, [g])}" for a, j in terms)
            out.append(f"{ref(target, [g])} = {ref('C', [g])} + {self.h} * ({total})")
        return out

    def whole_sum(self, target: str, terms) -> list[str]:
        if not terms:
            return [f"{target}[:] = C"]
        return [f"{target}[:] = C + h * ({' + '.join(f'{a!r} * K{j}' for a, j in terms)})"]

    def chunk_reads(self, lines: list[str]) -> set:
        # Every value read before it is assigned, and every value assigned under a guard
        # first (signals and states of slower tasks: when the guard is false, the store
        # writes back the value held).
        return _scan(lines)

    def chunk_io(self, body: list[str], reads: set,
                 shared: set) -> tuple[list[str], list[str], list[str]]:
        # The step function's whole-vector combinations read every continuous state and
        # derivative each tick (see whole_sum).
        assigned = sorted(_assigned(body))
        every = {v for v in assigned if v in shared or v[0] not in ("S", "D")}
        load = _runs(sorted(reads), lambda names, src: f"    {names} = {src}")
        store = _runs([v for v in assigned if v in every],
                      lambda names, src: f"    {src} = {names}", store=True)
        final = _runs([v for v in assigned if v not in every],
                      lambda names, src: f"    {src} = {names}", store=True)
        return load, store, final

    def chunk_state(self, n_stages: int) -> tuple[list[str], list[str]]:
        # The run state's vector is C itself; the stages' values are vectors of the call.
        n = f"_zeros({self.n_c})"
        return [f"    Z = {n}", *(f"    K{i} = {n}" for i in range(n_stages))], []

    def direct(self, statement: str) -> str:
        return _LOCAL.sub(lambda m: "{}[{}]".format(*_value(m.groups())), statement)


def _name(array: str, j: int) -> str:
    """The local holding slot ``j`` of ``array`` (``S``, ``D``, ``C``, ``Z``, ``K<i>``)."""
    if array in _PREFIX:
        return f"{_PREFIX[array]}{j}"
    return f"k{array[1:]}_{j}"          # K<i>: stage i's derivative of component j


def _value(groups) -> tuple[str, int]:
    """``(array, slot)`` of a match of :data:`_LOCAL`."""
    prefix, j, stage, jk = groups
    return (_ARRAY[prefix], int(j)) if prefix else (f"K{stage}", int(jk))


def _scan(lines: list[str]) -> set:
    """Values ``(array, slot)`` chunk lines (indent 4: unguarded) read: those whose first use
    is a read or an assignment under a guard."""
    reads, seen = set(), set()
    for line in lines:
        m = _ASSIGNED.match(line)
        names = _NAME.findall(line[m.end():] if m else line)
        reads.update(v for v in names if v not in seen)
        seen.update(names)
        if m:
            targets = m.group(2).split(", ")
            if len(m.group(1)) != 4:
                reads.update(v for v in targets if v not in seen)
            seen.update(targets)
    return {_value(_LOCAL.match(v).groups()) for v in reads}


def _assigned(lines: list[str]) -> set:
    """Values ``(array, slot)`` chunk lines assign."""
    return {_value(_LOCAL.match(v).groups()) for line in lines
            if (m := _ASSIGNED.match(line)) for v in m.group(2).split(", ")}


def _runs(values, line, store: bool = False) -> list[str]:
    """Lines moving locals of ``values`` ``[(array, slot)]`` (sorted) from or to their
    array: a slice per run of consecutive slots, one item otherwise. The lists ``S`` and
    ``D`` hold Python floats; the numpy vectors ``C``, ``Z``, ``K<i>`` of a chunked step
    function are loaded as Python floats too (``tolist``, ``item``: numpy's scalars compute
    the same values several times slower)."""
    out, i = [], 0
    while i < len(values):
        a, j = values[i]
        n = i + 1
        while n < len(values) and values[n] == (a, j + n - i):
            n += 1
        floats = store or a in ("S", "D")
        if n - i == 1:
            out.append(line(_name(a, j), f"{a}[{j}]" if floats else f"{a}.item({j})"))
        else:
            locals_ = ", ".join(_name(a, j + m) for m in range(n - i))
            ix = f"{a}[{j}:{j + n - i}]" + ("" if floats else ".tolist()")
            out.append(line(f"[{locals_}]" if store else f"{locals_},", ix))
        i = n
    return out
