"""What the ensemble translation (:mod:`cosim.fastpath.ensemble`) asks of the generated
code's Python expressions: whether one reads a name, can raise, is a constant; the chains of
conditional expressions a lookup table compiles to (their axes and leaves); an expression as
a template whose constants are slots, and a template filled again.
"""

from __future__ import annotations

import ast
import copy
import re

__all__ = ["COMPARISONS", "RAISING", "axes", "conditional_chain", "constant", "divides_by_constant",
           "fill", "math_call", "reads", "safe", "template"]

#: The comparisons translated, and the translation's function for each.
COMPARISONS = {ast.Lt: "_lt", ast.LtE: "_le", ast.Gt: "_gt", ast.GtE: "_ge", ast.Eq: "_eq",
               ast.NotEq: "_ne"}
#: Operators that can raise on some values (a member's own run may never evaluate them).
RAISING = (ast.Div, ast.FloorDiv, ast.Mod, ast.Pow)


def reads(node, names: set) -> bool:
    """True if ``node`` reads one of ``names``."""
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(node))


def math_call(node) -> bool:
    """``math.<f>(x)``: a one-argument function of the math module."""
    f = node.func
    return isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and \
        f.value.id == "math" and len(node.args) == 1 and not node.keywords


def safe(node) -> bool:
    """True if evaluating ``node`` cannot raise whatever the values (no division, power or
    math function), so every member may compute it whether or not its run does."""
    for n in ast.walk(node):
        if isinstance(n, ast.BinOp) and isinstance(n.op, RAISING):
            return False
        if isinstance(n, ast.Call) and not (isinstance(n.func, ast.Name) and
                                            n.func.id in ("abs", "min", "max")):
            return False
    return True


def divides_by_constant(node) -> bool:
    """True if the only operations of ``node`` that can raise are divisions by a constant
    (a lookup's cell widths): they raise for a member exactly when its own run's does."""
    for n in ast.walk(node):
        if isinstance(n, ast.BinOp) and isinstance(n.op, RAISING) and not (
                isinstance(n.op, ast.Div) and constant(n.right)):
            return False
        if isinstance(n, ast.Call) and not (isinstance(n.func, ast.Name) and
                                            n.func.id in ("abs", "min", "max")):
            return False
    return True


def _simple_tests(tests) -> bool:
    """True if every test compares one left side with a constant (one comparison each)."""
    lefts = {ast.dump(t.left) for t in tests if isinstance(t, ast.Compare)}
    return len(lefts) == 1 and all(
        isinstance(t, ast.Compare) and len(t.ops) == 1 and type(t.ops[0]) in COMPARISONS and
        constant(t.comparators[0]) for t in tests)


def _outer(chain) -> tuple[list, list]:
    """A chain over one value: ``chain`` cut at its first test of another value (the last
    branch of ``a if x < 1 else (b if y < 2 else c)`` is the inner chain, which
    :func:`conditional_chain` follows as tests of the same chain)."""
    tests, values = chain
    left = ast.dump(tests[0].left) if tests and isinstance(tests[0], ast.Compare) else None
    cut = next((k for k, t in enumerate(tests)
                if not isinstance(t, ast.Compare) or ast.dump(t.left) != left), len(tests))
    if cut in (0, len(tests)):
        return tests, values
    rest = values[-1]
    for t, v in zip(reversed(tests[cut:]), reversed(values[cut:-1])):
        rest = ast.IfExp(test=t, body=v, orelse=rest)
    return tests[:cut], values[:cut] + [rest]


def axes(chain) -> tuple[list | None, list]:
    """``(axes, leaves)`` of a conditional chain over one value, whose branches may be
    chains over another with the same tests in every branch (a 2-D table's rows of cells),
    and so on: each axis's tests, and the leaves in row-major order (the first axis's
    branch slowest). ``(None, [])`` when the tests are not comparisons of one value with
    constants."""
    tests, values = _outer(chain)
    if not _simple_tests(tests):
        return None, []
    found = [tests]
    while all(isinstance(v, ast.IfExp) for v in values):
        inner = [_outer(conditional_chain(v)) for v in values]
        first = [ast.unparse(t) for t in inner[0][0]]
        if not _simple_tests(inner[0][0]) or \
                any([ast.unparse(t) for t in c[0]] != first for c in inner[1:]):
            break
        found.append(inner[0][0])
        values = [leaf for _, leaves in inner for leaf in leaves]
    return found, values


def conditional_chain(node) -> tuple[list, list]:
    """``(tests, values)`` of ``v0 if t0 else v1 if t1 else ... else vm``."""
    tests, values = [], []
    while isinstance(node, ast.IfExp):
        tests.append(node.test)
        values.append(node.body)
        node = node.orelse
    values.append(node)
    return tests, values


def constant(node) -> bool:
    """A constant of the generated code: a number, a constant ``_k<i>`` (shared or a
    member's), or the negation of one."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    if isinstance(node, ast.Name):
        return node.id.startswith("_k")
    return isinstance(node, ast.Constant) and type(node.value) in (int, float)


class _Slots(ast.NodeTransformer):
    """Replaces each constant of an expression by a slot ``_P<i>`` (in evaluation order)."""

    def __init__(self):
        self.consts: list[str] = []

    def visit(self, node):
        if constant(node):
            self.consts.append(ast.unparse(node))
            return ast.Name(f"_P{len(self.consts) - 1}", ast.Load())
        return self.generic_visit(node)


def template(node) -> tuple[str, list[str]]:
    """``(source with slots, constants' sources)`` of an expression (see :class:`_Slots`)."""
    slots = _Slots()
    tree = slots.visit(copy.deepcopy(node))
    return ast.unparse(tree), slots.consts


def fill(tree, names: list[str]):
    """``tree`` (a template) with slot ``_P<i>`` read from ``names[i]``."""
    class Fill(ast.NodeTransformer):
        def visit_Name(self, n):
            if re.fullmatch(r"_P\d+", n.id):
                return ast.parse(names[int(n.id[2:])], mode="eval").body
            return n
    return Fill().visit(tree)
