"""Evaluation of a checked syntax tree: values, operators and calls, within the limits."""

from __future__ import annotations

import ast
import math
from collections.abc import Mapping

import numpy as np

from cosim.model.expr.errors import Refused
from cosim.model.expr.functions import FUNCTIONS, as_index
from cosim.model.expr.syntax import CONSTANTS, OPERATORS, Limits, is_expression

__all__ = ["Evaluator", "as_value", "run"]


def run(tree: ast.Expression, names: Mapping[str, object], limits: Limits) -> object:
    """Evaluate a checked tree; every arithmetic failure becomes `Refused`."""
    try:
        # Raise instead of producing nan/inf silently: a nan parameter fails much later.
        with np.errstate(divide="raise", over="raise", invalid="raise", under="ignore"):
            value = Evaluator(names, limits).visit(tree.body)
    except ZeroDivisionError:
        raise Refused("division by zero") from None
    except (OverflowError, FloatingPointError, ValueError, IndexError, TypeError,
            np.linalg.LinAlgError) as err:
        raise Refused(f"{type(err).__name__}: {err}") from None
    if isinstance(value, np.ndarray):
        return np.array(value, dtype=float)   # a fresh copy: blocks must not share state
    return value


def as_value(name: str, value: object) -> object:
    """A scope's value as the evaluator's types (Python scalar, str, float64 array)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple, np.ndarray)):
        try:
            array = np.asarray(value, dtype=float)
        except (TypeError, ValueError) as err:
            raise Refused(f"variable {name!r} is not a numeric array: {err}") from None
        return array if array.ndim else array.item()
    raise Refused(f"variable {name!r} has unsupported type {type(value).__name__}")


def _scalar(value: object) -> object:
    """numpy scalars and 0-d arrays -> Python scalars; arrays -> float64."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.item() if value.ndim == 0 else value.astype(float, copy=False)
    return value


class Evaluator:
    """Walks a checked tree, charging every array it creates against the limits."""

    def __init__(self, names: Mapping[str, object], limits: Limits):
        self.names = names
        self.limits = limits
        self.elements = 0
        self.flops = 0

    def reserve(self, n: int | float, flops: int | float = 0) -> None:
        """Account for an array of `n` elements before allocating it."""
        lim = self.limits
        if n > lim.max_elements:
            raise Refused(f"array of {n:.4g} elements exceeds the limit of {lim.max_elements}")
        self.elements += n
        self.flops += flops
        if self.elements > lim.max_total_elements:
            raise Refused(f"the expression creates more than {lim.max_total_elements} "
                           f"array elements in total")
        if self.flops > lim.max_flops:
            raise Refused(f"the expression needs more than {lim.max_flops:.3g} operations")

    def visit(self, node: ast.AST) -> object:
        return getattr(self, "visit_" + type(node).__name__)(node)

    def visit_Constant(self, node: ast.Constant) -> object:
        return node.value

    def visit_Name(self, node: ast.Name) -> object:
        if node.id not in self.names:
            return CONSTANTS[node.id]
        value = self.names[node.id]
        if is_expression(value):
            raise Refused(f"variable {node.id!r} is the unevaluated expression {value!r}; "
                           f"evaluate its context first (evaluate_context)")
        return as_value(node.id, value)

    def visit_List(self, node: ast.List | ast.Tuple) -> np.ndarray:
        items, total = [], 0
        for element in node.elts:
            item = self.visit(element)
            if isinstance(item, str):
                raise Refused("list elements must be numbers or arrays, not strings")
            total += np.size(item)   # checked per element: stop before holding huge pieces
            if total > self.limits.max_elements:
                self.reserve(total)
            items.append(item)
        self.reserve(total)
        return np.array(items, dtype=float)

    visit_Tuple = visit_List

    def visit_UnaryOp(self, node: ast.UnaryOp) -> object:
        value = self.visit(node.operand)
        if isinstance(node.op, ast.Not):
            return not self.truth(value)
        if isinstance(value, str):
            raise Refused("arithmetic on strings is not allowed")
        if isinstance(value, np.ndarray):
            self.reserve(value.size)
        return OPERATORS[type(node.op)](value)

    def visit_BinOp(self, node: ast.BinOp) -> object:
        return self.binary(type(node.op), self.visit(node.left), self.visit(node.right))

    def binary(self, op: type, a: object, b: object) -> object:
        if isinstance(a, str) or isinstance(b, str):
            raise Refused("arithmetic on strings is not allowed (strings support == and != "
                           "only)")
        if op is ast.MatMult:
            return self.matmul(a, b)
        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            self.reserve_broadcast(a, b)
            return _scalar(OPERATORS[op](a, b))
        if op is ast.Pow and isinstance(a, int) and isinstance(b, int) and b > 0:
            # 2**bits(a)-1 <= |a|, so this lower bound on the result's size refuses 9**9**9
            # before Python starts computing it.
            if (abs(a).bit_length() - 1) * b > self.limits.max_int_bits:
                raise Refused(f"integer result of {a}**{b} is too large")
        result = OPERATORS[op](a, b)
        if isinstance(result, complex):
            raise Refused(f"complex result of {a!r}**{b!r}")
        if isinstance(result, float) and not math.isfinite(result) and math.isfinite(
                a) and math.isfinite(b):
            raise Refused("floating-point overflow")   # as arrays do, under np.errstate
        if isinstance(result, int) and result.bit_length() > self.limits.max_int_bits:
            raise Refused(f"integer result has more than {self.limits.max_int_bits} bits")
        return result

    def reserve_broadcast(self, *values: object) -> tuple[int, ...]:
        try:
            shape = np.broadcast_shapes(*(np.shape(v) for v in values))
        except ValueError:
            raise Refused("shapes " + ", ".join(str(np.shape(v)) for v in values)
                           + " do not broadcast") from None
        self.reserve(math.prod(shape))
        return shape

    def matmul(self, a: object, b: object) -> object:
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)
                and 1 <= a.ndim <= 2 and 1 <= b.ndim <= 2):
            raise Refused("'@' needs two vectors or matrices")
        if a.shape[-1] != b.shape[0]:
            raise Refused(f"'@' shapes {a.shape} and {b.shape} do not match")
        out = a.shape[:-1] + b.shape[1:]
        self.reserve(math.prod(out), flops=math.prod(out) * a.shape[-1])
        return _scalar(a @ b)

    def truth(self, value: object) -> bool:
        if isinstance(value, (np.ndarray, str)):
            raise Refused(f"the truth value of a {type(value).__name__} is ambiguous; "
                           f"use a comparison of numbers")
        return bool(value)

    def visit_BoolOp(self, node: ast.BoolOp) -> object:
        stop = isinstance(node.op, ast.Or)   # `or` stops at the first true operand
        for operand in node.values[:-1]:
            value = self.visit(operand)
            if self.truth(value) is stop:
                return value
        return self.visit(node.values[-1])

    def visit_Compare(self, node: ast.Compare) -> object:
        left = self.visit(node.left)
        for op, comparator in zip(node.ops, node.comparators):
            right = self.visit(comparator)
            result = self.compare(type(op), left, right)
            if len(node.ops) == 1:
                return result
            if not self.truth(result):   # chains compare numbers only, like Python's `and`
                return False
            left = right
        return True

    def compare(self, op: type, a: object, b: object) -> object:
        if isinstance(a, str) or isinstance(b, str):
            if not (isinstance(a, str) and isinstance(b, str) and op in (ast.Eq, ast.NotEq)):
                raise Refused("strings can only be compared with strings, by == and !=")
            return OPERATORS[op](a, b)
        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            self.reserve_broadcast(a, b)
            return OPERATORS[op](a, b).astype(float)
        return OPERATORS[op](a, b)

    def visit_IfExp(self, node: ast.IfExp) -> object:
        return self.visit(node.body if self.truth(self.visit(node.test)) else node.orelse)

    def visit_Call(self, node: ast.Call) -> object:
        name = node.func.id
        args = [self.visit(arg) for arg in node.args]
        if any(isinstance(arg, str) for arg in args):
            raise Refused(f"{name}() takes numbers or arrays, not strings")
        return _scalar(FUNCTIONS[name][0](self, *args))

    def visit_Subscript(self, node: ast.Subscript) -> object:
        value = self.visit(node.value)
        if not isinstance(value, np.ndarray):
            raise Refused(f"only arrays can be indexed, not {type(value).__name__}")
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        index = []
        for part in parts:
            if isinstance(part, ast.Slice):
                bounds = (None if p is None else as_index(self.visit(p))
                          for p in (part.lower, part.upper, part.step))
                index.append(slice(*bounds))
            else:
                index.append(as_index(self.visit(part)))
        return _scalar(value[tuple(index)])   # basic indexing: a view, never bigger
