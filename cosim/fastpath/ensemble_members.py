"""What differs between the members of an ensemble: each expression block's kernel values,
initial state and initial continuous state per member, found without building N models.

Only blocks whose parameters are expressions can differ. Their expressions are evaluated
for all members at once where that is exact (:mod:`cosim.fastpath.ensemble_values`), else
in each member's workspace; where a member's values differ from those already met, a copy
of the block is rebuilt and initialized to read its kernel's parameters, initial state and
initial continuous state. A member whose kernel template differs (a parameter that changes
structure) is refused, or set apart to run in an ensemble of its own structure.
"""

from __future__ import annotations

import copy
import re
import struct
from collections.abc import Mapping, Sequence

import numpy as np

from cosim.fastpath.ensemble_values import member_values, varying_names
from cosim.fastpath.layout import kernels_of
from cosim.fastpath.runtime import Unsupported

__all__ = ["MEMO_TRIES", "Members", "const_values"]


def _expression_blocks(model) -> list[tuple]:
    """``(block, subsystem chain, path)`` of every block built from expressions."""
    from cosim.model.block import Block, has_spec
    from cosim.model.diagram import Diagram, Subsystem
    out = []

    def walk(d: Diagram, chain: tuple, prefix: str) -> None:
        for b in d.blocks:
            if isinstance(b, Subsystem):
                walk(b, chain + (b,), f"{prefix}{b.name}/")
            elif isinstance(b, Block) and has_spec(b) and b.spec_has_expression():
                out.append((b, chain, f"{prefix}{b.name}"))
    walk(model, (), "")
    return out


def _structure(b, kern) -> tuple:
    """What the plan and the generated source take from a block besides parameter values:
    its ports, rate, feedthrough, states and their shapes (:func:`_block_structure`), and
    its kernel's template."""
    return (_block_structure(b), tuple(kern.outputs.items()), tuple(kern.state.items()),
            tuple(kern.derivatives), tuple(kern.cstate), tuple(kern.params),
            kern.live is not None)


def _block_structure(b) -> tuple:
    """The block's part of :func:`_structure`."""
    return (type(b), tuple(b.input_names), tuple(b.output_names),
            tuple(sorted(b.optional_inputs)), repr(b.sample_time), b.direct_feedthrough,
            b.has_derivative, b.runs_at_stages, getattr(b, "has_modes", False),
            tuple((n, _shape(v)) for n, v in b.state.items()), _shape(b.cstate))


def _shape(v) -> tuple:
    """``numpy.shape(v)``, an array's and None's without the call (about 1 us)."""
    if type(v) is np.ndarray:
        return v.shape
    return () if v is None else np.shape(v)


#: A parameter under a unary minus in a lifted kernel (``-p__3``, as a negative literal is
#: lifted: the sign stays in the expression); not the base of a power.
_NEGATED = re.compile(r"(?<![\w)\]])-(p__\d+)\b(?!\s*\*\*)")


def _signed_like(kern, ref):
    """``kern`` spelt with the signs of ``ref``'s lifted parameters where the two differ
    only in which parameters carry a unary minus (a swept parameter crossing zero: ``(u -
    -p__1)`` against ``(u - p__1)``), each such parameter's value negated: ``-v`` and
    ``-(v)`` are the same float, so the reference's code computes each member's own values.
    Otherwise ``kern`` itself."""
    def texts(k):
        return [*k.outputs.values(), *k.state.values(), *k.derivatives, *k.cstate]
    mine, theirs = texts(kern), texts(ref)
    if len(mine) != len(theirs) or not kern.params:
        return kern
    flip = set()
    for a, b in zip(mine, theirs):
        if _NEGATED.sub(r"\1", a) != _NEGATED.sub(r"\1", b):
            return kern
        flip ^= set(_NEGATED.findall(a)) ^ set(_NEGATED.findall(b))
    if not flip:
        return kern
    params = dict(kern.params)
    for name in flip:
        params[name[2:]] = -params[name[2:]]
    from cosim.model.block import Kernel
    return Kernel(dict(ref.outputs), dict(ref.state), ref.derivatives, ref.cstate, params,
                  kern.live)


#: Members whose values of a block are all different before the block is built per member
#: without looking for the same values again (see :meth:`Members.of`).
MEMO_TRIES = 16


class Members:
    """What differs from ``sim``'s run in runs of ``model`` with other parameter values.

    Only blocks built from parameter expressions can differ: their expressions are
    evaluated for all members at once where that is exact (else in each member's
    workspace), and a copy of each rebuilt and initialized per member (once per distinct
    values: the members of a grid share most blocks' values).

    Parameters
    ----------
    sim : Simulator
        The reference run (initialized, not run).
    model : Model
        Its model (evaluated).

    Attributes
    ----------
    ref_kernels : list of Kernel
        The reference run's lifted kernels, in plan order.
    """

    def __init__(self, sim, model):
        plan = sim.plan
        self.sim, self.model = sim, model
        self.ref_kernels = kernels_of(plan)
        self.specs = [(b, chain, path, plan.index[plan.path_of[id(b)]], b.spec(),
                       _structure(b, self.ref_kernels[plan.index[plan.path_of[id(b)]]]))
                      for b, chain, path in _expression_blocks(model)]

    def of(self, overrides: Sequence[Mapping], others: list | None = None) -> dict:
        """Per plan index of an expression block: the members' lifted kernels' parameters
        (``Kernel.params``: the template is the reference's), initial states (name ->
        float) and initial continuous states (lists over ``overrides``).

        Parameters
        ----------
        others : list, optional
            Where given, the members whose parameters change the structure (a sample time,
            a table's length) are appended to it (their entries stay None) instead of
            raising: they run in an ensemble of their own structure.

        Raises
        ------
        Unsupported
            A member's parameters change a block's structure (ports, rate, shapes, kernel
            template), or a block has no kernel for them.
        """
        from cosim.model.evaluate import parameter_value
        from cosim.model.expr import Workspace
        model, n = self.model, len(overrides)
        params = dict(model.parameters)
        out = {i: ([None] * n, [None] * n, [None] * n) for _, _, _, i, _, _ in self.specs}
        memo: dict = {}
        shared: dict = {}
        every = self._evaluated(params, overrides)
        for j, over in enumerate(overrides):
            root = None
            children: dict = {}
            found = []
            for b, chain, path, i, spec, structure in self.specs:
                if every[i] is not None:
                    values = every[i][j]
                else:
                    if root is None:
                        root = Workspace({**params, **over, **model.context}, path=model.name)
                    ws = root
                    for sub in chain:
                        key = id(sub)
                        if key not in children:
                            children[key] = ws.child(sub.context, path=sub.name)
                        ws = children[key]
                    values = {k: parameter_value(v, ws, f"{path}.{k}")
                              for k, v in spec.items()}
                # Members whose values of a block are the same (a grid's) build it once; a
                # block whose first members all differ (a random design's) is built per
                # member without keys.
                seen = shared.setdefault(i, [0, 0])          # misses, hits
                if seen[1] or seen[0] < MEMO_TRIES:
                    key = (i, _exact(values))
                    made = memo.get(key)
                    seen[made is not None] += 1
                    if made is None:
                        made = memo[key] = self._build(b, i, path, values, structure, j)
                else:
                    made = self._build(b, i, path, values, structure, j)
                if made == "structure":
                    if others is None:
                        raise Unsupported(f"parameters of member {j} change the structure "
                                          f"of {path}")
                    others.append(j)
                    break
                found.append((i, *made))
            else:
                for i, kernel_params, state, cstate in found:
                    out[i][0][j], out[i][1][j], out[i][2][j] = kernel_params, state, cstate
        return out

    def _evaluated(self, params: dict, overrides: Sequence[Mapping]) -> dict:
        """Per plan index of an expression block: each member's values of its spec,
        evaluated for all members at once (:func:`~cosim.fastpath.ensemble_values.member_values`),
        or None where each member's workspace evaluates them: a block under a context (its
        variables are evaluated per member), an expression not evaluated exactly at once,
        or a model with a context or an override of another type than float or int (each
        member's workspace checks them)."""
        names = None if self.model.context else varying_names(params, overrides)
        every = {}
        for b, chain, path, i, spec, structure in self.specs:
            under = any(sub.context for sub in chain)
            every[i] = None if names is None or under else \
                member_values(spec, names, len(overrides))
        return every

    def _build(self, b, i: int, path: str, values: dict, structure: tuple, j: int):
        """``(lifted kernel's parameters, initial state, initial continuous state)`` of block
        ``b`` (plan index ``i``) rebuilt from ``values`` (first met in member ``j``), or
        ``"structure"`` when they change its structure."""
        clone = _clone(b)
        try:
            return self._made(clone, i, path, values, structure, j)
        finally:
            if clone.__dict__.get("inputs") is not b.__dict__.get("inputs"):
                # The copy is dropped: its inputs' reference back to it (a cycle) is cut,
                # so that it is freed now, not by the collector (thousands of copies per
                # ensemble, each collection a pass over them).
                del clone.inputs

    def _made(self, clone, i: int, path: str, values: dict, structure: tuple, j: int):
        """:meth:`_build` on ``clone``, a copy of the block."""
        from cosim.fastpath.params import lift, lift_like
        clone.rebuild(values)
        clone.initialize(self.sim.config.t0)
        kern = clone.kernel()
        if kern is None:
            raise Unsupported(f"{path} has no kernel for member {j}")
        ref = self.ref_kernels[i]
        like = lift_like(kern, ref)
        if like is not None and (kern.live is None) == (ref.live is None):
            # The reference's template with this member's values (its structure's kernel
            # part is the reference's).
            if _block_structure(clone) != structure[0]:
                return "structure"
            kern = like
        else:
            kern = lift(kern)
            if _structure(clone, kern) != structure:
                kern = _signed_like(kern, ref)
            if _structure(clone, kern) != structure:
                return "structure"
        # Its parameters only (the kernel's template is the reference's): an ensemble holds
        # thousands, and a dict of floats is none of the collector's business.
        return (kern.params, {n: float(v[0]) for n, v in clone.state.items()},
                None if clone.cstate is None else np.asarray(clone.cstate, float))


def _clone(b):
    """``copy.copy(b)``: for a block that copies as every object does (its ``__dict__``),
    without the copy protocol's lookups (a few microseconds a member)."""
    cls = type(b)
    if cls.__reduce_ex__ is not object.__reduce_ex__ or cls.__reduce__ is not \
            object.__reduce__ or cls.__getstate__ is not object.__getstate__ or \
            hasattr(cls, "__copy__") or not hasattr(b, "__dict__"):
        return copy.copy(b)
    clone = object.__new__(cls)
    clone.__dict__.update(b.__dict__)
    return clone


def _exact(v):
    """A hashable key equal for two parameter values exactly when they are the same: floats
    and arrays bit for bit (``0.0`` and ``-0.0`` apart), types too (``1`` and ``1.0``); a
    value of another type is never shared (a key of its own)."""
    t = type(v)
    if t is float:
        return v if v == v and v != 0.0 else ("float", struct.pack("<d", v))
    if t is np.ndarray:
        return ("array", v.dtype.str, v.shape, v.tobytes())
    if t is dict:
        return tuple((k, _exact(e)) for k, e in v.items())
    if t is list or t is tuple:
        return (t.__name__, tuple(_exact(e) for e in v))
    if t in (int, bool, str) or v is None:
        return (t.__name__, v)
    return object()


def const_values(entry_consts, ns: dict, ref_kernels, differ, n: int) -> dict:
    """Each constant of the generated code: one shared value, or an ``(n,)`` array."""
    values = {}
    for name, recipe, _ in entry_consts:
        if recipe is None:
            continue
        if recipe[0] != "p":
            raise Unsupported("live values")
        _, group, pname = recipe
        (i,) = (group,) if isinstance(group, int) else group     # one block (scalar strategy)
        if i not in differ:
            continue                       # the reference's value (in ``ns``) for all
        params = differ[i][0]
        if n == 1:
            ns[name] = float(params[0][pname])
            continue
        ref = ref_kernels[i].params
        col = np.array([float((ref if params[j] is None else params[j])[pname])
                        for j in range(n)])
        if np.all(col == col[0]) and np.all(np.signbit(col) == np.signbit(col[0])):
            ns[name] = float(col[0])
        else:
            values[name] = col
    return values
