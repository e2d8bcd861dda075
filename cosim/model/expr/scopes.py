"""Expressions in scopes: one expression, a context of interdependent variables, and the
workspace chain of model parameters and diagram contexts; the public entry points that turn
a refusal into an :class:`~cosim.model.expr.errors.ExpressionError`."""

from __future__ import annotations

import ast
import difflib
import heapq
import keyword
from collections import ChainMap
from collections.abc import Iterable, Mapping
from types import MappingProxyType

from cosim.model.expr.errors import ExpressionError, Refused
from cosim.model.expr.evaluator import as_value, run
from cosim.model.expr.syntax import CONSTANTS, LIMITS, Limits, is_expression, parse

__all__ = ["Workspace", "check_expression", "evaluate_expression", "evaluate_context"]


def evaluate_expression(expression: str, scopes: object = (), *, path: str | None = None,
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
        tree, free = parse(_source(expression), limits)
        undefined = [n for n in free if n not in names and n not in CONSTANTS]
        if undefined:
            raise Refused(_undefined_message(undefined, names))
        return run(tree, names, limits)
    except Refused as err:
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
                done[name] = as_value(name, value)
                continue
            deps[name] = set()   # known before compiling, so a failure still releases users
            compiled[name], free = parse(_source(value), limits)
            deps[name] = {n for n in free if n in values}
            undefined = [n for n in free if n not in visible and n not in CONSTANTS]
            if undefined:
                raise Refused(_undefined_message(undefined, visible))
        except Refused as err:
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
                done[name] = run(compiled[name], ChainMap(done, *outer.maps), limits)
            except Refused as err:
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
        return evaluate_expression(expression, self.scopes, path=path, limits=self.limits)

    def __repr__(self) -> str:
        return f"Workspace(path={self.path!r}, names={sorted(self.values)})"


def check_expression(text: str, scope: Iterable[str] | None = None) -> str | None:
    """What is wrong with expression ``text``, or None if nothing is.

    Checks the syntax and the refused constructs and, when ``scope`` is given, undefined
    names. Nothing is evaluated.

    Parameters
    ----------
    text : str
        Expression text, with or without the leading ``=``.
    scope : collection of str, optional
        The variable names the expression can see; None checks the syntax only.

    Returns
    -------
    str or None
        The problem, worded as in :class:`~cosim.model.expr.errors.ExpressionError`.
    """
    try:
        _, free = parse(_source(text), LIMITS)
    except Refused as err:
        return str(err)
    if scope is None:
        return None
    undefined = [n for n in free if n not in scope and n not in CONSTANTS]
    return _undefined_message(undefined, scope) if undefined else None


def _source(text: str) -> str:
    """The expression text without the model-file ``=`` prefix."""
    return text[1:] if text.startswith("=") else text


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
