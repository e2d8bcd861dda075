"""The in-process unit: an atomic subsystem run by its own
:class:`~cosim.run.simulator.Simulator` (its own base step, solver and multirate tasks),
driven through :meth:`Unit.handle <cosim.master.units.Unit.handle>` like every other unit.
"""

from __future__ import annotations

import math
import time

import numpy as np

from cosim.master import protocol as P
from cosim.master.units import DirectStep, Unit
from cosim.model.events import Scheduled
from cosim.errors import ModelError, SimulationError
from cosim.numerics.timegrid import EXCHANGE_RTOL, same_time, time_tolerance
from cosim.run import checkpoint

__all__ = ["LocalUnit"]

INF = math.inf


class LocalUnit(Unit):
    """An atomic subsystem run in this process by its own Simulator.

    Parameters
    ----------
    subsystem : Subsystem
        Evaluated diagram whose Inport / Outport blocks are the unit's ports.
    config : SimulationConfig
        The unit's own configuration (base step, solver, loop options).
    name : str, optional
        Unit name (default: the subsystem's).
    """

    #: Most base steps one DoStep may run (a bound on the work of one request).
    max_ticks = 10**6
    #: Longest wall time (s) one DoStep may run, or None for no limit (the default in
    #: process; ``cosim serve`` sets one). Checked between chunks of ticks, so a step past it
    #: stops with an error that names the limit and leaves the unit where it stopped.
    step_deadline: float | None = None
    #: Ticks run between two looks at the clock under a deadline (microseconds of work).
    DEADLINE_CHUNK = 1024

    def __init__(self, subsystem, config, name: str | None = None):
        from cosim.run.atomic import boundary
        from cosim.run.simulator import Simulator

        self.name = name or subsystem.name
        self.subsystem = subsystem
        self.sim = Simulator(subsystem, config)
        plan = self.sim.plan
        self.inports = {p: plan.blocks[plan.index[p]] for p in subsystem.input_names}
        self.outports = {p: plan.blocks[plan.index[p]] for p in subsystem.output_names}
        # Each output reads the signal driving its Outport from the run state, whichever path
        # (interpreter or generated) holds it: nothing is copied at a macro step.
        self._sources = []
        for p in subsystem.output_names:
            dst = plan.index[p]
            w = next(w for w in plan.wires if w.dst == dst)
            self._sources.append((p, plan.blocks[w.src], w.src_port))
        self.dependencies = boundary(subsystem)
        self._inport_index = {plan.index[p] for p in self.inports}
        self.dt = config.dt
        self.t0 = config.t0
        self._initialized = False
        self._collected: dict[str, int] = {}
        self._scheduled = [e for e in self.sim.events if isinstance(e, Scheduled)]
        self._packed = None         # a PackedSteps while fused steps run on it

    @property
    def t(self) -> float:
        return self.sim.t

    # -- protocol -------------------------------------------------------------------------

    def describe(self) -> P.UnitDescription:
        if not self._initialized:
            self.initialize(self.t0)
        self.sim.state.blocks_current()         # the Outports' inputs give the shapes
        return P.UnitDescription(
            name=self.name,
            inputs=tuple(P.PortInfo(p, b.shape) for p, b in self.inports.items()),
            outputs=tuple(P.PortInfo(p, tuple(b.inputs["in"].shape), self._period(p))
                          for p, b in self.outports.items()),
            feedthrough=tuple((o, tuple(deps)) for o, deps in self.dependencies.items()),
            dt=self.dt,
            can_get_set_state=True,
            capabilities=("rollback", "input-derivatives", P.FUSED_STEP),
        )

    def handle(self, req: P.Request) -> P.Reply:
        self.end_packed()
        return super().handle(req)

    def step_packed(self, t: float, h: float, mode: int, inputs: tuple, orders: tuple,
                    values) -> tuple | None:
        """A fused :class:`~cosim.master.protocol.Step` given as plain values, on the
        generated path without message objects or arrays (:mod:`cosim.master.packed`): a
        unit server's fast lane. Results are those of :meth:`step`, bit for bit.

        Parameters
        ----------
        t, h, mode, inputs, orders
            The Step's fields.
        values : sequence of float
            Its ``data``.

        Returns
        -------
        tuple or None
            ``(t_reached, event, next_event, outputs)`` with ``outputs`` a list of floats in
            the order of the unit's outputs; None when the step must be served through
            :meth:`handle` (nothing was done then).

        Raises
        ------
        SimulationError
            The model failed in the step (the unit stays where it failed).
        """
        packed = self._packed
        if packed is None:
            from cosim.master.packed import PackedSteps
            direct = self.direct()
            if direct is None:
                return None
            packed = self._packed = PackedSteps(self, direct)
        return packed.step(t, h, mode, inputs, orders, values)

    def end_packed(self) -> None:
        """Settle the unit after :meth:`step_packed` (before it serves anything else)."""
        if self._packed is not None:
            packed, self._packed = self._packed, None
            packed.settle()

    def answer_stepped(self) -> tuple:
        """``(t_reached, event, next_event, outputs)`` of :meth:`step_packed` read from the
        unit's state (after a step that stopped early)."""
        sim = self.sim
        outs = [float(np.asarray(v, dtype=np.float64).reshape(-1)[0])
                for v in self.get_outputs().values()]
        return sim.t, sim.stopped, self._next_event(), outs

    def refresh_with(self, values: dict) -> None:
        """Set inputs to plain values (``{input: float}``, no derivatives) and refresh the
        outputs (logged): the refresh of a ``STEP_RESET`` step taken by
        :meth:`step_packed`."""
        self.set_inputs({p: np.full(self.inports[p].shape, x, dtype=np.float64)
                         for p, x in values.items()})
        self.refresh_outputs()

    def _fused_ports(self) -> tuple[dict, tuple]:
        # Not from describe(): that initializes a unit that is not yet (one restored by
        # SetState in a re-spawned server is at its restored time).
        return ({p: b.shape for p, b in self.inports.items()},
                tuple(p for p, _, _ in self._sources))

    def _period(self, port: str) -> float:
        """How often output ``port`` changes: its source block's period if that block is
        discrete (held between hits), else 0.0."""
        plan = self.sim.plan
        dst = plan.index[port]
        for w in plan.wires:
            if w.dst == dst:
                src = w.src
                if plan.continuous[src] or src in self._inport_index:
                    return 0.0
                return float(plan.sample_period[src])
        return 0.0

    def initialize(self, t0: float) -> None:
        for blk in self.inports.values():
            blk.set(None)
        self.sim.initialize(t0)
        self.t0 = t0
        self._initialized = True
        self._collected: dict[str, int] = {}

    def set_inputs(self, values: dict, derivatives: dict | None = None) -> None:
        t = self.sim.t
        derivatives = derivatives or {}
        for p, v in values.items():
            blk = self.inports.get(p)
            if blk is None:
                raise ModelError(f"unit {self.name!r} has no input {p!r} (inputs: "
                                 f"{', '.join(self.inports)})")
            if type(v) is not np.ndarray or v.dtype != np.float64:
                v = np.asarray(v, dtype=np.float64)
            if v.shape != blk.shape:
                raise ModelError(f"unit {self.name!r}: input {p} has shape {v.shape}, expected "
                                 f"{blk.shape}")
            blk.set(v, derivatives.get(p, ()), t)

    def refresh_outputs(self) -> P.StepDone:
        """Outputs for the inputs just set, logged as this time's sample (a later refresh at
        the same time replaces it): co-initialization, macro points and the final point."""
        self.sim.compute_outputs(log=True)
        return P.StepDone(self.sim.t, False, self._next_event())

    def do_step(self, t: float, h: float) -> P.StepDone:
        sim = self.sim
        now = sim.t
        if not same_time(now, t, EXCHANGE_RTOL):
            raise ModelError(f"unit {self.name!r}: do_step(t={t}) but the unit is at "
                             f"t={now}; roll back with set_state or step from {now}")
        k = sim.k
        n = (t + h - sim.config.t0) / self.dt - k
        ticks = round(n)
        if ticks < 1 or abs(ticks - n) > 1e-6:
            raise ModelError(f"unit {self.name!r}: macro step h={h} is not a multiple of its "
                             f"step dt={self.dt}; choose H as a common multiple of the units' dt")
        if ticks > self.max_ticks:
            # One request must not occupy the unit (and a server's only thread) for minutes.
            raise ModelError(f"unit {self.name!r}: DoStep(t={t}, h={h}) is {ticks} steps of "
                             f"dt={self.dt}, more than the {self.max_ticks} one request may "
                             "take; use a smaller macro step (or raise LocalUnit.max_ticks)")
        if self.step_deadline is None:
            # The ticks of the step and the outputs at its end (for the inputs held): one call.
            sim.advance_to(k + ticks, outputs=True)
        else:
            self._advance_within(k, ticks, t, h)
        return P.StepDone(sim.t, sim.stopped, self._next_event())

    def _advance_within(self, k: int, ticks: int, t: float, h: float) -> None:
        """``advance_to(k + ticks, outputs=True)`` in chunks, stopping with an error once the
        step has run ``step_deadline`` seconds (runs in pieces equal the run in one)."""
        sim, limit = self.sim, self.step_deadline
        end = time.monotonic() + limit
        k_end = k + ticks
        while sim.k + self.DEADLINE_CHUNK < k_end and not sim.stopped:
            sim.advance_to(sim.k + self.DEADLINE_CHUNK)
            if time.monotonic() > end and not sim.stopped:
                raise SimulationError(
                    f"unit {self.name!r}: DoStep(t={t}, h={h}) ran past the step deadline of "
                    f"{limit:g} s after {sim.k - k} of its {ticks} steps; the unit stays at "
                    f"t={sim.t}: roll it back (SetState), use a smaller macro step, or raise "
                    "the deadline (cosim serve --step-deadline)", t=sim.t)
        if not sim.stopped:
            sim.advance_to(k_end, outputs=True)

    def _next_event(self) -> float:
        """The unit's next scheduled event after now (inf if none)."""
        if not self._scheduled:
            return INF
        t = self.sim.t
        eps = time_tolerance(t, EXCHANGE_RTOL)
        return min(e.next_after(t, eps) for e in self._scheduled)

    def direct(self) -> DirectStep | None:
        """How to step this unit through its generated function directly, or None when it
        does not run on the scalar generated path (interpreter, vector strategy, events)."""
        self.end_packed()
        fp = self.sim.fast_path
        if fp is None or fp.vector or self._scheduled or not self._initialized:
            return None
        lives = {p: blk.live for p, blk in self.inports.items()}
        if any(live is None for live in lives.values()):
            return None
        slot = fp.flat.slot_of
        return DirectStep(fp.bound(), self.sim.k, self.sim.store.last, self.sim.config.t0,
                          self.dt, lives,
                          {p: slot[(id(blk), port)] for p, blk, port in self._sources},
                          keep=self._keep_direct, refreshes=not self.sim.atomics)

    def _keep_direct(self):
        """:attr:`DirectStep.keep`: the generated path's values (flat signals and states,
        continuous state, log rows and ticks) of this unit's simulator and of the atomic
        subsystems inlined into it (with their tick and last logged tick) kept; returns
        the function putting them back."""
        kept = []
        todo = [(self.sim, False)]
        while todo:
            sim, inner = todo.pop()
            state, store = sim.state, sim.store
            kept.append((sim, inner, state.flat.S[:], state.flat.D[:], state.X.copy(),
                         [len(r) for r in store.rows], [len(t) for t in store.task_ticks],
                         state.k, store.last))
            todo += [(blk.inner, True) for _, blk in sim.atomics]

        def restore():
            for sim, inner, S, D, X, rows, ticks, k, last in kept:
                state, store = sim.state, sim.store
                state.flat.S[:] = S
                state.flat.D[:] = D
                state.X[:] = X
                for r, n in zip(store.rows, rows):
                    del r[n:]
                for t, n in zip(store.task_ticks, ticks):
                    del t[n:]
                if inner:
                    sim.settle(k, last, 0)
        return restore

    def settle(self, k: int, last: int, stepped: int, derivatives: dict[str, int]) -> None:
        """After direct steps (:meth:`direct`): the unit is at tick ``k``, logged up to
        ``last``, ``stepped`` ticks were integrated; each Inport takes back its value from its
        live values, with ``derivatives[input]`` (0, 1, 2) input derivatives."""
        self.sim.settle(k, last, stepped)
        for p, blk in self.inports.items():
            live = blk.live
            n = derivatives[p] if live[1] else 0
            blk.set(np.array([live[0]]), tuple(np.array([live[2 + j]]) for j in range(n)),
                    live[4])

    def get_outputs(self) -> dict:
        value = self.sim.state.value
        return {p: value(blk, port) for p, blk, port in self._sources}

    def get_state(self) -> P.UnitState:
        return P.UnitState(self.sim.t, checkpoint.snapshot(self.sim))

    def set_state(self, state: P.UnitState) -> None:
        checkpoint.restore_snapshot(self.sim, state.data)
        # Samples after the restored point are gone: never collect past what exists now.
        lengths = state.data["meta"]["log_lengths"]
        for key, n in lengths.items():
            if self._collected.get(key, 0) > n:
                self._collected[key] = n

    def collect_logs(self) -> P.LogBatch:
        """Samples logged since the previous call (accepted steps only: the master collects
        after it accepted a macro step, and rollbacks truncate uncollected samples)."""
        return P.LogBatch(self.sim.logs_since(self._collected))

    def terminate(self) -> None:
        self.sim.finalize()

