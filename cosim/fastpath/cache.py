"""The caches of generated code: one source and its code objects per structure of plan.

Generated source names every parameter instead of spelling it
(:mod:`cosim.fastpath.params`), so plans that differ only in parameter values (a sweep, a
re-run with a retuned gain) generate the same source. A plan whose structural fingerprint
(:mod:`cosim.fastpath.structure`) was seen before takes its source, code objects and the
recipe of its constants from :func:`emitted` without writing anything (writing the source
costs about as much as a small model's run); a plan of new structure writes its source, and
its code objects (one per piece of the source) come from :func:`code_for` when the same
source was compiled before (compiling costs about 5 µs per block). The code objects are
executed in a fresh namespace holding the new values.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from types import CodeType

__all__ = ["Consts", "Emitted", "by_source", "code_for", "emitted", "remember"]

#: Entries kept per cache at most (least recently used dropped first): one per plan of a run
#: (a co-simulation's units, a model's atomic subsystems) and a few runs' worth besides.
CAPACITY = 64
#: Characters of generated source the entries of a cache hold at most (the newest is kept
#: whatever its size): a 100,000-block plan's code is tens of megabytes, so a large plan
#: displaces the others, while the small plans of a co-simulation with many units all stay.
BUDGET = 4_000_000

_codes: OrderedDict[tuple, tuple[int, tuple[CodeType, ...]]] = OrderedDict()
_emitted: OrderedDict[tuple, tuple[int, Emitted]] = OrderedDict()


class Consts(Sequence):
    """The constants of generated code in order of creation, each read as ``(global name,
    recipe, value)`` (see :attr:`Emitted.consts`), held as three parallel lists: a tuple
    per constant would cost 64 bytes more each, and a scalar plan has one per block.
    """

    __slots__ = ("names", "recipes", "values")

    def __init__(self):
        self.names: list[str] = []
        self.recipes: list = []
        self.values: list = []

    def append(self, name: str, recipe, value) -> None:
        """Add the constant ``name`` (its recipe, or its value when it has none)."""
        self.names.append(name)
        self.recipes.append(recipe)
        self.values.append(value)

    def __len__(self) -> int:
        return len(self.names)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return list(zip(self.names[i], self.recipes[i], self.values[i]))
        return self.names[i], self.recipes[i], self.values[i]

    def __iter__(self):
        return zip(self.names, self.recipes, self.values)


@dataclass(frozen=True)
class Emitted:
    """What emitting a plan's step function produced, apart from the parameter values.

    Attributes
    ----------
    source : str
        The generated Python source.
    code : tuple of CodeType
        Its compiled code, one module code object per piece (see :func:`code_for`), executed
        in order.
    columns : tuple of tuple of (str, int)
        Per task, ``(log key, column)`` of each value in a logged row.
    consts : Consts
        The generated code's constants in order of creation: ``(global name, recipe, value)``;
        a recipe (see :meth:`~cosim.fastpath.emitter.Strategy.const`) names a parameter or
        live value of the plan, and ``value`` is then None; without a recipe the value is
        structural (an index array) and shared.
    """

    source: str
    code: tuple
    columns: tuple
    consts: Consts


def _get(cache: OrderedDict, key):
    entry = cache.get(key)
    if entry is None:
        return None
    cache.move_to_end(key)
    return entry[1]


def _put(cache: OrderedDict, key, value, size: int) -> None:
    """Keep ``value`` (``size`` characters of source) under ``key``, dropping the least
    recently used entries beyond :data:`CAPACITY` entries or :data:`BUDGET` characters."""
    cache[key] = (size, value)
    total = sum(n for n, _ in cache.values())
    while len(cache) > 1 and (len(cache) > CAPACITY or total > BUDGET):
        total -= cache.popitem(last=False)[1][0]


def emitted(key: tuple) -> Emitted | None:
    """What was emitted for the structural fingerprint ``key`` (None: not seen recently)."""
    return _get(_emitted, key)


def by_source(source: str) -> Emitted | None:
    """The entry whose source is ``source`` (the very string a fast path holds), if still
    cached: its constants' recipes say where each value of a run comes from (ensembles,
    :mod:`cosim.fastpath.ensemble_run`)."""
    return next((e for _, e in reversed(_emitted.values()) if e.source is source), None)


def remember(key: tuple, entry: Emitted) -> None:
    """Keep ``entry`` as what is emitted for the structural fingerprint ``key``."""
    _put(_emitted, key, entry, len(entry.source))


def code_for(pieces: list[str], label: str) -> tuple[CodeType, ...]:
    """The compiled code of the module source ``pieces`` (``label``: its pseudo file name),
    one code object per piece, from the cache when the same source was compiled before.

    Each piece is compiled on its own and its syntax tree dropped before the next is
    compiled: compiling takes about 3 kB per block of syntax tree and compiler state, which
    the allocator keeps once the process has grown to hold it, so a large plan's pieces (one
    function each, see :data:`~cosim.fastpath.emitter.CHUNK`) bound that peak by one piece.
    Line numbers are those of the joined source.

    Parameters
    ----------
    pieces : list of str
        Python source of a module, in consecutive parts of whole top-level statements.
    label : str
        File name shown in tracebacks (part of the key: it is in the code objects).
    """
    digest = hashlib.blake2b(digest_size=20)
    for piece in pieces:
        digest.update(piece.encode())
    key = (label, len(pieces), digest.digest())
    codes = _get(_codes, key)
    if codes is None:
        codes, line = [], 0
        for piece in pieces:
            codes.append(_from_line(compile(piece, label, "exec"), line))
            line += piece.count("\n")
        codes = tuple(codes)
        _put(_codes, key, codes, sum(map(len, pieces)))
    return codes


def _from_line(code: CodeType, offset: int) -> CodeType:
    """``code`` (and the code objects it defines) with line numbers ``offset`` later."""
    if not offset:
        return code
    consts = tuple(_from_line(c, offset) if isinstance(c, CodeType) else c
                   for c in code.co_consts)
    return code.replace(co_firstlineno=code.co_firstlineno + offset, co_consts=consts)
