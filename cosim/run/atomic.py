"""Atomic subsystems: a diagram compiled into its own plan and run as one block of its parent.

An atomic subsystem (Xcos's atomic super block) keeps its own base step, solver and multirate
tasks; loops inside are solved inside. In its parent it is one discrete block at its own rate:
at each hit it takes its inputs, computes its outputs (``output_update``), and then advances its
inner simulator to the next hit (``state_update``). Which outputs depend directly on which
inputs (:func:`boundary`) decides its feedthrough in the parent — and is what the co-simulation
master needs to know about a unit.
"""

from __future__ import annotations

import weakref
from dataclasses import replace

from cosim.compile.flatten import ALL_OUTPUTS
from cosim.model.block import Block
from cosim.errors import ModelError
from cosim.model.diagram import Inport, Outport, Subsystem
from cosim.numerics.timegrid import nearest_tick

__all__ = ["AtomicSubsystem", "boundary", "inner_config"]

#: The one block of each atomic subsystem (held here, not on the subsystem object).
_BLOCK_OF: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def boundary(sub: Subsystem) -> dict[str, tuple[str, ...]]:
    """For each output port of ``sub``, the input ports it depends on directly.

    A dependency is a path from an Inport to an Outport through blocks with direct feedthrough
    (atomic subsystems inside count with their own boundary).

    Returns
    -------
    dict of str to tuple of str
        Output port -> input ports, both in declaration order.
    """
    from cosim.compile.flatten import flatten

    flat = flatten(sub)
    if flat.problems:
        from cosim.errors import CompileError
        raise CompileError(flat.problems, sub.name)
    index = {p: i for i, p in enumerate(flat.paths)}
    succ: dict[int, set[int]] = {i: set() for i in range(len(flat.paths))}
    for s, _, d, _ in flat.wires:
        succ[index[s]].add(index[d])
    result = {}
    ins = [i for i, b in enumerate(flat.blocks) if isinstance(b, Inport)]
    for o, b in enumerate(flat.blocks):
        if not isinstance(b, Outport):
            continue
        deps = []
        for i in ins:
            # Depth-first over feedthrough blocks only (the Outport itself has feedthrough).
            stack, seen = [i], {i}
            while stack:
                v = stack.pop()
                for w in succ[v]:
                    if w in seen or not flat.blocks[w].direct_feedthrough:
                        continue
                    seen.add(w)
                    stack.append(w)
            if o in seen:
                deps.append(flat.blocks[i].name)
        result[b.name] = tuple(deps)
    return result


def nested_log(log: tuple[str, ...] | None, path: str) -> tuple[str, ...] | None:
    """The part of a log selection under ``path``, in the nested plan's own names.

    ``"path/x.out"`` is ``"x.out"`` of the plan at ``path``; None (log everything) stays None
    and ``"*"`` (every output) stays ``"*"``.
    """
    if log is None:
        return None
    head = path + "/"
    return tuple(k[len(head):] if k != ALL_OUTPUTS else k for k in log
                 if k.startswith(head) or k == ALL_OUTPUTS)


def inner_config(sub: Subsystem, parent):
    """The configuration of an atomic subsystem's own plan, derived from the parent's."""
    fields = {"fast": parent.fast, "log": None}
    if sub.dt is not None:
        fields["dt"] = float(sub.dt)
    if sub.solver is not None:
        fields["solver"] = sub.solver
    fields.update(sub.options)
    try:
        return replace(parent, **fields)
    except TypeError as err:
        raise ModelError(f"atomic subsystem {sub.name!r}: options {sub.options} are not "
                         f"SimulationConfig fields ({err})") from None
    except ModelError as err:
        # The subsystem's own settings (step, solver, options), named as its.
        msg = err.args[0].removeprefix("SimulationConfig: ")
        raise ModelError(f"atomic subsystem {sub.name!r}: {msg}") from None


class AtomicSubsystem(Block):
    """The block an atomic :class:`~cosim.model.diagram.Subsystem` becomes in its parent's plan.

    Ports are the subsystem's Inport / Outport names; feedthrough from :func:`boundary`. The
    inner :class:`~cosim.run.simulator.Simulator` is made when the parent binds its configuration
    (:meth:`bind`); its logs and checkpoints are gathered by the parent under the subsystem's
    path.
    """

    runs_at_stages = False
    nests_plan = True

    def __init__(self, sub: Subsystem):
        super().__init__(sub.name, sample_time=sub.dt, inputs=sub.input_names,
                         outputs=sub.output_names)
        self.subsystem = sub
        # An Inport that declares its shape says what the wire into it carries: checked when
        # the parent initializes, and the first guess of a loop's tear signal read there.
        for blk in sub.blocks:
            if isinstance(blk, Inport) and "shape" in blk.spec():
                self.input_shapes[blk.name] = blk.shape
        self.dependencies = boundary(sub)
        self.direct_feedthrough = any(self.dependencies.values())
        self.inner = None

    @classmethod
    def of(cls, sub: Subsystem) -> AtomicSubsystem:
        """The (one) block of subsystem ``sub``, made on first use."""
        blk = _BLOCK_OF.get(sub)
        if blk is None:
            blk = _BLOCK_OF[sub] = cls(sub)
        return blk

    def bind(self, parent_config, log: tuple[str, ...] | None = None, events=()) -> None:
        """Compile the inner plan with the configuration derived from the parent's.

        ``log`` is the inner plan's selection in its own names (None: every signal), see
        :func:`nested_log`; ``events`` the parent's events routed to this subsystem, watched
        by the inner run beside the subsystem's own.
        """
        from cosim.run.simulator import Simulator

        cfg = replace(inner_config(self.subsystem, parent_config), log=log)
        self.inner = Simulator(self.subsystem, cfg,
                               events=list(self.subsystem.events) + list(events))
        plan = self.inner.plan
        self.inports = [(p, plan.blocks[plan.index[p]]) for p in self.input_names]
        # Each output port reads the inner signal driving its Outport (wherever it is held).
        self.sources = []
        for p in self.output_names:
            dst = plan.index[p]
            w = next(w for w in plan.wires if w.dst == dst)
            self.sources.append((p, plan.blocks[w.src], w.src_port))
        self.ticks = None

    def push_inputs(self) -> None:
        """Hand this block's inputs to the inner Inports."""
        ins = self.inputs
        for p, blk in self.inports:
            if p in ins:
                blk.set(ins[p])

    def pull_outputs(self) -> None:
        """Take this block's outputs from the inner run state."""
        value = self.inner.state.value
        for p, blk, port in self.sources:
            self.outputs[p] = value(blk, port)

    def initialize(self, t0):
        if self.inner is None:
            raise ModelError(f"atomic subsystem {self.name!r} was not bound to a parent "
                             "configuration (run it through a Simulator)")
        for _, blk in self.inports:
            blk.set(None)
        self.push_inputs()
        self.inner.initialize(t0)
        self.pull_outputs()

    def output_update(self, t, dt):
        self.push_inputs()
        self.inner.compute_outputs()
        self.pull_outputs()

    def state_update(self, t, dt):
        # Inputs of non-feedthrough paths may have been computed after our output_update in
        # this tick (plan order); the inner state update must see the tick's final inputs.
        self.push_inputs()
        if self.ticks is None:
            self.ticks = max(1, nearest_tick(dt, self.inner.config.dt))
        inner = self.inner
        inner.advance_to(inner.k + self.ticks)

    def finalize(self):
        if self.inner is not None:
            self.inner.finalize()
