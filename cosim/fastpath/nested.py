"""Atomic subsystems inlined into their parent's generated step function.

An atomic subsystem is one discrete block of its parent at its own rate
(:class:`~cosim.run.atomic.AtomicSubsystem`): at each hit its inner plan computes the
outputs of its current tick from the block's inputs, and at the state update it runs its
ticks to the next hit (outputs again with the tick's final inputs, logs, state updates, its
own solver's integration). Called through the inner simulator, each hit costs two calls of
the inner step function and the numpy arrays around them; inlined, it costs the inner
plan's statements. :class:`Inlined` writes them with the emitter's own writer
(:class:`~cosim.fastpath.emitter._Writer`) over the inner plan, its values held in locals
named apart (``a<i>_s3``) and its clock its own (``a<i>_k``, ``a<i>_t``): the statements of
the inner plan's own fast path, in its order, so every value is the one the inner
simulator computes. The outermost function loads the inner run state (the inner fast path's
flat values, continuous state, log lists, tick) and stores it back when it returns; the
inner simulator is then settled at the tick it reached (:meth:`Simulator.settle
<cosim.run.simulator.Simulator.settle>`), as after a call of its own step function.
"""

from __future__ import annotations

from dataclasses import dataclass

from cosim.model.block import Kernel
from cosim.numerics.timegrid import nearest_tick

__all__ = ["Inlined", "Nested", "kernel"]


@dataclass(frozen=True)
class Nested(Kernel):
    """The kernel of an atomic subsystem whose inner plan runs on the scalar fast path.

    Its ``outputs`` only name the ports (their statements are the inner plan's).

    Attributes
    ----------
    sim : Simulator
        The inner simulator (initialized, on its scalar fast path).
    """

    sim: object = None


def kernel(block) -> Nested | None:
    """The :class:`Nested` kernel of an atomic subsystem block, or None when its inner plan
    does not run on the scalar fast path (the parent then runs on the interpreter)."""
    sim = block.inner
    fast = sim.fast_path if sim is not None else None
    if fast is None or fast.vector:
        return None
    return Nested({p: "0.0" for p in block.output_names}, sim=sim)


class Inlined:
    """The statements of one atomic subsystem in its parent's step function.

    Parameters
    ----------
    parent : _Writer
        The writer of the parent plan.
    i : int
        The atomic subsystem block's index in the parent plan.

    Raises
    ------
    Unsupported
        The inner plan cannot be written inline (its flat values are laid out otherwise).
    """

    def __init__(self, parent, i: int):
        from cosim.fastpath.emitter import _Writer, tableau
        from cosim.fastpath.layout import Layout, kernels_of
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
        # Their own kernels are not asked for again: an Inport's makes new live values, which
        # the inner fast path (still used for the final outputs of a run) would not see.
        kernels = kernels_of(plan, given={j: Kernel({"out": "0.0"}) for j in bound})
        if kernels is None:
            raise Unsupported(f"atomic subsystem {parent.plan.names[i]}: no kernels")
        n_c = sim.state.X.size
        self.tab = tableau(sim.solver) if n_c else None
        if n_c and self.tab is None:
            raise Unsupported(f"atomic subsystem {parent.plan.names[i]}: solver")
        top = parent.top
        owner = top.const(sim)
        arrays = {"S": pre + "S", "D": pre + "D", "C": pre + "X"}
        strategy = Scalar(plan, layout, n_c, prefix=pre, arrays=arrays)
        strategy.namespace = top.namespace          # constants named apart, in one module
        strategy.rows, strategy.ticks = pre + "rows", pre + "ticks"
        self.writer = _Writer(plan, layout, kernels, strategy, pre, top, bound)
        k, last = self.writer.k, pre + "l"
        self.last = last
        # Loaded from the simulator at each call: a restore reloads them in place and a
        # restart makes new ones (the parent's code is then written again too).
        top.prologue += [f"    {pre}S = {owner}.state.flat.S; {pre}D = {owner}.state.flat.D; "
                         f"{pre}X = {owner}.state.X",
                         f"    {pre}rows = {owner}.store.rows; "
                         f"{pre}ticks = {owner}.store.task_ticks",
                         f"    {k} = {pre}k0 = {owner}.state.k; {last} = {owner}.store.last",
                         *strategy.prologue]
        top.epilogue += [*strategy.epilogue,
                         f"        {owner}.settle({k}, {last}, {k} - {pre}k0)"]
        self.clock = f"{self.writer.t} = {cfg.t0!r} + {k} * {cfg.dt!r}"
        self.ticks = max(1, nearest_tick(parent.plan.sample_period[i], cfg.dt))
        # Each output port: the inner signal driving its Outport.
        self.outs = []
        for p in block.output_names:
            dst = plan.index[p]
            w = next(w for w in plan.wires if w.dst == dst)
            self.outs.append((ps.ref("S", [pl.signal_at[(i, p)]]),
                              strategy.ref("S", [layout.signal_at[(w.src, w.src_port)]])))

    def _body(self) -> list[str]:
        """Lines computing the inner plan's outputs at its current tick."""
        from cosim.fastpath.chunked import grouped
        from cosim.fastpath.emitter import guard

        w = self.writer
        plan = w.plan
        stmts = [(guard(plan.tasks[plan.task_of[g[0]]], w.k), st)
                 for g in w.s.groups for st in w.outputs(g)]
        return [self.clock, *grouped(stmts, 0)]

    def outputs(self) -> list[str]:
        """The block's output update: the inner outputs, then the block's own (one
        statement of several lines)."""
        lines = self._body() + [f"{dst} = {src}" for dst, src in self.outs]
        return ["\n".join(lines)]

    def step(self) -> str:
        """The block's state update: the inner ticks to the block's next hit (one statement
        of several lines)."""
        from cosim.fastpath.chunked import grouped

        w, k = self.writer, self.writer.k
        logs, _ = w.logs(self.sim.store)
        cont, disc = w.updates()
        tick = self._body()
        tick += [f"if {self.last} < {k}:", *grouped(logs, 4), f"    {self.last} = {k}"]
        tick += grouped([st for stmts in cont + disc for st in stmts], 0)
        if self.tab is not None:
            integ = w.integration(self.sim.config, self.tab, bool(cont))
            tick += [ln for lines, stmts, _ in integ for ln in lines + stmts]
        tick.append(f"{k} += 1")
        if self.ticks > 1:
            tick = [f"for {self.pre}r in range({self.ticks}):",
                    *("    " + ln.replace("\n", "\n    ") for ln in tick)]
        return "\n".join(tick)
