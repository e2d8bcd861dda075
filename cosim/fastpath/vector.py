"""The vector fast-path strategy: blocks that share a kernel template run as one numpy operation.

Large diagrams are mostly many copies of few block types (a chain of 1000 lags, a grid of
identical cells). Blocks whose kernels are the same template (differing only in ``p_*``
parameter values), at the same level of the plan and in the same task, form a *group*; the
generated step function evaluates a group as one vector expression over the flat signal,
state and continuous-state arrays, indexing them with slices where the members' slots are
contiguous (else with index constants). Elementwise numpy arithmetic rounds exactly as scalar
arithmetic does, so results are bit-identical to the reference interpreter (templates calling
``math.*`` are evaluated member by member, with ``math``, for the same reason). Statements
are lowered to ufunc calls writing into their targets or into buffers allocated once
(:mod:`cosim.fastpath.inplace`): a numpy call's fixed cost, not the group's size, dominates a
plan of few large groups; each Runge–Kutta combination is a few whole-array calls.
"""

from __future__ import annotations

import ast
import re

import numpy as np

from cosim.fastpath import inplace
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


def _tests(text: str, selections: bool = True):
    """The parts of an expression whose value must be one number: truth tests, comparisons,
    arguments of calls (``abs`` excepted; ``min``/``max`` of two only with ``selections``:
    they are lowered to an elementwise selection, see :mod:`cosim.fastpath.inplace`) and
    subscripts."""
    for node in ast.walk(ast.parse(text, mode="eval")):
        if not selections and inplace.selection(node):
            continue
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
    group must share their values, so that the test holds for the whole group at once.
    Parameters of a ``min``/``max`` are shared too: one of parameters alone is then a
    Python float's, not lowered."""
    return frozenset(n.id for text in _texts(kern) for part in _tests(text)
                     for n in ast.walk(part)
                     if isinstance(n, ast.Name) and n.id.startswith("p_"))


def _elementwise(text: str, shared=frozenset()) -> bool:
    """True when a template expression computes on a group's arrays what it computes on each
    member's floats: no truth test, comparison or call (``abs`` excepted) of a member's value
    (``shared`` parameters are one value for the group, not the member's own).

    ``a if u_in > 0.0 else b`` needs the truth of one number; numpy refuses it for an
    array, and ``(u > a) + (u > b)`` would add booleans as logical or. Such templates run
    member by member (bit-identical either way). ``min(u_in, 0.7)`` of two values is a
    selection lowered elementwise (:func:`cosim.fastpath.inplace.selection`).
    """
    return not any(_reads_member(part, shared) for part in _tests(text, selections=False))


def _vectorizable(kern, shared) -> bool:
    """Whether members of ``kern``'s template can share one numpy expression: no ``math.*``
    (numpy's functions may round differently) and elementwise arithmetic only."""
    texts = _texts(kern)
    return not any("math." in e for e in texts) and all(_elementwise(e, shared) for e in texts)


def _groups(plan, kernels) -> list[list[int]]:
    """Blocks grouped by (level, task, stage-evaluated, template, shared parameter values), in
    level order."""
    groups: dict = {}
    info: dict = {}         # template -> (shared, vectorizable): a chain of 1000 lags parses one
    # id(kernel) -> (template, shared values): blocks spelt alike share one lifted kernel
    # (see :func:`~cosim.fastpath.params.lift`), whose key is made once.
    made: dict = {}
    for i, kern in enumerate(kernels):
        if id(kern) not in made:
            tpl = _template(kern)
            if tpl not in info:
                shared = _shared(kern)
                info[tpl] = (shared, _vectorizable(kern, shared))
            made[id(kern)] = (tpl, tuple(sorted((n, kern.params[n[2:]]) for n in info[tpl][0])))
        tpl, values = made[id(kern)]
        vec = info[tpl][1]
        key = (plan.level[i], plan.task_of[i], plan.continuous[i], tpl, values)
        # Live values change between calls: their blocks stay singletons.
        if kern.live is not None or not vec:
            key += (i,)
        groups.setdefault(key, []).append(i)
    return [g for _, g in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[1][0]))]


def worthwhile(plan, kernels) -> list[list[int]] | None:
    """The vector strategy's groups when grouping makes the plan much shorter than one
    statement per block, else None."""
    n = len(plan.blocks)
    if plan.n_levels * MIN_MEAN_GROUP > n or n < 2 * MIN_MEAN_GROUP:
        return None             # at least one group per level: a chain never is
    groups = _groups(plan, kernels)
    return groups if n / max(1, len(groups)) >= MIN_MEAN_GROUP else None


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
    epilogue). A group's contiguous slots are a view of its array, made once per call of a
    function (its prologue, or a chunk function's first lines); other slots are gathered by
    an index constant. Statements are lowered to ufunc calls writing into their targets or
    into buffers of the generated module (:mod:`cosim.fastpath.inplace`). Stage
    derivatives live in the module's arrays ``K<i>`` of shape ``(n_c,)``, a stage's
    continuous state in ``Z`` (functions of a chunked step function receive them all).

    Parameters
    ----------
    plan : Plan
    groups : list of list of int
        The plan's groups (see :func:`worthwhile`).
    n_c : int
        Number of continuous-state components.
    n_stages : int
        Runge–Kutta stages per step (0 without continuous state).
    """

    vector = True

    def __init__(self, plan, groups: list[list[int]], n_c: int, n_stages: int):
        super().__init__(groups, f"<cosim batched plan {plan.name}>")
        self.namespace["np"] = np
        self.namespace.update(inplace.GLOBALS)
        # The stages' derivatives: rows of one array, so that the final combination scales
        # them all in one call.
        self.namespace["KS"] = ks = np.zeros((n_stages, n_c))
        self.namespace.update({f"K{si}": ks[si] for si in range(n_stages)})
        self.spans = inplace.Spans()
        self.preamble = self.spans.preamble
        if n_c:
            # Z: a stage's continuous state; W: a product of the Runge-Kutta sums; hd: h.
            self.preamble += [f"Z = np.zeros({n_c})", f"_W = np.zeros({n_c})",
                              "_hd = np.zeros(())"]
        self._views: dict[tuple, str] = {}
        self._indices: dict[tuple, str] = {}
        self._local: set[str] = set()       # views of the call's arrays S, D, C
        self._temps = 0
        self._h_bound = False

    def ref(self, array: str, slots: list[int]) -> str:
        if len(slots) == 1:
            return f"{array}[{slots[0]}]"
        ix = _index(slots)
        if ix is None:
            # One index constant per (array, slots): Runge–Kutta stages gather alike.
            key = (array, tuple(slots))
            if key not in self._indices:
                idx = self._indices[key] = self.const(np.array(slots))
                self.spans.span[idx] = (array, min(slots), max(slots) + 1)
            return f"{array}[{self._indices[key]}]"
        key = (array, slots[0], slots[-1] + 1)
        if key not in self._views:
            name = self._views[key] = f"_v{len(self._views)}"
            self.spans.span[name] = key
            line = f"{name} = {array}[{ix}]"
            if array in "SDC":
                self._local.add(name)
                self.prologue.append("    " + line)
            else:                           # K<i>, Z: arrays of the module
                self.preamble.append(line)
        return self._views[key]

    def _members(self, target: str) -> int:
        """Members of the group a target names (1: a single slot)."""
        if target in self.spans.span:
            _, lo, hi = self.spans.span[target]
            return hi - lo
        m = re.fullmatch(r"\w+\[(_k\d+)\]", target)
        return len(self.namespace[m.group(1)]) if m else 1

    def set(self, target: str, expr: str) -> list[str]:
        n = self._members(target)
        return inplace.lower(self.spans, [target], [expr], n) if n > 1 else \
            [f"{target} = {expr}"]

    def assign(self, targets: list[str], exprs: list[str]) -> list[str]:
        n = self._members(targets[0])
        if n > 1:
            return inplace.lower(self.spans, targets, exprs, n)
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
        # C + h * (a0 * K<j0> + a1 * K<j1> + ...), in this order, summed in Z (free once the
        # last stage's derivatives are computed when the target is C).
        if not terms:
            return ["_copyto(Z, C)"] if target == "Z" else []
        lines = [] if self._h_bound else ["_hd[()] = h"]
        self._h_bound = True
        z = self.spans.once
        stages = [j for _, j in terms]
        if target == "C" and len(terms) > 1 and stages == list(range(stages[0],
                                                                     stages[-1] + 1)):
            # The derivatives are not read again this tick: scaled in place, in one call.
            coefs = z(f"np.array({[[float(a)] for a, _ in terms]!r})")
            ks = z(f"KS[{stages[0]}:{stages[-1] + 1}]")           # a view: no copy
            lines += [f"_mul({coefs}, {ks}, {ks})", f"_add(K{stages[0]}, K{stages[1]}, Z)"]
            lines += [f"_add(Z, K{j}, Z)" for j in stages[2:]]
        elif len(terms) == 1 and float(terms[0][0]) == 1.0:
            # 1.0 * x is x, bit for bit.
            return lines + [f"_mul(_hd, K{stages[0]}, Z)", f"_add(C, Z, {target})"]
        else:
            (a, j), rest = terms[0], terms[1:]
            lines.append(f"_mul({z(repr(float(a)))}, K{j}, Z)")
            for a, j in rest:
                lines += [f"_mul({z(repr(float(a)))}, K{j}, _W)", "_add(Z, _W, Z)"]
        return lines + ["_mul(_hd, Z, Z)", f"_add(C, Z, {target})"]

    def chunk_io(self, body: list[str], reads: set,
                 shared: set) -> tuple[list[str], list[str], list[str]]:
        # A chunk function makes the views of the call's arrays it uses.
        used = set(re.findall(r"\b_v\d+\b", "\n".join(body))) & self._local
        load = [ln for ln in self.prologue if ln.split(" = ")[0].strip() in used]
        return load, [], []
