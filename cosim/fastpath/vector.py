"""The vector fast-path strategy: blocks that share a kernel template run as one numpy operation.

Large diagrams are mostly many copies of few block types (a chain of 1000 lags, a grid of
identical cells). Blocks whose kernels are the same template (differing only in ``p_*``
parameter values), at the same level of the plan and in the same task, form a *group*; the
generated step function evaluates a group as one vector expression over the flat signal,
state and continuous-state arrays, indexing them with slices where the members' slots are
contiguous (else with index constants). Elementwise numpy arithmetic rounds exactly as scalar
arithmetic does, so results are bit-identical to the reference interpreter (templates calling
``math.*`` are evaluated member by member, with ``math``, for the same reason). Simultaneous
assignments go through temporaries; each Runge–Kutta stage is one whole-array expression.
"""

from __future__ import annotations

import ast
import re

import numpy as np

from cosim.fastpath.emitter import Strategy

__all__ = ["Vector", "worthwhile"]

#: A kernel name that reads a member's own value.
_MEMBER = re.compile(r"[uxcpl]_")

#: Mean group size from which vector operations beat one statement per block: a numpy
#: operation on a slice costs about as much as 40 scalar statements (parallel chains of
#: gains, this 2-core machine: 0.05-0.08 us per block-step vectorised in groups of 10-35,
#: 0.02-0.04 scalar; from groups of 40 on, vectorised 0.012-0.019 against 0.02-0.03).
MIN_MEAN_GROUP = 40


def _template(kern) -> tuple:
    # A block class writes its kernel's dicts in one order: not sorted (100,000 blocks).
    return (tuple(kern.outputs.items()), tuple(kern.state.items()), kern.derivatives,
            kern.cstate, tuple(kern.params))


def _reads_member(node, shared) -> bool:
    """True when an expression reads a member's own value (a name ``u_``, ``x_``, ``c_``,
    ``p_`` or ``l_``: an array for a group), not only ``t``, ``dt``, literals and the
    ``shared`` parameters (one value for the whole group)."""
    return any(isinstance(n, ast.Name) and _MEMBER.match(n.id) and n.id not in shared
               for n in ast.walk(node))


def _tests(text: str):
    """The parts of an expression whose value must be one number: truth tests, comparisons,
    arguments of calls (``abs`` excepted) and subscripts."""
    for node in ast.walk(ast.parse(text, mode="eval")):
        if isinstance(node, ast.IfExp):
            yield node.test
        elif isinstance(node, ast.BoolOp):
            yield from node.values
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            yield node.operand
        elif isinstance(node, ast.Compare):
            yield node.left
            yield from node.comparators
        elif isinstance(node, ast.Call):
            if not (isinstance(node.func, ast.Name) and node.func.id == "abs"):
                yield from node.args
                yield from (kw.value for kw in node.keywords)
        elif isinstance(node, ast.Subscript):
            yield node.slice


def _texts(kern) -> list[str]:
    return [*kern.outputs.values(), *kern.state.values(), *kern.derivatives, *kern.cstate]


def _shared(kern) -> frozenset:
    """Parameters read where a number is needed (``t + p__0 * dt >= p__1``): members of one
    group must share their values, so that the test holds for the whole group at once."""
    return frozenset(n.id for text in _texts(kern) for part in _tests(text)
                     for n in ast.walk(part)
                     if isinstance(n, ast.Name) and n.id.startswith("p_"))


def _elementwise(text: str, shared=frozenset()) -> bool:
    """True when a template expression computes on a group's arrays what it computes on each
    member's floats: no truth test, comparison or call (``abs`` excepted) of a member's value
    (``shared`` parameters are one value for the group, not the member's own).

    ``min(u_in, 0.7)`` or ``a if u_in > 0.0 else b`` need the truth of one number; numpy
    refuses it for an array, and ``(u > a) + (u > b)`` would add booleans as logical or.
    Such templates run member by member (bit-identical either way).
    """
    return not any(_reads_member(part, shared) for part in _tests(text))


def _vectorizable(kern, shared) -> bool:
    """Whether members of ``kern``'s template can share one numpy expression: no ``math.*``
    (numpy's functions may round differently) and elementwise arithmetic only."""
    texts = _texts(kern)
    return not any("math." in e for e in texts) and all(_elementwise(e, shared) for e in texts)


def _groups(plan, kernels) -> list[list[int]]:
    """Blocks grouped by (level, task, stage-evaluated, template, shared parameter values), in
    level order."""
    level = {id(b): lv for lv, blocks in enumerate(plan.levels) for b in blocks}
    groups: dict = {}
    info: dict = {}         # template -> (shared, vectorizable): a chain of 1000 lags parses one
    for i, b in enumerate(plan.blocks):
        kern = kernels[i]
        tpl = _template(kern)
        if tpl not in info:
            shared = _shared(kern)
            info[tpl] = (shared, _vectorizable(kern, shared))
        shared, vec = info[tpl]
        key = (level[id(b)], plan.task_of[i], plan.continuous[i], tpl,
               tuple(sorted((n, kern.params[n[2:]]) for n in shared)))
        # Live values change between calls: their blocks stay singletons.
        if kern.live is not None or not vec:
            key += (i,)
        groups.setdefault(key, []).append(i)
    return [g for _, g in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[1][0]))]


def worthwhile(plan, kernels) -> bool:
    """True when grouping makes the plan much shorter than one statement per block."""
    n = len(plan.blocks)
    if len(plan.levels) * MIN_MEAN_GROUP > n:
        return False            # at least one group per level: a chain never is
    return n >= 2 * MIN_MEAN_GROUP and n / max(1, len(_groups(plan, kernels))) >= MIN_MEAN_GROUP


def _index(idx: list[int]) -> str | None:
    """Source text of an index: an int, a slice when contiguous, else None."""
    if len(idx) == 1:
        return str(idx[0])
    if idx == list(range(idx[0], idx[0] + len(idx))):
        return f"{idx[0]}:{idx[-1] + 1}"
    return None


class Vector(Strategy):
    """Numpy arrays indexed per group (see :class:`~cosim.fastpath.emitter.Strategy`).

    The step function works on the run state's arrays ``S``, ``D`` and ``C`` directly (no
    prologue or epilogue); stage derivatives live in preallocated global arrays ``K<i>`` of
    shape ``(n_c,)`` and a stage's continuous state in the global array ``Z`` (functions of
    a chunked step function receive them all).

    Parameters
    ----------
    plan : Plan
    kernels : list of Kernel
        Each block's kernel, in plan order.
    n_c : int
        Number of continuous-state components.
    n_stages : int
        Runge–Kutta stages per step (0 without continuous state).
    """

    vector = True

    def __init__(self, plan, kernels, n_c: int, n_stages: int):
        super().__init__(_groups(plan, kernels), f"<cosim batched plan {plan.name}>")
        self.namespace["np"] = np
        self.namespace.update({f"K{si}": np.zeros(n_c) for si in range(n_stages)})
        if n_stages:
            self.namespace["Z"] = np.zeros(n_c)
        self._temps = 0

    def ref(self, array: str, slots: list[int]) -> str:
        ix = _index(slots)
        return f"{array}[{ix if ix is not None else self.const(np.array(slots))}]"

    def assign(self, targets: list[str], exprs: list[str]) -> list[str]:
        temps = [f"_t{self._temps + j}" for j in range(len(exprs))]
        self._temps += len(exprs)
        return ([f"{tmp} = {e}" for tmp, e in zip(temps, exprs)] +
                [f"{tg} = {tmp}" for tg, tmp in zip(targets, temps)])

    def row(self, task: int, slots: list[int]) -> str:
        # A row is a copy: a slice (contiguous columns) copied, or fancy indexing.
        ix = _index(slots) if len(slots) > 1 else f"{slots[0]}:{slots[0] + 1}"
        src = f"S[{ix}].copy()" if ix is not None else f"S[{self.const(np.array(slots))}]"
        return f"rows[{task}].append({src})"

    def stage_sum(self, target: str, terms) -> list[str]:
        combo = " + ".join(f"{a!r} * K{j}" for a, j in terms)
        if target == "Z":
            return [f"Z[:] = C + h * ({combo})" if terms else "Z[:] = C"]
        return [f"C[:] = C + h * ({combo})" if terms else "C[:] = C"]
