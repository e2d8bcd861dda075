"""Units: what a co-simulation master drives, and the in-process implementation.

A unit is shaped like an FMI co-simulation slave. The master talks to every unit through one
method, :meth:`Unit.handle`, with the frozen request messages of :mod:`cosim.master.protocol`, so it
never knows whether a unit runs in this process, in a Ray actor, behind a ZeroMQ socket or in
an FMU. :class:`LocalUnit` runs an atomic subsystem with its own :class:`~cosim.run.simulator.Simulator`
(its own base step, solver and multirate tasks).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from cosim.master import protocol as P
from cosim.model.events import Scheduled
from cosim.errors import (ConvergenceError, CosimError, ModelError, SimulationError,
                          UnsupportedError)
from cosim.numerics.timegrid import EXCHANGE_RTOL, same_time, time_tolerance
from cosim.run import checkpoint

__all__ = ["DirectStep", "LocalUnit", "Unit", "error_reply"]

INF = math.inf


def error_reply(err: Exception, t: float | None = None) -> P.ErrorReply:
    """The ErrorReply for an exception raised while a unit served a request."""
    if isinstance(err, UnsupportedError):
        kind = P.ErrorKind.UNSUPPORTED
    elif isinstance(err, ConvergenceError):
        kind = P.ErrorKind.CONVERGENCE
    elif isinstance(err, SimulationError):
        kind = P.ErrorKind.SIMULATION
        t = err.t if err.t is not None else t
    elif isinstance(err, (ModelError, KeyError, ValueError)):
        kind = P.ErrorKind.PROTOCOL
    elif isinstance(err, CosimError):
        kind = P.ErrorKind.SIMULATION
    else:
        kind = P.ErrorKind.INTERNAL
    msg = str(err) if not isinstance(err, KeyError) else str(err.args[0])
    return P.ErrorReply(kind, f"{type(err).__name__}: {msg}", t)


class Unit:
    """Base class of every unit implementation.

    How to write a unit
    -------------------
    1. Implement the protocol calls as methods: ``describe() -> UnitDescription``,
       ``initialize(t0)``, ``set_inputs(values, derivatives)``, ``do_step(t, h) -> StepDone``,
       ``refresh_outputs() -> StepDone``, ``get_outputs() -> dict``,
       ``get_state() -> UnitState``, ``set_state(UnitState)``, ``collect_logs() -> LogBatch``,
       ``terminate()``.
    2. Raise cosim errors naming the block/port and the time; :meth:`handle` turns every
       exception into an :class:`~cosim.master.protocol.ErrorReply`, so one failing request never
       takes the unit (or its server) down.
    3. ``do_step(t, h)`` must land exactly on ``t + h`` (integer ticks of the unit's own step)
       and report an event if it stopped early; :meth:`handle` refuses ``h <= 0`` before it
       is called. ``refresh_outputs()`` recomputes the outputs at the current time for the
       inputs just set (time does not advance) and logs them as this time's sample.
    4. ``get_state`` must capture everything ``do_step`` depends on, including the log
       position, so that ``set_state`` rolls back logs too.

    :meth:`handle` is the single entry point used by the master and by servers.
    """

    name = "unit"

    def handle(self, req: P.Request) -> P.Reply:
        """Serve one request; every failure becomes an ErrorReply."""
        try:
            return self._dispatch(req)
        except Exception as err:  # noqa: BLE001 - a unit answers, it does not crash
            return error_reply(err, getattr(self, "t", None))

    def direct(self) -> DirectStep | None:
        """How to step this unit by calling generated code directly (the compiled exchange,
        :mod:`cosim.master.compiled`); None: only through :meth:`handle`."""
        return None

    def step(self, req: P.Step) -> P.Stepped:
        """Serve a fused :class:`~cosim.master.protocol.Step`: its parts in order, as
        :meth:`handle` serves the batch they stand for (called through it: the first part
        that raises ends the step with its ErrorReply)."""
        inputs, outputs = self._fused_ports()
        values, derivatives = unpack_inputs(self.name, inputs, req)
        self.set_inputs(values, derivatives)
        done = _do_step(self, req)
        if req.refresh:
            done = self.refresh_outputs()
        return P.Stepped(done.t_reached, done.event, done.next_event,
                         pack_outputs(self.name, outputs, self.get_outputs()))

    def _fused_ports(self) -> tuple[dict, tuple]:
        """``({input: shape}, (output, ...))`` from the unit's description (asked once)."""
        ports = getattr(self, "_ports", None)
        if ports is None:
            desc = self.describe()
            ports = self._ports = ({p.name: p.shape for p in desc.inputs},
                                   tuple(p.name for p in desc.outputs))
        return ports

    def _dispatch(self, req: P.Request) -> P.Reply:
        serve = _SERVE.get(type(req))
        if serve is None:
            raise ModelError(f"unit {self.name!r} cannot serve {type(req).__name__}")
        return serve(self, req)


#: The one Ok reply (replies are frozen values: one instance serves every request).
_OK = P.Ok()


def _set_inputs(unit: Unit, req: P.SetInputs) -> P.Reply:
    unit.set_inputs(req.values, req.derivatives)
    return _OK


def _do_step(unit: Unit, req: P.DoStep | P.Step) -> P.Reply:
    if not req.h > 0.0:
        raise ModelError(f"unit {unit.name!r}: DoStep(t={req.t}, h={req.h}) needs h > 0; send "
                         "RefreshOutputs to recompute the outputs at the current time")
    return unit.do_step(req.t, req.h)


def _set_state(unit: Unit, req: P.SetState) -> P.Reply:
    unit.set_state(req.state)
    return _OK


def _initialize(unit: Unit, req: P.Initialize) -> P.Reply:
    unit.initialize(req.t0)
    return _OK


def _terminate(unit: Unit, req: P.Terminate) -> P.Reply:
    unit.terminate()
    return _OK


def _hello(unit: Unit, req: P.Hello) -> P.Reply:
    if req.protocol_version != P.PROTOCOL_VERSION:
        raise ModelError(f"protocol version {req.protocol_version} is not "
                         f"{P.PROTOCOL_VERSION}; upgrade the older side")
    return P.Welcome(P.PROTOCOL_VERSION, unit.describe())


def unpack_inputs(unit: str, shapes: dict, req: P.Step) -> tuple[dict, dict]:
    """The ``SetInputs`` values and derivatives a :class:`~cosim.master.protocol.Step` packs.

    Parameters
    ----------
    unit : str
        The unit's name (for errors).
    shapes : dict of str to tuple of int
        The unit's inputs and their shapes.
    req : Step

    Returns
    -------
    values : dict of str to ndarray
        Views of ``req.data``, each of its input's shape.
    derivatives : dict of str to tuple of ndarray
        Inputs given derivatives -> 1 or 2 views of ``req.data``.

    Raises
    ------
    ModelError
        An unknown input, an order other than 0, 1, 2, or data not of the length the inputs
        and orders imply.
    """
    data = req.data
    if type(data) is not np.ndarray or data.dtype != np.float64 or data.ndim != 1:
        raise ModelError(f"unit {unit!r}: Step.data must be a 1-D float64 array")
    if len(req.orders) != len(req.inputs):
        raise ModelError(f"unit {unit!r}: Step names {len(req.inputs)} inputs and "
                         f"{len(req.orders)} orders")
    values, derivatives = {}, {}
    i, n = 0, len(data)
    for name, order in zip(req.inputs, req.orders):
        shape = shapes.get(name)
        if shape is None:
            raise ModelError(f"unit {unit!r} has no input {name!r} (inputs: "
                             f"{', '.join(shapes)})")
        if order not in (0, 1, 2):
            raise ModelError(f"unit {unit!r}: input {name!r} has {order!r} derivatives in "
                             "Step; 0, 1 or 2 are allowed")
        size = math.prod(shape)
        if i + size * (1 + order) > n:
            break
        values[name] = data[i:i + size].reshape(shape)
        if order:
            derivatives[name] = tuple(data[i + size * j:i + size * (j + 1)].reshape(shape)
                                      for j in range(1, order + 1))
        i += size * (1 + order)
    else:
        if i == n:
            return values, derivatives
    raise ModelError(f"unit {unit!r}: Step.data holds {n} values, not what its inputs "
                     f"{', '.join(req.inputs)} with orders {req.orders} need")


def pack_outputs(unit: str, names: tuple, values: dict) -> np.ndarray:
    """The outputs ``names`` of ``values`` as float64, flattened into one array, in order
    (a :class:`~cosim.master.protocol.Stepped`'s ``outputs``)."""
    parts = []
    for name in names:
        v = values[name]
        if type(v) is not np.ndarray or v.dtype != np.float64:
            v = np.asarray(v, dtype=np.float64)     # unit ports are float64 (the protocol)
        parts.append(v.ravel())
    return np.concatenate(parts) if parts else np.zeros(0)


#: Request type -> how a unit serves it (a table, so a request costs one lookup).
_SERVE = {
    P.SetInputs: _set_inputs,
    P.DoStep: _do_step,
    P.RefreshOutputs: lambda unit, req: unit.refresh_outputs(),
    P.GetOutputs: lambda unit, req: P.Outputs(unit.get_outputs()),
    P.GetState: lambda unit, req: unit.get_state(),
    P.SetState: _set_state,
    P.Initialize: _initialize,
    P.CollectLogs: lambda unit, req: unit.collect_logs(),
    P.Describe: lambda unit, req: unit.describe(),
    P.Terminate: _terminate,
    P.Heartbeat: lambda unit, req: _OK,
    P.Hello: _hello,
    P.Step: lambda unit, req: unit.step(req),
}


@dataclass(frozen=True)
class DirectStep:
    """How to step a :class:`LocalUnit` by calling its generated function directly (the
    compiled exchange of :mod:`cosim.master.compiled`), valid until the unit is initialized
    or restored again.

    Attributes
    ----------
    bound : tuple
        ``(fn, S, D, X, rows, ticks)`` of :meth:`FastPath.bound
        <cosim.fastpath.runtime.FastPath.bound>`.
    k, last : int
        The unit's tick and its last logged tick.
    t0, dt : float
        The unit's start time and base step (s): its time is ``t0 + k*dt``.
    inputs : dict of str to list
        Input -> the live values ``[value, has derivatives, d1, d2, t_ref]`` its Inport's
        kernel reads (see :class:`~cosim.model.diagram.Inport`).
    outputs : dict of str to int
        Output -> the slot of ``S`` holding its value.
    stops : list or None
        A unit that may stop the run (an FMU asking to terminate) appends the time it stopped
        here during a step; the compiled exchange then ends the macro step as the protocol
        path does (no refresh) and the master ends the run there. None: it never stops.
    generated : bool
        True if ``bound`` is generated code (its errors point at the fast path); False for a
        hand-written step (an FMU's), whose errors are its own.
    """

    bound: tuple
    k: int
    last: int
    t0: float
    dt: float
    inputs: dict
    outputs: dict
    stops: list | None = None
    generated: bool = True


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

    def step_packed(self, t: float, h: float, refresh: bool, inputs: tuple, orders: tuple,
                    values) -> tuple | None:
        """A fused :class:`~cosim.master.protocol.Step` given as plain values, on the
        generated path without message objects or arrays (:mod:`cosim.master.packed`): a
        unit server's fast lane. Results are those of :meth:`step`, bit for bit.

        Parameters
        ----------
        t, h, refresh, inputs, orders
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
        return packed.step(t, h, refresh, inputs, orders, values)

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
                          {p: slot[(id(blk), port)] for p, blk, port in self._sources})

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

