"""Expression text -> checked syntax tree: the language's whitelist, its limits and constants.

Nothing here evaluates anything: :func:`parse` refuses every construct outside the language
before an evaluator sees the tree, and lists the variable names the expression uses.
"""

from __future__ import annotations

import ast
import difflib
import functools
import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from cosim.model.expr.errors import Refused
from cosim.model.expr.functions import FUNCTIONS

__all__ = ["CONSTANTS", "LIMITS", "OPERATORS", "Limits", "has_expression", "is_expression",
           "parse"]


@dataclass(frozen=True)
class Limits:
    """Resource bounds of one evaluation; every one is checked before the work is done.

    Attributes
    ----------
    max_length : int
        Characters of expression text.
    max_nodes, max_depth : int
        Size and nesting depth of the syntax tree.
    max_int_bits : int
        Bits of any integer value (Python ints are unbounded; ``9**9**9`` must not be tried).
    max_elements : int
        Elements of any one array (10**6 float64 = 8 MB; bigger data belongs in a data file).
    max_total_elements : int
        Elements of all arrays one evaluation creates, which bounds its memory and time.
    max_flops : int
        Multiply-adds of ``@``, ``inv`` and ``det`` together.
    """

    max_length: int = 10_000
    max_nodes: int = 5_000
    max_depth: int = 100
    max_int_bits: int = 1024
    max_elements: int = 10**6
    max_total_elements: int = 10**7
    max_flops: int = 10**9


LIMITS = Limits()

CONSTANTS: Mapping[str, float] = MappingProxyType(
    {"pi": math.pi, "e": math.e, "inf": math.inf, "nan": math.nan})


def is_expression(value: object) -> bool:
    """Return True if a model-file value is an expression: a string starting with ``=``."""
    return isinstance(value, str) and value.startswith("=")


def has_expression(value: object) -> bool:
    """True if ``value``, or an element of a nested list, tuple or dict, is an expression."""
    if isinstance(value, (list, tuple)):
        return any(has_expression(v) for v in value)
    if isinstance(value, dict):
        return any(has_expression(v) for v in value.values())
    return is_expression(value)


#: The operators of the language: AST node type -> the function the evaluator applies.
OPERATORS: dict[type, Callable] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow, ast.MatMult: operator.matmul,
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge,
    ast.UAdd: operator.pos, ast.USub: operator.neg, ast.Not: operator.not_,
}
_NODES = {ast.Expression, ast.Constant, ast.Name, ast.Load, ast.List, ast.Tuple, ast.UnaryOp,
          ast.BinOp, ast.BoolOp, ast.And, ast.Or, ast.Compare, ast.IfExp, ast.Call,
          ast.Subscript, ast.Slice, *OPERATORS}
_REFUSED_NAMES = {
    ast.Attribute: "attribute access", ast.Lambda: "lambda", ast.ListComp: "comprehensions",
    ast.SetComp: "comprehensions", ast.DictComp: "comprehensions",
    ast.GeneratorExp: "comprehensions", ast.JoinedStr: "f-strings",
    ast.NamedExpr: "assignment (:=)", ast.Starred: "starred arguments",
    ast.Dict: "dict literals", ast.Set: "set literals", ast.Invert: "operator ~",
    ast.BitAnd: "operator &", ast.BitOr: "operator |", ast.BitXor: "operator ^",
    ast.LShift: "operator <<", ast.RShift: "operator >>", ast.Is: "operator 'is'",
    ast.IsNot: "operator 'is not'", ast.In: "operator 'in'", ast.NotIn: "operator 'not in'",
}


@functools.lru_cache(maxsize=1024)   # sweeps re-evaluate the same texts; trees are not mutated
def parse(text: str, limits: Limits) -> tuple[ast.Expression, tuple[str, ...]]:
    """Parse and whitelist-check ``text``.

    Parameters
    ----------
    text : str
        Expression text without the model-file ``=`` prefix.
    limits : Limits
        Bounds on the text length and the tree's size and depth.

    Returns
    -------
    tree : ast.Expression
        The checked tree (cached and shared: never mutate it).
    names : tuple of str
        The variable names it uses, in order of first use.

    Raises
    ------
    Refused
        On a syntax error, a construct outside the language or an exceeded limit.
    """
    if len(text) > limits.max_length:
        raise Refused(f"expression is {len(text)} characters long (limit {limits.max_length})")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as err:
        raise Refused(f"syntax error: {err.msg}") from None
    except (RecursionError, MemoryError, ValueError):
        raise Refused("expression is nested too deeply") from None
    free: dict[str, None] = {}   # ordered set
    count = 0
    stack = [(tree.body, 1)]
    while stack:
        node, depth = stack.pop()
        count += 1
        if count > limits.max_nodes or depth > limits.max_depth:
            raise Refused(f"expression is too large or nested too deeply (limits: "
                           f"{limits.max_nodes} nodes, depth {limits.max_depth})")
        kind = type(node)
        if kind not in _NODES:
            what = _REFUSED_NAMES.get(kind, kind.__name__)
            raise Refused(f"{what} is not allowed in an expression")
        children = list(ast.iter_child_nodes(node))
        if kind is ast.Name:
            if node.id.startswith("_"):
                raise Refused(f"names starting with '_' are not allowed ({node.id!r})")
            free[node.id] = None
        elif kind is ast.Constant:
            _check_constant(node.value, limits)
        elif kind is ast.Call:
            children = _check_call(node)
        elif kind is ast.BinOp and isinstance(node.op, (ast.Add, ast.Mult)) and any(
                isinstance(side, (ast.List, ast.Tuple)) for side in (node.left, node.right)):
            raise Refused("'+' and '*' with a list literal are ambiguous (Python concatenates "
                           "or repeats, numpy adds or scales); write array([...]) for "
                           "arithmetic or zeros(n)/ones(n) to repeat")
        stack.extend((child, depth + 1) for child in reversed(children))  # source order
    return tree, tuple(free)


def _check_constant(value: object, limits: Limits) -> None:
    if isinstance(value, int) and value.bit_length() > limits.max_int_bits:
        raise Refused(f"integer literal has more than {limits.max_int_bits} bits")
    if value is None or not isinstance(value, (int, float, str)):
        raise Refused(f"constant {value!r} is not allowed (numbers and strings only)")


def _check_call(node: ast.Call) -> list[ast.AST]:
    func = node.func
    if not isinstance(func, ast.Name):
        raise Refused("only the allowed functions can be called, by name")
    if func.id not in FUNCTIONS:
        close = difflib.get_close_matches(func.id, FUNCTIONS, n=3)
        hint = f" (did you mean {', '.join(map(repr, close))}?)" if close else ""
        raise Refused(f"function {func.id!r} is not allowed{hint}; allowed functions: "
                       + ", ".join(sorted(FUNCTIONS)))
    if node.keywords:
        raise Refused(f"{func.id}() takes positional arguments only")
    _, lo, hi = FUNCTIONS[func.id]
    if not lo <= len(node.args) <= hi:
        want = str(lo) if lo == hi else f"{lo} to {hi}" if hi < 99 else f"at least {lo}"
        raise Refused(f"{func.id}() takes {want} arguments, got {len(node.args)}")
    return list(node.args)   # func is a function name, not a variable
