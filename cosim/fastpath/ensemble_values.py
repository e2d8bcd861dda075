"""The members' values of a block's parameter expressions, evaluated for all members at once.

An ensemble's members differ in the values of the model parameters their blocks' expressions
read (``"=kp"``, ``"=[-0.6 * mu, 0.0, mu]"``). Evaluated member by member in a workspace, each
expression costs tens of microseconds; here each is evaluated once, on ``(N,)`` arrays of the
members' values, where that gives every member exactly what its own evaluation gives:
names, numbers, unary ``- +``, ``+ - * /`` and lists of these, on parameters that are floats
in every member. Elementwise float64 arithmetic rounds as Python's float arithmetic does,
an int operand (at most 2**53 in magnitude) converts exactly either way, and anything that
would raise or give a non-finite value in a member's own evaluation (a division by zero, an
overflow) is handed back to that evaluation (:func:`evaluate_many` says None), so the errors
stay the evaluator's own.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Mapping, Sequence

import numpy as np

from cosim.model.expr.syntax import CONSTANTS, LIMITS, has_expression, is_expression, parse

__all__ = ["member_values", "varying_names"]

#: Largest int operand converted to float exactly by both Python and numpy.
_EXACT_INT = 2 ** 53

#: Each operator on member arrays, and on Python scalars (a member's own arithmetic).
_OPS = {ast.Add: (np.add, operator.add), ast.Sub: (np.subtract, operator.sub),
        ast.Mult: (np.multiply, operator.mul), ast.Div: (np.true_divide, operator.truediv)}


class _Refused(Exception):
    """The expression is not evaluated here (each member evaluates it on its own)."""


def member_values(spec: Mapping, names: Mapping[str, object], n: int) -> list[dict] | None:
    """Each member's evaluated ``spec`` (a block's construction arguments), or None.

    Parameters
    ----------
    spec : dict
        Argument name -> value as given: an expression, a list or dict holding some, or a
        plain value (the same object for every member, as a member's own evaluation gives).
    names : dict of str to object
        The values the expressions may read (:func:`varying_names`): a name -> one value
        for all members (a Python float or int), or an ``(n,)`` float64 array of the
        members' float values. A name not in it (a context's variable, an array, an unknown
        one) makes this return None.
    n : int
        Members.

    Returns
    -------
    list of dict, or None
        Per member, argument name -> its value as
        :func:`cosim.model.evaluate.parameter_value` gives it in the member's workspace; None
        when an expression is outside what is evaluated exactly here.
    """
    try:
        with np.errstate(all="raise", under="ignore"):
            columns = {k: _value(v, names, n) for k, v in spec.items()}
    except (_Refused, FloatingPointError, ZeroDivisionError, OverflowError):
        return None
    return [{k: pick(j) for k, pick in columns.items()} for j in range(n)]


def _value(v, names: Mapping, n: int):
    """``j -> member j's value`` of one spec value (see :func:`member_values`)."""
    if is_expression(v):
        out = _expression(v[1:], names, n)
        if isinstance(out, np.ndarray):
            if out.ndim == 1:
                rows = out.tolist()
                return rows.__getitem__
            rows = np.ascontiguousarray(out)     # (n, k): a member's list is its row
            return lambda j: rows[j].copy()      # its own array, as its evaluation makes
        if isinstance(out, list):
            return lambda j: np.array(out, dtype=float)
        return lambda j: out
    if isinstance(v, (list, tuple)) and has_expression(v):
        parts = [_value(e, names, n) for e in v]
        return lambda j: [p(j) for p in parts]
    if isinstance(v, dict) and has_expression(v):
        parts = {k: _value(e, names, n) for k, e in v.items()}
        return lambda j: {k: p(j) for k, p in parts.items()}
    return lambda j: v


def _expression(text: str, names: Mapping, n: int):
    """The value of ``text`` for all members: a Python scalar (the same for all), an
    ``(n,)`` array, an ``(n, k)`` array (a list with a member value: one row per member),
    or a list of scalars (a list the same for all)."""
    try:
        tree, _ = parse(text, LIMITS)
    except Exception:
        raise _Refused from None           # the member's own evaluation says what is wrong
    return _node(tree.body, names, n)


def _node(node, names: Mapping, n: int):
    kind = type(node)
    if kind is ast.Constant:
        return _scalar(node.value)
    if kind is ast.Name:
        v = names[node.id] if node.id in names else CONSTANTS.get(node.id)
        return v if isinstance(v, np.ndarray) else _scalar(v)
    if kind is ast.UnaryOp and type(node.op) in (ast.USub, ast.UAdd):
        v = _node(node.operand, names, n)
        if isinstance(v, list):
            raise _Refused
        if isinstance(node.op, ast.UAdd):
            return v
        return np.negative(v) if isinstance(v, np.ndarray) else -v
    if kind is ast.BinOp and type(node.op) in _OPS:
        a, b = _node(node.left, names, n), _node(node.right, names, n)
        if isinstance(a, list) or isinstance(b, list) or np.ndim(a) > 1 or np.ndim(b) > 1:
            raise _Refused
        on_arrays, on_scalars = _OPS[type(node.op)]
        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            out = on_arrays(a, b)
            if not np.isfinite(out).all():
                raise _Refused             # a member's own evaluation refuses or says NaN
            return out
        return _scalar(on_scalars(a, b))
    if kind in (ast.List, ast.Tuple) and 0 < len(node.elts) <= LIMITS.max_elements:
        items = [_node(e, names, n) for e in node.elts]
        if any(isinstance(v, list) or np.ndim(v) > 1 for v in items):
            raise _Refused                 # nested lists: each member evaluates its own
        if not any(isinstance(v, np.ndarray) for v in items):
            return [float(v) for v in items]
        out = np.empty((n, len(items)))
        for c, v in enumerate(items):
            out[:, c] = v
        return out
    raise _Refused


def _scalar(v):
    """``v`` if it is a finite float or an int that converts to float exactly, else
    :class:`_Refused` (a member's own evaluation decides what it is)."""
    if (type(v) is float and math.isfinite(v)) or (type(v) is int and abs(v) <= _EXACT_INT):
        return v
    raise _Refused


def varying_names(params: Mapping, overrides: Sequence[Mapping]) -> dict | None:
    """The values :func:`member_values` reads: each model parameter that is a float or int
    (its one value), or the ``(n,)`` array of the members' values where members give it
    different floats. None when an override is not a float or int (each member's workspace
    then checks it)."""
    scalar = (float, int, np.float64)
    # A parameter of another type is None: an expression reading it is each member's own.
    out = {k: (float(v) if type(v) is np.float64 else v) if type(v) in scalar else None
           for k, v in params.items()}
    for name in {k for over in overrides for k in over}:
        vals = [over.get(name, params.get(name)) for over in overrides]
        if not all(type(v) in scalar for v in vals):
            return None
        first = vals[0]
        if all(type(v) is type(first) and _same(v, first) for v in vals):
            out[name] = float(first) if type(first) is np.float64 else first
        elif all(type(v) is not int for v in vals):
            out[name] = np.array(vals, dtype=np.float64)
        else:
            out[name] = None           # ints among other values: each member's own
    return out


def _same(a, b) -> bool:
    """True if two numbers are the same value, bit for bit (``0.0`` and ``-0.0`` apart)."""
    if type(a) is int:
        return a == b
    return np.float64(a).tobytes() == np.float64(b).tobytes()
