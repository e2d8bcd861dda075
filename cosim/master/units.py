"""Units: what a co-simulation master drives, and the in-process implementation.

A unit is shaped like an FMI co-simulation slave. The master talks to every unit through one
method, :meth:`Unit.handle`, with the frozen request messages of :mod:`cosim.master.protocol`, so it
never knows whether a unit runs in this process, in a Ray actor, behind a ZeroMQ socket or in
an FMU. :class:`~cosim.master.local_unit.LocalUnit` runs an atomic subsystem in this process.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from cosim.master import protocol as P
from cosim.errors import (ConvergenceError, CosimError, ModelError, SimulationError,
                          UnsupportedError)

__all__ = ["DirectStep", "Unit", "error_reply"]


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
    # A failing part of a fused Step names itself (``cosim_call``, set where it failed).
    return P.ErrorReply(kind, f"{type(err).__name__}: {msg}", t,
                        getattr(err, "cosim_call", ""))


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
        that raises ends the step with its ErrorReply, naming that part). The state a
        ``STEP_KEEP`` keeps stays on this side (:meth:`get_state` / :meth:`set_state`)."""
        inputs, outputs = self._fused_ports()
        mode = req.mode
        if type(mode) is not int or mode & ~P.STEP_MODES:
            raise ModelError(f"unit {self.name!r}: Step.mode {mode!r} is not a combination of "
                             "the STEP_* flags")
        try:
            values, derivatives, after = unpack_inputs(self.name, inputs, req)
        except Exception as err:
            err.cosim_call = "SetInputs"
            raise
        done, stepped = self.fused(mode, values, derivatives, after, req.t, req.h)
        try:
            out = pack_outputs(self.name, outputs, self.get_outputs())
        except Exception as err:
            err.cosim_call = "GetOutputs"
            raise
        if stepped is not None:
            out = np.concatenate((pack_outputs(self.name, outputs, stepped), out))
        return P.Stepped(done.t_reached, done.event, done.next_event, out)

    def fused(self, mode: int, values: dict, derivatives: dict, after: dict, t: float,
              h: float) -> tuple[P.StepDone, dict | None]:
        """The parts of a fused Step on values as ``set_inputs`` takes them (the unit's
        own master in this process calls it directly): roll back, keep, set the inputs, step
        (unless ``h == 0``), refresh (``STEP_RESET``: for the inputs ``after``).

        Returns
        -------
        done : StepDone
            Of the step, or of the refresh when there was one.
        stepped : dict or None
            With ``STEP_RESET``: the outputs as the step computed them (before the refresh);
            None otherwise. The current outputs are :meth:`get_outputs`.

        Raises
        ------
        Exception
            Whatever the failing part raised, its ``cosim_call`` naming that part.
        """
        part = "SetState"
        try:
            if mode & P.STEP_ROLLBACK:
                kept = getattr(self, "_kept", None)
                if kept is None:
                    raise ModelError(f"unit {self.name!r}: Step asks to roll back but no "
                                     "state was kept (send STEP_KEEP first)")
                self.set_state(kept)
            part = "GetState"
            if mode & P.STEP_KEEP:
                self._kept = self.get_state()
            part = "SetInputs"
            self.set_inputs(values, derivatives)
            part = "DoStep"
            if h == 0.0 and type(h) is float:
                done = None                 # a refresh at t only
            else:
                done = _do_step(self, P.DoStep(t, h))
            part = "RefreshOutputs"
            stepped = None
            if mode & P.STEP_RESET:
                stepped = self.get_outputs()
                if done is None or not done.event:  # a unit stopped at an event stays there
                    self.set_inputs(after, {})
                    done = self.refresh_outputs()
            elif mode & P.STEP_REFRESH:
                done = self.refresh_outputs()
        except Exception as err:
            err.cosim_call = part
            raise
        return (done if done is not None else P.StepDone(t, False)), stepped

    def hold_state(self, state: P.UnitState) -> None:
        """Make ``state`` the state a fused Step's ``STEP_ROLLBACK`` goes back to (one
        kept elsewhere: on a unit's generated path)."""
        self._kept = state

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


def unpack_inputs(unit: str, shapes: dict, req: P.Step) -> tuple[dict, dict, dict]:
    """The ``SetInputs`` values and derivatives a :class:`~cosim.master.protocol.Step` packs,
    and the values at ``t + h`` of a ``STEP_RESET`` step.

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
    after : dict of str to ndarray
        With ``STEP_RESET``: every input's value at ``t + h`` (views), else empty.

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
    values, derivatives, after = {}, {}, {}
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
        if type(req.mode) is int and req.mode & P.STEP_RESET:
            for name in req.inputs:
                size = math.prod(shapes[name])
                if i + size > n:
                    break
                after[name] = data[i:i + size].reshape(shapes[name])
                i += size
        if i == n:
            return values, derivatives, after
    raise ModelError(f"unit {unit!r}: Step.data holds {n} values, not what its inputs "
                     f"{', '.join(req.inputs)} with orders {req.orders} (mode {req.mode}) "
                     "need")


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
    P.Heartbeat: lambda unit, req: P.Alive(getattr(unit, "t", None), False),
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
    keep : callable or None
        ``keep() -> restore``: keeps the unit's state on its side (what ``bound`` works on
        and has logged); ``restore()`` puts it back (the tick and last logged tick are the
        caller's). Lets a coupling iterate on direct steps; None: the unit cannot.
    refreshes : bool
        A call of ``bound``'s function at one tick (``k_full == k``) logging it is the unit's
        ``RefreshOutputs``; False when it is not (atomic subsystems inside the unit log their
        final outputs only through ``RefreshOutputs``): such a unit is not refreshed by
        direct calls.
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
    keep: object = None
    refreshes: bool = True
