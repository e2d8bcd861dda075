"""Safe evaluation of block-parameter expressions such as ``"=2*zeta*wn"``.

Model files come from other teams, so parameter expressions are evaluated by walking Python's
``ast`` (``mode="eval"``) against an explicit whitelist; user text never reaches ``eval`` or
``exec``, attribute access does not exist, and only allow-listed functions can be called.

Expression convention
---------------------
In a model file a string that starts with ``=`` is an expression; every other value is taken
literally::

    k: 4.0                          # a number
    signs: "+-"                     # a literal string (a Sum block's signs)
    c: =2*zeta*wn*m                 # an expression (YAML keeps ``=...`` as a plain string)
    A: =[[0, 1], [-k/m, -c/m]]

The prefix makes the meaning of a value visible in the file itself: the loader, a linter and a
reviewer can tell an expression from a literal string without knowing the block class (or
remote unit) that will receive it. A literal string that starts with ``=`` is written as an
expression with a string constant: ``='=x'``. In YAML, quote an expression containing ``: `` or
`` #``. `is_expression` applies the convention; `evaluate` accepts the text with or without
the ``=``.

Scopes
------
Variables come from a sequence of mappings, outermost first: the model's parameters, then each
enclosing diagram's context; later (inner) mappings shadow earlier ones. `evaluate_context`
evaluates one context whose entries may refer to outer variables and to each other, and
`Workspace` chains contexts.

Language
--------
Numbers (``int``, ``float``, ``True``/``False``), string constants, list and tuple literals
(which become float arrays), ``+ - * / // % ** @``, comparisons, ``and or not``,
``a if cond else b``, variables, the constants ``pi e inf nan``, calls of the functions in
`FUNCTIONS` (positional arguments only) and subscripts with integers and slices (``A[0, 1]``,
``v[1:]``). Everything else is refused. ``[0]*n`` and ``[1] + [2]`` are refused as well: Python
would repeat/concatenate and numpy would scale/add, so the text is ambiguous; write ``zeros(n)``
or ``array([1, 2])*k``.

Result types
------------
``int`` (exact up to `Limits.max_int_bits`), ``float``, ``bool``, ``str``, or a fresh
``numpy.ndarray`` of ``float64``.
Every array an expression makes is float64; element-wise comparisons of arrays give 0.0/1.0.
Floating-point errors (``sqrt(-1)``, ``log(0)``, overflow) are errors, not ``nan``/``inf``.

Resource bounds (`Limits`): text length, AST size and depth, integer size (checked before
``**`` is computed), elements per array and per evaluation (checked before allocating) and
floating-point work of ``@``, ``inv`` and ``det``.
"""

from __future__ import annotations

import ast
import difflib
import functools
import heapq
import keyword
import math
import operator
from collections import ChainMap
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from cosim.errors import ModelError

__all__ = ["CONSTANTS", "FUNCTIONS", "LIMITS", "ExpressionError", "Limits", "Workspace",
           "evaluate", "evaluate_context", "is_expression"]


class ExpressionError(ModelError):
    """An expression, or a context of expressions, could not be evaluated.

    Parameters
    ----------
    reason : str
        What is wrong, with a remedy where there is one.
    expression : str, optional
        The expression text as written, or None when the error concerns a whole context.
    path : str, optional
        Where the expression lives, e.g. ``"plant/spring.k"`` or ``"plant"`` for a context.
    problems : sequence of str, optional
        For a context: one line per problem (each naming its variable and expression).
    """

    def __init__(self, reason: str, *, expression: str | None = None, path: str | None = None,
                 problems: Sequence[str] = ()):
        self.reason = reason
        self.expression = expression
        self.path = path
        self.problems = list(problems)
        where = path or ("<expression>" if expression is not None else "<context>")
        if expression is not None:   # the field keeps it whole; the message stays readable
            shown = expression if len(expression) <= 200 else expression[:200] + "..."
            head = f"{where} = {shown!r}"
        else:
            head = where
        lines = "".join(f"\n  {i + 1}. {p}" for i, p in enumerate(self.problems))
        super().__init__(f"{head}: {reason}{lines}")


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


class _Refused(Exception):
    """Internal: evaluation stops; the caller adds path and expression."""


def is_expression(value: object) -> bool:
    """Return True if a model-file value is an expression: a string starting with ``=``."""
    return isinstance(value, str) and value.startswith("=")


def evaluate(expression: str, scopes: object = (), *, path: str | None = None,
             limits: Limits = LIMITS) -> object:
    """Evaluate one expression.

    Parameters
    ----------
    expression : str
        Expression text, with or without the leading ``=`` of the model-file convention.
    scopes : Mapping, sequence of Mapping, or Workspace
        Variables, outermost scope first; inner scopes shadow outer ones. Values must already
        be evaluated (see `evaluate_context`).
    path : str, optional
        Where the expression lives (``"plant/spring.k"``); used in error messages.
    limits : Limits
        Resource bounds.

    Returns
    -------
    int, float, bool, str or numpy.ndarray of float64

    Raises
    ------
    ExpressionError
        On syntax errors, refused constructs, undefined names (listing all of them with the
        closest defined names), exceeded limits and arithmetic errors.
    """
    if not isinstance(expression, str):
        raise TypeError(f"expression must be a str, not {type(expression).__name__}")
    names = ChainMap(*reversed(_scope_list(scopes)))
    try:
        tree, free = _compile(_source(expression), limits)
        undefined = [n for n in free if n not in names and n not in CONSTANTS]
        if undefined:
            raise _Refused(_undefined_message(undefined, names))
        return _run(tree, names, limits)
    except _Refused as err:
        raise ExpressionError(str(err), expression=expression, path=path) from None


def evaluate_context(values: Mapping[str, object], scopes: object = (), *,
                     path: str | None = None, limits: Limits = LIMITS) -> dict[str, object]:
    """Evaluate a context's variables in dependency order.

    Entries that are expressions (`is_expression`) may use outer variables and any other entry
    of the same context, in any order; other entries are literal values.

    Parameters
    ----------
    values : Mapping[str, object]
        The context as written: name -> literal value or ``"=expression"``.
    scopes : Mapping, sequence of Mapping, or Workspace
        Outer variables, outermost first.
    path : str, optional
        The context's path (``"plant"``); variable ``wn`` is reported as ``"plant.wn"``.
    limits : Limits
        Resource bounds for each expression.

    Returns
    -------
    dict
        name -> evaluated value, in the order of `values`. Literal lists become float arrays.

    Raises
    ------
    ExpressionError
        Listing every problem: invalid names, refused or failing expressions, undefined names,
        dependency cycles and the variables left unevaluated because of them.
    """
    outer = ChainMap(*reversed(_scope_list(scopes)))
    visible = ChainMap(dict.fromkeys(values), *outer.maps)  # for "defined names" in messages
    problems: list[str] = []
    done: dict[str, object] = {}
    compiled: dict[str, ast.Expression] = {}
    deps: dict[str, set[str]] = {}
    failed: set[str] = set()

    def report(name: str, reason: str) -> None:
        failed.add(name)
        expr = values[name] if is_expression(values[name]) else None
        problems.append(str(ExpressionError(reason, expression=expr, path=_join(path, name))))

    for name, value in values.items():
        if not (isinstance(name, str) and name.isidentifier() and not name.startswith("_")
                and not keyword.iskeyword(name)):
            problems.append(f"{_join(path, str(name))}: {name!r} is not a valid variable name")
            failed.add(name)
            continue
        try:
            if not is_expression(value):
                done[name] = _value(name, value)
                continue
            deps[name] = set()   # known before compiling, so a failure still releases users
            compiled[name], free = _compile(_source(value), limits)
            deps[name] = {n for n in free if n in values}
            undefined = [n for n in free if n not in visible and n not in CONSTANTS]
            if undefined:
                raise _Refused(_undefined_message(undefined, visible))
        except _Refused as err:
            report(name, str(err))

    # Kahn's algorithm, taking ready entries in declaration order so results are deterministic.
    order = {name: i for i, name in enumerate(values)}
    waiting = {n: {d for d in ds if d in deps} for n, ds in deps.items()}
    users: dict[str, list[str]] = {}
    for n, ds in waiting.items():
        for d in ds:
            users.setdefault(d, []).append(n)
    ready = [(order[n], n) for n, ds in waiting.items() if not ds]
    heapq.heapify(ready)
    skipped = []
    while ready:
        _, name = heapq.heappop(ready)
        del waiting[name]
        if name in failed:
            pass
        elif deps[name] & failed:
            failed.add(name)
            skipped.append(name)
        else:
            try:
                done[name] = _run(compiled[name], ChainMap(done, *outer.maps), limits)
            except _Refused as err:
                report(name, str(err))
        for user in users.get(name, ()):
            waiting[user].discard(name)
            if not waiting[user]:
                heapq.heappush(ready, (order[user], user))

    in_cycles = set()
    for cycle in _cycles({n: waiting[n] for n in sorted(waiting, key=order.get)}):
        in_cycles.update(cycle)
        chain = " -> ".join(cycle + [cycle[0]])
        problems.append(f"{_join(path, cycle[0])}: dependency cycle {chain}; variables cannot "
                        f"depend on themselves (to use an outer variable of the same name, "
                        f"rename the inner one: inner names shadow outer ones)")
    skipped += [n for n in waiting if n not in in_cycles and n not in failed]
    if skipped:
        problems.append("not evaluated because they depend on the variables above: "
                        + ", ".join(_join(path, n) for n in sorted(skipped, key=order.get)))
    if problems:
        n = len(problems)
        raise ExpressionError(f"{n} problem{'s' if n != 1 else ''} in context", path=path,
                              problems=problems)
    return {name: done[name] for name in values}


class Workspace:
    """A chain of evaluated scopes: the model's parameters, then nested diagram contexts.

    Parameters
    ----------
    values : Mapping[str, object], optional
        This scope's variables as written (literals or ``"=expression"``); evaluated at once
        with `evaluate_context` against the parent's scopes.
    parent : Workspace, optional
        The enclosing scope.
    path : str, optional
        Path of the diagram owning this scope, for error messages.
    limits : Limits
        Resource bounds, inherited by children.
    """

    def __init__(self, values: Mapping[str, object] | None = None, *,
                 parent: Workspace | None = None, path: str | None = None,
                 limits: Limits = LIMITS):
        self.parent = parent
        self.path = path
        self.limits = limits
        outer = parent.scopes if parent is not None else ()
        self.values: Mapping[str, object] = MappingProxyType(
            evaluate_context(values or {}, outer, path=path, limits=limits))

    @property
    def scopes(self) -> tuple[Mapping[str, object], ...]:
        """Evaluated scopes, outermost first."""
        outer = self.parent.scopes if self.parent is not None else ()
        return (*outer, self.values)

    def child(self, values: Mapping[str, object] | None = None, *,
              path: str | None = None) -> Workspace:
        """Return a nested scope whose variables shadow this one's."""
        return Workspace(values, parent=self, path=path, limits=self.limits)

    def evaluate(self, expression: str, *, path: str | None = None) -> object:
        """Evaluate `expression` in this scope chain (see `evaluate`)."""
        return evaluate(expression, self.scopes, path=path, limits=self.limits)

    def __repr__(self) -> str:
        return f"Workspace(path={self.path!r}, names={sorted(self.values)})"


# --- parsing and static checks -------------------------------------------------------------

_OPERATORS: dict[type, Callable] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow, ast.MatMult: operator.matmul,
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge,
    ast.UAdd: operator.pos, ast.USub: operator.neg, ast.Not: operator.not_,
}
_NODES = {ast.Expression, ast.Constant, ast.Name, ast.Load, ast.List, ast.Tuple, ast.UnaryOp,
          ast.BinOp, ast.BoolOp, ast.And, ast.Or, ast.Compare, ast.IfExp, ast.Call,
          ast.Subscript, ast.Slice, *_OPERATORS}
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


def _source(text: str) -> str:
    return text[1:] if text.startswith("=") else text


@functools.lru_cache(maxsize=1024)   # sweeps re-evaluate the same texts; trees are not mutated
def _compile(text: str, limits: Limits) -> tuple[ast.Expression, tuple[str, ...]]:
    """Parse and whitelist-check `text`; return the tree and its variable names."""
    if len(text) > limits.max_length:
        raise _Refused(f"expression is {len(text)} characters long (limit {limits.max_length})")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as err:
        raise _Refused(f"syntax error: {err.msg}") from None
    except (RecursionError, MemoryError, ValueError):
        raise _Refused("expression is nested too deeply") from None
    free: dict[str, None] = {}   # ordered set
    count = 0
    stack = [(tree.body, 1)]
    while stack:
        node, depth = stack.pop()
        count += 1
        if count > limits.max_nodes or depth > limits.max_depth:
            raise _Refused(f"expression is too large or nested too deeply (limits: "
                           f"{limits.max_nodes} nodes, depth {limits.max_depth})")
        kind = type(node)
        if kind not in _NODES:
            what = _REFUSED_NAMES.get(kind, kind.__name__)
            raise _Refused(f"{what} is not allowed in an expression")
        children = list(ast.iter_child_nodes(node))
        if kind is ast.Name:
            if node.id.startswith("_"):
                raise _Refused(f"names starting with '_' are not allowed ({node.id!r})")
            free[node.id] = None
        elif kind is ast.Constant:
            _check_constant(node.value, limits)
        elif kind is ast.Call:
            children = _check_call(node)
        elif kind is ast.BinOp and isinstance(node.op, (ast.Add, ast.Mult)) and any(
                isinstance(side, (ast.List, ast.Tuple)) for side in (node.left, node.right)):
            raise _Refused("'+' and '*' with a list literal are ambiguous (Python concatenates "
                           "or repeats, numpy adds or scales); write array([...]) for "
                           "arithmetic or zeros(n)/ones(n) to repeat")
        stack.extend((child, depth + 1) for child in reversed(children))  # source order
    return tree, tuple(free)


def _check_constant(value: object, limits: Limits) -> None:
    if isinstance(value, int) and value.bit_length() > limits.max_int_bits:
        raise _Refused(f"integer literal has more than {limits.max_int_bits} bits")
    if value is None or not isinstance(value, (int, float, str)):
        raise _Refused(f"constant {value!r} is not allowed (numbers and strings only)")


def _check_call(node: ast.Call) -> list[ast.AST]:
    func = node.func
    if not isinstance(func, ast.Name):
        raise _Refused("only the allowed functions can be called, by name")
    if func.id not in FUNCTIONS:
        close = difflib.get_close_matches(func.id, FUNCTIONS, n=3)
        hint = f" (did you mean {', '.join(map(repr, close))}?)" if close else ""
        raise _Refused(f"function {func.id!r} is not allowed{hint}; allowed functions: "
                       + ", ".join(sorted(FUNCTIONS)))
    if node.keywords:
        raise _Refused(f"{func.id}() takes positional arguments only")
    _, lo, hi = FUNCTIONS[func.id]
    if not lo <= len(node.args) <= hi:
        want = str(lo) if lo == hi else f"{lo} to {hi}" if hi < 99 else f"at least {lo}"
        raise _Refused(f"{func.id}() takes {want} arguments, got {len(node.args)}")
    return list(node.args)   # func is a function name, not a variable


def _undefined_message(undefined: Iterable[str], defined: Iterable[str]) -> str:
    defined = sorted(set(defined))
    parts = []
    for name in undefined:
        close = difflib.get_close_matches(name, [*defined, *CONSTANTS], n=3)
        parts.append(f"{name!r}" + (f" (did you mean {', '.join(map(repr, close))}?)"
                                    if close else ""))
    shown = ", ".join(defined[:30]) + (f", ... ({len(defined) - 30} more)"
                                       if len(defined) > 30 else "")
    s = "s" if len(parts) > 1 else ""
    return f"undefined name{s} {', '.join(parts)}; defined names: {shown or '(none)'}"


def _scope_list(scopes: object) -> list[Mapping]:
    if isinstance(scopes, Workspace):
        return list(scopes.scopes)
    if isinstance(scopes, Mapping):
        return [scopes]
    scopes = list(scopes)
    for s in scopes:
        if not isinstance(s, Mapping):
            raise TypeError(f"scopes must be mappings, not {type(s).__name__}")
    return scopes


def _join(path: str | None, name: str) -> str:
    return f"{path}.{name}" if path else name


def _cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """One example cycle per back edge found by depth-first search (distinct member sets)."""
    state: dict[str, int] = {}   # 1 on the stack, 2 finished
    found: list[list[str]] = []
    seen: set[frozenset] = set()
    for root in graph:
        if root in state:
            continue
        state[root] = 1
        stack, trail = [iter(sorted(graph[root]))], [root]
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[trail.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                cycle = trail[trail.index(nxt):]
                if frozenset(cycle) not in seen:
                    seen.add(frozenset(cycle))
                    found.append(cycle)
            elif nxt not in state and nxt in graph:
                state[nxt] = 1
                trail.append(nxt)
                stack.append(iter(sorted(graph[nxt])))
    return found


# --- evaluation ---------------------------------------------------------------------------

def _run(tree: ast.Expression, names: Mapping[str, object], limits: Limits) -> object:
    """Evaluate a checked tree; every arithmetic failure becomes `_Refused`."""
    try:
        # Raise instead of producing nan/inf silently: a nan parameter fails much later.
        with np.errstate(divide="raise", over="raise", invalid="raise", under="ignore"):
            value = _Evaluator(names, limits).visit(tree.body)
    except ZeroDivisionError:
        raise _Refused("division by zero") from None
    except (OverflowError, FloatingPointError, ValueError, IndexError, TypeError,
            np.linalg.LinAlgError) as err:
        raise _Refused(f"{type(err).__name__}: {err}") from None
    if isinstance(value, np.ndarray):
        return np.array(value, dtype=float)   # a fresh copy: blocks must not share state
    return value


def _value(name: str, value: object) -> object:
    """A scope's value as the evaluator's types (Python scalar, str, float64 array)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple, np.ndarray)):
        try:
            array = np.asarray(value, dtype=float)
        except (TypeError, ValueError) as err:
            raise _Refused(f"variable {name!r} is not a numeric array: {err}") from None
        return array if array.ndim else array.item()
    raise _Refused(f"variable {name!r} has unsupported type {type(value).__name__}")


def _scalar(value: object) -> object:
    """numpy scalars and 0-d arrays -> Python scalars; arrays -> float64."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.item() if value.ndim == 0 else value.astype(float, copy=False)
    return value


def _count(value: object, what: str) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _Refused(f"{what} must be a non-negative integer, got {value!r}")
    return value


def _index(value: object) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Refused(f"indices must be integers or slices, got {value!r}")
    return value


class _Evaluator:
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
            raise _Refused(f"array of {n:.4g} elements exceeds the limit of {lim.max_elements}")
        self.elements += n
        self.flops += flops
        if self.elements > lim.max_total_elements:
            raise _Refused(f"the expression creates more than {lim.max_total_elements} "
                           f"array elements in total")
        if self.flops > lim.max_flops:
            raise _Refused(f"the expression needs more than {lim.max_flops:.3g} operations")

    def visit(self, node: ast.AST) -> object:
        return getattr(self, "visit_" + type(node).__name__)(node)

    def visit_Constant(self, node: ast.Constant) -> object:
        return node.value

    def visit_Name(self, node: ast.Name) -> object:
        if node.id not in self.names:
            return CONSTANTS[node.id]
        value = self.names[node.id]
        if is_expression(value):
            raise _Refused(f"variable {node.id!r} is the unevaluated expression {value!r}; "
                           f"evaluate its context first (evaluate_context)")
        return _value(node.id, value)

    def visit_List(self, node: ast.List | ast.Tuple) -> np.ndarray:
        items, total = [], 0
        for element in node.elts:
            item = self.visit(element)
            if isinstance(item, str):
                raise _Refused("list elements must be numbers or arrays, not strings")
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
            raise _Refused("arithmetic on strings is not allowed")
        if isinstance(value, np.ndarray):
            self.reserve(value.size)
        return _OPERATORS[type(node.op)](value)

    def visit_BinOp(self, node: ast.BinOp) -> object:
        return self.binary(type(node.op), self.visit(node.left), self.visit(node.right))

    def binary(self, op: type, a: object, b: object) -> object:
        if isinstance(a, str) or isinstance(b, str):
            raise _Refused("arithmetic on strings is not allowed (strings support == and != "
                           "only)")
        if op is ast.MatMult:
            return self.matmul(a, b)
        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            self.reserve_broadcast(a, b)
            return _scalar(_OPERATORS[op](a, b))
        if op is ast.Pow and isinstance(a, int) and isinstance(b, int) and b > 0:
            # 2**bits(a)-1 <= |a|, so this lower bound on the result's size refuses 9**9**9
            # before Python starts computing it.
            if (abs(a).bit_length() - 1) * b > self.limits.max_int_bits:
                raise _Refused(f"integer result of {a}**{b} is too large")
        result = _OPERATORS[op](a, b)
        if isinstance(result, complex):
            raise _Refused(f"complex result of {a!r}**{b!r}")
        if isinstance(result, float) and not math.isfinite(result) and math.isfinite(
                a) and math.isfinite(b):
            raise _Refused("floating-point overflow")   # as arrays do, under np.errstate
        if isinstance(result, int) and result.bit_length() > self.limits.max_int_bits:
            raise _Refused(f"integer result has more than {self.limits.max_int_bits} bits")
        return result

    def reserve_broadcast(self, *values: object) -> tuple[int, ...]:
        try:
            shape = np.broadcast_shapes(*(np.shape(v) for v in values))
        except ValueError:
            raise _Refused("shapes " + ", ".join(str(np.shape(v)) for v in values)
                           + " do not broadcast") from None
        self.reserve(math.prod(shape))
        return shape

    def matmul(self, a: object, b: object) -> object:
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)
                and 1 <= a.ndim <= 2 and 1 <= b.ndim <= 2):
            raise _Refused("'@' needs two vectors or matrices")
        if a.shape[-1] != b.shape[0]:
            raise _Refused(f"'@' shapes {a.shape} and {b.shape} do not match")
        out = a.shape[:-1] + b.shape[1:]
        self.reserve(math.prod(out), flops=math.prod(out) * a.shape[-1])
        return _scalar(a @ b)

    def truth(self, value: object) -> bool:
        if isinstance(value, (np.ndarray, str)):
            raise _Refused(f"the truth value of a {type(value).__name__} is ambiguous; "
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
                raise _Refused("strings can only be compared with strings, by == and !=")
            return _OPERATORS[op](a, b)
        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            self.reserve_broadcast(a, b)
            return _OPERATORS[op](a, b).astype(float)
        return _OPERATORS[op](a, b)

    def visit_IfExp(self, node: ast.IfExp) -> object:
        return self.visit(node.body if self.truth(self.visit(node.test)) else node.orelse)

    def visit_Call(self, node: ast.Call) -> object:
        name = node.func.id
        args = [self.visit(arg) for arg in node.args]
        if any(isinstance(arg, str) for arg in args):
            raise _Refused(f"{name}() takes numbers or arrays, not strings")
        return _scalar(FUNCTIONS[name][0](self, *args))

    def visit_Subscript(self, node: ast.Subscript) -> object:
        value = self.visit(node.value)
        if not isinstance(value, np.ndarray):
            raise _Refused(f"only arrays can be indexed, not {type(value).__name__}")
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        index = []
        for part in parts:
            if isinstance(part, ast.Slice):
                bounds = (None if p is None else _index(self.visit(p))
                          for p in (part.lower, part.upper, part.step))
                index.append(slice(*bounds))
            else:
                index.append(_index(self.visit(part)))
        return _scalar(value[tuple(index)])   # basic indexing: a view, never bigger


# --- functions ----------------------------------------------------------------------------
# Each takes (evaluator, *positional args) and validates its arguments itself: numpy's own
# signatures accept dtypes and `out=` arrays, which expressions must not reach.

def _number(value: object, func: str) -> float:
    if isinstance(value, np.ndarray):
        raise _Refused(f"{func}() needs a number here, not an array")
    return value


def _array(value: object) -> np.ndarray:
    return value if isinstance(value, np.ndarray) else np.asarray(value, dtype=float)


def _shape(value: object) -> tuple[int, ...]:
    dims = [value] if not isinstance(value, np.ndarray) else list(value.ravel())
    if isinstance(value, np.ndarray) and (value.ndim != 1 or value.size > 32):
        raise _Refused("a shape is a number or a short list of numbers")
    return tuple(_count(float(d), "a dimension") for d in dims)


def _elementwise(ufunc: np.ufunc) -> Callable:
    def apply(ev: _Evaluator, *args: object) -> object:
        ev.reserve_broadcast(*args)
        return ufunc(*args)
    return apply


def _reduce(func: Callable, elementwise: np.ufunc | None = None) -> Callable:
    def apply(ev: _Evaluator, a: object, *rest: object) -> object:
        if rest and elementwise is not None:    # min(a, b, ...): element-wise
            ev.reserve_broadcast(a, *rest)
            result = a
            for b in rest:
                result = elementwise(result, b)
            return result
        axis = None if not rest else _index(rest[0])
        ev.reserve(np.size(a))
        return func(_array(a), axis=axis)
    return apply


def _constructor(fill: float) -> Callable:
    def make(ev: _Evaluator, shape: object) -> np.ndarray:
        dims = _shape(shape)
        ev.reserve(math.prod(dims))
        return np.full(dims, fill, dtype=float)
    return make


def _eye(ev: _Evaluator, n: object, m: object = None) -> np.ndarray:
    n = _count(n, "eye() size")
    m = n if m is None else _count(m, "eye() size")
    ev.reserve(n * m)
    return np.eye(n, m)


def _linspace(ev: _Evaluator, start: object, stop: object, num: object = 50) -> np.ndarray:
    num = _count(num, "linspace() count")
    ev.reserve(num)
    return np.linspace(_number(start, "linspace"), _number(stop, "linspace"), num)


def _arange(ev: _Evaluator, *args: object) -> np.ndarray:
    start, stop, step = (0, args[0], 1) if len(args) == 1 else (*args, 1)[:3]
    start, stop, step = (_number(v, "arange") for v in (start, stop, step))
    if step == 0:
        raise _Refused("arange() step must not be zero")
    n = math.ceil((stop - start) / step)   # inf/nan raise OverflowError/ValueError in _run
    ev.reserve(max(n, 0) + 1)               # +1: numpy's length may round up by one
    return np.arange(start, stop, step, dtype=float)


def _diag(ev: _Evaluator, v: object) -> np.ndarray:
    v = _array(v)
    if v.ndim not in (1, 2):
        raise _Refused("diag() needs a vector or a matrix")
    ev.reserve(v.size**2 if v.ndim == 1 else min(v.shape))
    return np.diag(v).copy()


def _square(a: object, func: str) -> np.ndarray:
    if not isinstance(a, np.ndarray) or a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise _Refused(f"{func}() needs a square matrix, got shape {np.shape(a)}")
    return a


def _inv(ev: _Evaluator, a: object) -> np.ndarray:
    a = _square(a, "inv")
    ev.reserve(a.size, flops=a.shape[0] ** 3)
    return np.linalg.inv(a)


def _det(ev: _Evaluator, a: object) -> float:
    a = _square(a, "det")
    ev.reserve(a.size, flops=a.shape[0] ** 3)
    return np.linalg.det(a)


def _copy(ev: _Evaluator, a: object) -> np.ndarray:
    ev.reserve(np.size(a))
    return np.array(a, dtype=float)


def _transpose(ev: _Evaluator, a: object) -> np.ndarray:
    return _array(a).T   # a view; the final result is copied


def _round(ev: _Evaluator, x: object, decimals: object = 0) -> object:
    ev.reserve(np.size(x))
    return np.round(x, _index(decimals))


def _clip(ev: _Evaluator, x: object, lo: object, hi: object) -> object:
    ev.reserve_broadcast(x, lo, hi)
    return np.clip(x, lo, hi)


_UNARY = ("sin cos tan arcsin arccos arctan sinh cosh tanh exp log log10 log2 sqrt abs "
          "floor ceil sign deg2rad rad2deg")

#: Callable functions: name -> (implementation, min args, max args).
FUNCTIONS: Mapping[str, tuple[Callable, int, int]] = MappingProxyType({
    **{name: (_elementwise(getattr(np, name)), 1, 1) for name in _UNARY.split()},
    "arctan2": (_elementwise(np.arctan2), 2, 2), "hypot": (_elementwise(np.hypot), 2, 2),
    "round": (_round, 1, 2), "clip": (_clip, 3, 3),
    "min": (_reduce(np.min, np.minimum), 1, 99), "max": (_reduce(np.max, np.maximum), 1, 99),
    "sum": (_reduce(np.sum), 1, 2), "prod": (_reduce(np.prod), 1, 2),
    "mean": (_reduce(np.mean), 1, 2),
    "zeros": (_constructor(0.0), 1, 1), "ones": (_constructor(1.0), 1, 1), "eye": (_eye, 1, 2),
    "linspace": (_linspace, 2, 3), "arange": (_arange, 1, 3), "diag": (_diag, 1, 1),
    "array": (_copy, 1, 1), "transpose": (_transpose, 1, 1), "inv": (_inv, 1, 1),
    "det": (_det, 1, 1),
})
