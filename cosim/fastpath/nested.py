"""Atomic subsystems inlined into their parent's generated step function.

An atomic subsystem is one discrete block of its parent at its own rate
(:class:`~cosim.run.atomic.AtomicSubsystem`): at each hit its inner plan computes the
outputs of its current tick from the block's inputs, and at the state update it runs its
ticks to the next hit (outputs again with the tick's final inputs, logs, state updates, its
own solver's integration). Called through the inner simulator, each hit costs two calls of
the inner step function and the numpy arrays around them; inlined, it costs the inner
plan's statements. :class:`Inlined` writes them with the emitter's own writer
(:class:`~cosim.fastpath.emitter.Writer`) over the inner plan, its values held in locals
named apart (``a<i>_s3``) and its clock its own (``a<i>_k``, ``a<i>_t``): the statements of
the inner plan's own fast path, in its order, so every value is the one the inner
simulator computes. The outermost function loads the inner run state (the inner fast path's
flat values, continuous state, log lists, tick) and stores it back when it returns; the
inner simulator is then settled at the tick it reached (:meth:`Simulator.settle
<cosim.run.simulator.Simulator.settle>`), as after a call of its own step function.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from cosim.model.block import Kernel
from cosim.numerics.timegrid import nearest_tick

__all__ = ["Inlined", "Nested", "kernel", "recipe_value"]

#: The kernel an Inport bound to its parent's value stands on (its statement is the copy).
_BOUND = Kernel({"out": "0.0"})


@dataclass(frozen=True)
class Nested(Kernel):
    """The kernel of an atomic subsystem whose inner plan runs on the scalar fast path.

    Its ``outputs`` only name the ports (their statements are the inner plan's).

    Attributes
    ----------
    sim : Simulator
        The inner simulator (initialized, on its scalar fast path).
    key : tuple or bytes
        The fingerprint of the inner plan's own generated source (the structure it inlines).
    inputs : tuple of int
        The inner plan's index of each Inport, in the block's input order.
    """

    sim: object = None
    key: object = None
    inputs: tuple = ()
    memo: dict = field(default_factory=dict, compare=False, repr=False)

    def inner_kernels(self) -> list:
        """The inner plan's kernels, its Inports' bound to the block's inputs (their own
        are not asked for again: an Inport's makes new live values, which the inner fast
        path, still used for the final outputs of a run, would not see)."""
        if "kernels" not in self.memo:
            from cosim.fastpath.layout import kernels_of
            self.memo["kernels"] = kernels_of(self.sim.plan,
                                              given=dict.fromkeys(self.inputs, _BOUND))
        return self.memo["kernels"]


def kernel(block) -> Nested | None:
    """The :class:`Nested` kernel of an atomic subsystem block, or None when its inner plan
    does not run on the scalar fast path (the parent then runs on the interpreter)."""
    sim = block.inner
    fast = sim.fast_path if sim is not None else None
    if fast is None or fast.vector or fast.key is None:
        return None
    return Nested({p: "0.0" for p in block.output_names}, sim=sim, key=fast.key,
                  inputs=tuple(sim.plan.index[p] for p in block.input_names))


def recipe_value(recipe: tuple, kernels, resolve):
    """The value of a constant of recipe ``("n", i, inner)`` in a plan of ``kernels``: the
    simulator of atomic subsystem ``i`` when ``inner`` is None, else the value of recipe
    ``inner`` in its inlined plan (``resolve(inner, inner kernels)``)."""
    _, i, inner = recipe
    kern = kernels[i]
    return kern.sim if inner is None else resolve(inner, kern.inner_kernels())


def _const(parent, i: int, value, recipe: tuple | None = None) -> str:
    """An inlined plan's constant, named by the parent's strategy (whose generated module
    holds it) with the recipe of its value within atomic subsystem ``i``."""
    return parent.const(value, None if recipe is None else ("n", i, recipe))


class Inlined:
    """The statements of one atomic subsystem in its parent's step function.

    Parameters
    ----------
    parent : Writer
        The writer of the parent plan.
    i : int
        The atomic subsystem block's index in the parent plan.

    Raises
    ------
    Unsupported
        The inner plan cannot be written inline (its flat values are laid out otherwise).
    """

    def __init__(self, parent, i: int):
        from cosim.fastpath.emitter import Writer, tableau
        from cosim.fastpath.layout import Layout
        from cosim.fastpath.runtime import Unsupported
        from cosim.fastpath.scalar import Scalar

        block = parent.plan.blocks[i]
        sim = parent.kernels[i].sim
        plan, cfg = sim.plan, sim.config
        self.pre = pre = f"{parent.prefix}a{i}_"
        self.sim = sim
        layout = Layout(plan, sim.interpreter.cslices)
        flat = sim.state.flat
        if layout.signal_slots != flat.signal_slots or layout.state_slots != flat.state_slots:
            raise Unsupported(f"atomic subsystem {parent.plan.names[i]}: flat values differ")
        # Each Inport takes the parent's value of its port (the value ``push_inputs`` sets:
        # no input derivatives, so its kernel's output is that very float).
        ps, pl = parent.s, parent.layout
        bound = {plan.index[p]: ps.ref("S", [pl.input_slot(parent.plan, i, p)])
                 for p in block.input_names}
        kernels = parent.kernels[i].inner_kernels()
        if kernels is None:
            raise Unsupported(f"atomic subsystem {parent.plan.names[i]}: no kernels")
        n_c = sim.state.X.size
        self.tab = tableau(sim.solver) if n_c else None
        if n_c and self.tab is None:
            raise Unsupported(f"atomic subsystem {parent.plan.names[i]}: solver")
        top = parent.top
        owner = ps.const(sim, ("n", i, None))
        arrays = {"S": pre + "S", "D": pre + "D", "C": pre + "X"}
        strategy = Scalar(plan, layout, n_c, prefix=pre, arrays=arrays)
        # Constants named apart, in the one generated module, with recipes that find their
        # values in a later run of the same structure (see cosim.fastpath.cache).
        strategy.const = functools.partial(_const, ps, i)
        strategy.rows, strategy.ticks = pre + "rows", pre + "ticks"
        self.writer = Writer(plan, layout, kernels, strategy, pre, top, bound)
        k, last = self.writer.k, pre + "l"
        self.last = last
        # Loaded from the simulator at each call: a restore reloads them in place and a
        # restart makes new ones (the parent's code is then written again too).
        top.prologue += [f"    {pre}S = {owner}.state.flat.S; {pre}D = {owner}.state.flat.D; "
                         f"{pre}X = {owner}.state.X",
                         f"    {pre}rows = {owner}.store.rows; "
                         f"{pre}ticks = {owner}.store.task_ticks",
                         f"    {k} = {pre}k0 = {owner}.state.k; "
                         f"{last} = {pre}l0 = {owner}.store.last",
                         *strategy.prologue]
        # The ticks logged in a call are those stepped after the last one logged before it,
        # up to the last one logged: each task's are appended once, as a range, when the
        # call returns (not one list append per task and tick).
        lo = f"{pre}lo"
        ticks = [f"        {lo} = max({pre}k0, {pre}l0 + 1, {task.offset}); "
                 f"{pre}ticks[{n}].extend(range({lo} + ({task.offset} - {lo}) % {task.period}, "
                 f"{last} + 1, {task.period}))" for n, task in enumerate(plan.tasks)]
        top.epilogue += [*strategy.epilogue, *ticks,
                         f"        {owner}.settle({k}, {last}, {k} - {pre}k0)"]
        self.clock = f"{self.writer.t} = {cfg.t0!r} + {k} * {cfg.dt!r}"
        self.reads_time = re.compile(rf"\b{self.writer.t}\b")
        self.ticks = max(1, nearest_tick(parent.plan.sample_period[i], cfg.dt))
        # Each output port: the inner signal driving its Outport.
        self.outs, drivers = [], []
        for p in block.output_names:
            dst = plan.index[p]
            w = next(w for w in plan.wires if w.dst == dst)
            drivers.append(w.src)
            self.outs.append((ps.ref("S", [pl.signal_at[(i, p)]]),
                              strategy.ref("S", [layout.signal_at[(w.src, w.src_port)]])))
        # Which inner outputs the output update computes, and which the state update computes
        # again at the same tick: the parent's signals computed before this block in its
        # tick are the same at its state update, and so are the inner outputs that read
        # only them, the inner states and the time (kernels are expressions of those).
        self.into: dict[int, list] = {}
        for w in plan.wires:
            self.into.setdefault(w.dst, []).append((w.src, w.dst_port))
        self.cone = self._upstream(drivers)
        late = {plan.index[w.dst_port] for w in parent.plan.wires
                if w.dst == i and w.src >= i}
        self.again = (set(range(len(plan.blocks))) - self.cone) | self._downstream(late)

    def _reads(self, j: int, port: str) -> bool:
        """Whether inner block ``j``'s outputs read its input ``port`` (an atomic subsystem's
        may: its own inner outputs read its inputs)."""
        kern = self.writer.kernels[j]
        if isinstance(kern, Nested):
            # Its outputs read the inputs its boundary names (AtomicSubsystem.dependencies):
            # an input reaching no output directly is read by its state update only.
            deps = self.writer.plan.blocks[j].dependencies
            return any(port in ins for ins in deps.values())
        name = re.compile(rf"\bu_{re.escape(port)}\b")
        return any(name.search(text) for text in kern.outputs.values())

    def _upstream(self, blocks) -> set[int]:
        """``blocks`` and the inner blocks whose outputs theirs read, recursively."""
        found, todo = set(), list(blocks)
        while todo:
            j = todo.pop()
            if j not in found:
                found.add(j)
                todo += [src for src, port in self.into.get(j, ()) if self._reads(j, port)]
        return found

    def _downstream(self, blocks: set[int]) -> set[int]:
        """``blocks`` and the inner blocks whose outputs read theirs, recursively (plan
        order is topological for such reads)."""
        found = set(blocks)
        for j in range(len(self.writer.plan.blocks)):
            if any(src in found and self._reads(j, port) for src, port in self.into.get(j, ())):
                found.add(j)
        return found

    def _body(self, only: set[int] | None = None) -> list[str]:
        """Lines computing the inner plan's outputs at its current tick (``only``: of these
        inner blocks; None: all)."""
        from cosim.fastpath.chunked import grouped
        from cosim.fastpath.emitter import guard

        w = self.writer
        plan = w.plan
        stmts = [(guard(plan.tasks[plan.task_of[g[0]]], w.k), st)
                 for g in w.s.groups if only is None or g[0] in only for st in w.outputs(g)]
        return grouped(stmts, 0)

    def _clocked(self, lines: list[str]) -> list[str]:
        """``lines`` after the inner time of the tick, when they read it."""
        return [self.clock, *lines] if any(map(self.reads_time.search, lines)) else lines

    def outputs(self) -> list[str]:
        """The block's output update: the inner outputs its own read, then its own (one
        statement of several lines)."""
        lines = self._clocked(self._body(self.cone))
        lines += [f"{dst} = {src}" for dst, src in self.outs]
        return ["\n".join(lines)] if lines else []

    def step(self) -> str:
        """The block's state update: the inner ticks to the block's next hit (one statement
        of several lines)."""
        from cosim.fastpath.chunked import grouped

        w, k = self.writer, self.writer.k
        logs, _ = w.logs(self.sim.store, ticks=False)
        cont, disc = w.updates()
        rest = [f"if {self.last} < {k}:", *grouped(logs, 4), f"    {self.last} = {k}"]
        rest += grouped([st for stmts in cont + disc for st in stmts], 0)
        if self.tab is not None:
            integ = w.integration(self.sim.config, self.tab, bool(cont))
            rest += [ln for lines, stmts, _ in integ for ln in lines + stmts]
        rest.append(f"{k} += 1")
        # The first tick completes the outputs of the output update; the others are whole.
        lines = self._clocked(self._body(self.again) + rest)
        if self.ticks > 1:
            lines += [f"for {self.pre}r in range({self.ticks - 1}):",
                      *("    " + ln.replace("\n", "\n    ")
                        for ln in self._clocked(self._body() + rest))]
        return "\n".join(lines)
