"""Vector statements lowered to numpy calls that write into arrays allocated once.

Evaluated as written, a vector statement ``target = expression`` over a group's arrays
allocates a new array for every operation (``(a * u - c) / tau``: three, and a copy into the
target) and passes each Python float through numpy's scalar conversion. Each numpy call
costs about 0.3 µs whatever the group's size, a Python-float operand about 0.5 µs more, and
on large groups each allocation about as much as the arithmetic (issue 17: a model of two
groups of 10,000 blocks paid about 20 µs a tick plus 7.7 µs per 1,000 blocks; lowered, 11 µs
plus 4.7 µs, CPU time on this machine). Lowered, the same operations run in the same
order as ufunc calls with an output array — the target itself when the statement reads none
of its slots, else a buffer of the generated module — and literals and parameters are 0-d
arrays made once. Each element goes through the same IEEE operations on the same operands:
the results are bit for bit those of the expression as written.

Only ``+ - * /``, unary ``-`` and ``min``/``max`` of two values on a group's arrays are
lowered; any other operation (``abs``, ``**``, a conditional expression) is an operand numpy
evaluates as written. Python's ``min(a, b)`` is ``b if b < a else a`` and ``max(a, b)`` is
``b if b > a else a`` (NaN and signed zeros included): lowered, ``a`` is computed into the
target, ``b`` compared with it elementwise (IEEE comparisons, as Python's) and copied where
the comparison holds, so each member gets the very value Python selects.
"""

from __future__ import annotations

import ast
import re

import numpy as np

__all__ = ["GLOBALS", "Spans", "lower", "selection"]

_BINOPS = {ast.Add: "_add", ast.Sub: "_sub", ast.Mult: "_mul", ast.Div: "_div"}

#: The comparison selecting a selection's second value (see the module docstring).
_SELECT = {"min": "_less", "max": "_greater"}

#: The numpy functions lowered statements call (globals of the generated code).
GLOBALS = {"_add": np.add, "_sub": np.subtract, "_mul": np.multiply, "_div": np.true_divide,
           "_neg": np.negative, "_copyto": np.copyto, "_asarray": np.asarray,
           "_less": np.less, "_greater": np.greater}

#: An operand's source that names a value (read twice without computing it twice).
_PLAIN = re.compile(r"^\w+$")

#: A parameter's global (``_k<n>``): one float for the group, or the members' array.
_PARAM = re.compile(r"^_k\d+$")


class Spans:
    """The slots each name or index of the generated code covers, and the module-level
    arrays lowered statements need.

    Attributes
    ----------
    span : dict of str to (str, int, int)
        View name (``_v<n>``) or index constant (``_k<n>``) -> ``(array, lo, hi)``: the
        slots ``lo .. hi-1`` of ``S``, ``D``, ``C``, ``Z`` or ``K<i>`` it reads (at least).
    preamble : list of str
        Module-level lines defining the buffers and constants (run once per fast path).
    """

    def __init__(self):
        self.span: dict[str, tuple] = {}
        self.preamble: list[str] = []
        self._once: dict[str, str] = {}
        self._buffers: dict[int, list[str]] = {}
        self._masks: dict[int, str] = {}
        self._free: dict[int, int] = {}
        self._count = 0

    def release(self) -> None:
        """Every buffer free again (a new statement)."""
        self._free = {}

    def buffer(self, n: int) -> str:
        """Name of a float buffer of shape ``(n,)`` no other value of this statement uses."""
        pool = self._buffers.setdefault(n, [])
        i = self._free.get(n, 0)
        self._free[n] = i + 1
        if i == len(pool):
            pool.append(self._name("_b"))
            self.preamble.append(f"{pool[i]} = np.zeros({n})")
        return pool[i]

    def mask(self, n: int) -> str:
        """Name of a boolean buffer of shape ``(n,)``, shared by every statement: a
        selection's comparison is used by the next call, before any other is computed."""
        if n not in self._masks:
            self._masks[n] = name = self._name("_m")
            self.preamble.append(f"{name} = np.zeros({n}, dtype=bool)")
        return self._masks[n]

    def once(self, source: str) -> str:
        """Name of a module-level float array of ``source``'s value, computed once per fast
        path: a 0-d array for a float (a literal, a parameter the members share), else the
        array itself (a parameter differing between members, a view)."""
        if source not in self._once:
            self._once[source] = name = self._name("_z")
            self.preamble.append(f"{name} = _asarray({source}, dtype=float)")
        return self._once[source]

    def _name(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}{self._count}"

    def reads(self, node) -> list[tuple]:
        """The spans an expression reads."""
        return [self.span[n.id] for n in ast.walk(node)
                if isinstance(n, ast.Name) and n.id in self.span]

    def is_array(self, node) -> bool:
        """Whether an expression reads a group's array (a view, or gathered by an index)."""
        return bool(self.reads(node))


def _overlap(a: tuple, b: tuple) -> bool:
    return a[0] == b[0] and a[1] < b[2] and b[1] < a[2]


def lower(spans: Spans, targets: list[str], exprs: list[str], n: int) -> list[str]:
    """Statements giving each target its expression, all evaluated before any is assigned.

    Parameters
    ----------
    spans : Spans
    targets : list of str
        A view's name (``_v<n>``) or an indexed array (``C[_k<n>]``), each of ``n`` slots.
    exprs : list of str
        Expressions of the group's values, one per target.
    n : int
        Members of the group.
    """
    spans.release()
    trees = [ast.parse(e, mode="eval").body for e in exprs]
    reads = [r for tree in trees for r in spans.reads(tree)]
    written = [spans.span.get(tg) or spans.reads(ast.parse(tg, mode="eval").body)[0]
               for tg in targets]
    # A target read by some expression is written only once all are evaluated.
    simultaneous = any(_overlap(w, r) for w in written for r in reads)
    dests = [tg if tg in spans.span and not simultaneous else spans.buffer(n)
             for tg in targets]
    lines: list[str] = []
    for dest, tree in zip(dests, trees):
        _into(spans, tree, dest, n, lines)
    for tg, dest in zip(targets, dests):
        if dest != tg:
            lines.append(f"_copyto({tg}, {dest})" if tg in spans.span else f"{tg} = {dest}")
    return lines


def _gather(spans: Spans, node) -> bool:
    """Whether ``node`` is ``A[_k<n>]``: slots of ``A`` gathered by an index constant."""
    return isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Name) \
        and node.slice.id in spans.span


def selection(node) -> bool:
    """Whether ``node`` is ``min(a, b)`` or ``max(a, b)``: two values, one selected."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
        and node.func.id in _SELECT and len(node.args) == 2 and not node.keywords \
        and not any(isinstance(a, ast.Starred) for a in node.args)


def _op(spans: Spans, node) -> str | None:
    """The ufunc computing ``node`` when it is lowered (for a selection, its comparison),
    else None."""
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS and spans.is_array(node):
        return _BINOPS[type(node.op)]
    if selection(node) and spans.is_array(node):
        return _SELECT[node.func.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) \
            and spans.is_array(node):
        return "_neg"
    return None


def _fixed(spans: Spans, node) -> bool:
    """Whether an expression is fixed for a run: literals and parameters under ``+ - *``
    (no division: a division by zero raises when the tick computes it, as it did)."""
    if isinstance(node, ast.Constant):
        return type(node.value) in (int, float) and abs(node.value) <= 2 ** 53
    if isinstance(node, ast.Name):
        return bool(_PARAM.match(node.id)) and node.id not in spans.span
    if isinstance(node, ast.UnaryOp):
        return isinstance(node.op, ast.USub) and _fixed(spans, node.operand)
    return isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult)) \
        and _fixed(spans, node.left) and _fixed(spans, node.right)


def _operand(spans: Spans, node) -> str:
    """Source of an operand that is not lowered. One fixed for the run (a literal, a
    parameter, ``-p_k * 0.01``) is a 0-d array (numpy's Python-float path is the slow one;
    an array when parameters differ between members) computed once, by the same operations;
    anything else is written as it is."""
    if _fixed(spans, node):
        if isinstance(node, ast.Constant):
            return spans.once(repr(float(node.value)))
        return spans.once(ast.unparse(node))
    if _gather(spans, node):
        # take: about 30 % faster than indexing on 10,000 slots (into ``out=`` slower still).
        return f"{node.value.id}.take({node.slice.id})"
    return ast.unparse(node)


def _into(spans: Spans, node, dest: str, n: int, lines: list[str]) -> None:
    """Append the calls computing ``node`` into ``dest``, left operand first (operations
    have no side effects: only the order of each one's operands matters)."""
    op = _op(spans, node)
    if op is None:
        lines.append(f"_copyto({dest}, {_operand(spans, node)})")
        return
    if selection(node):
        _select(spans, node, op, dest, n, lines)
        return
    if op == "_neg":
        if _op(spans, node.operand):
            _into(spans, node.operand, dest, n, lines)
            lines.append(f"_neg({dest}, {dest})")
        else:
            lines.append(f"_neg({_operand(spans, node.operand)}, {dest})")
        return
    left, right = node.left, node.right
    if _op(spans, left):
        _into(spans, left, dest, n, lines)
        a = dest
        if _op(spans, right):
            b = spans.buffer(n)
            _into(spans, right, b, n, lines)
        else:
            b = _operand(spans, right)
    elif _op(spans, right):
        _into(spans, right, dest, n, lines)
        a, b = _operand(spans, left), dest
    else:
        a, b = _operand(spans, left), _operand(spans, right)
    lines.append(f"{op}({a}, {b}, {dest})")


def _select(spans: Spans, node, compare: str, dest: str, n: int, lines: list[str]) -> None:
    """Append the calls computing the selection ``node`` (``min(a, b)``: ``b if b < a else
    a``) into ``dest``: ``a`` into ``dest``, then ``b`` copied where ``compare(b, dest)``."""
    a, b = node.args
    _into(spans, a, dest, n, lines)
    if _op(spans, b):
        other = spans.buffer(n)
        _into(spans, b, other, n, lines)
    else:
        other = _operand(spans, b)
        if not _PLAIN.match(other):
            other = spans.buffer(n)
            _into(spans, b, other, n, lines)
    mask = spans.mask(n)
    lines += [f"{compare}({other}, {dest}, {mask})", f"_copyto({dest}, {other}, where={mask})"]
