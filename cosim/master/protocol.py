"""The unit protocol: the frozen messages a co-simulation master and a unit exchange.

A *unit* (shaped like an FMI co-simulation slave) is driven by a master through exactly these
calls, each one a request message answered by the reply type listed in :data:`REPLIES`, or by
:class:`ErrorReply`:

=======================  ======================  ==========================
call                     request                 reply
=======================  ======================  ==========================
handshake                :class:`Hello`          :class:`Welcome`
``describe()``           :class:`Describe`       :class:`UnitDescription`
``initialize(t0)``       :class:`Initialize`     :class:`Ok`
``set_inputs(values)``   :class:`SetInputs`      :class:`Ok`
``do_step(t, h)``        :class:`DoStep`         :class:`StepDone`
``refresh_outputs()``    :class:`RefreshOutputs` :class:`StepDone`
``get_outputs()``        :class:`GetOutputs`     :class:`Outputs`
one fused macro step     :class:`Step`           :class:`Stepped`
``get_state()``          :class:`GetState`       :class:`UnitState`
``set_state(s)``         :class:`SetState`       :class:`Ok`
``collect_logs()``       :class:`CollectLogs`    :class:`LogBatch`
``terminate()``          :class:`Terminate`      :class:`Ok`
liveness probe           :class:`Heartbeat`      :class:`Alive`
new units, same process  :class:`Reload`         :class:`Ok`
same, new values         :class:`SetParameters`  :class:`Ok`
=======================  ======================  ==========================

In-process units exchange these objects directly; the remote transports send them over the wire
unchanged (``cluster.codec``). That is why this module is pure Python and numpy: it must never
import msgpack, zmq or ray.

Conventions for every message:

- times are in seconds, as Python floats computed by the sender from integer ticks
  (``t = k * dt``), never accumulated;
- a port value is a numpy array of the port's declared shape (``float64`` for unit ports);
- ``dict`` fields map port or signal names to values; messages holding dicts or arrays are not
  hashable, the others are;
- equality is structural: arrays compare equal when dtype, shape and values agree, NaN equal to
  NaN (see :class:`Message`).

Every message has a stable wire tag in :data:`MESSAGE_TYPES`. The wire carries fields by
position, so adding, removing, reordering or retyping a field changes the wire format and must
bump :data:`PROTOCOL_VERSION`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Any

import numpy as np

from cosim.errors import ModelError

__all__ = [
    "PROTOCOL_VERSION", "MESSAGE_TYPES", "REPLIES",
    "Message", "Request", "Reply", "PortInfo", "ErrorKind",
    "Hello", "Describe", "Initialize", "SetInputs", "DoStep", "RefreshOutputs", "GetOutputs",
    "GetState", "SetState", "CollectLogs", "Terminate", "Heartbeat", "Step", "Reload",
    "SetParameters", "Welcome", "UnitDescription", "Ok", "Outputs", "StepDone", "UnitState",
    "LogBatch", "ErrorReply", "Stepped", "Alive", "FUSED_STEP", "OPTIONAL_INPUTS",
    "STEP_REFRESH", "STEP_RESET", "STEP_KEEP", "STEP_ROLLBACK", "STEP_MODES",
]

#: Version of the message set below; both ends of a connection must agree on it (see
#: ``cluster.codec.check_version``). Version 2 added :class:`RefreshOutputs`, version 3 the
#: fused macro step (:class:`Step`, :class:`Stepped`), version 4 :class:`Reload`, version 5
#: :class:`SetParameters`, version 6 the modes of :class:`Step` (refresh with new inputs,
#: rollback on the unit's side, refresh-only steps) and :attr:`ErrorReply.call`, version 7
#: :class:`Alive` (a heartbeat reports the unit's progress).
PROTOCOL_VERSION = 7


def _same(a: Any, b: Any) -> bool:
    """Structural equality that treats arrays and NaN the way message equality needs."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)
                and a.dtype == b.dtype and a.shape == b.shape
                and bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")))
    if isinstance(a, dict):
        return (isinstance(b, dict) and a.keys() == b.keys()
                and all(_same(v, b[k]) for k, v in a.items()))
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b)


class Message:
    """Base of every protocol message.

    Subclasses are frozen, slotted dataclasses declared with ``eq=False`` so that they inherit
    this structural equality: the plain dataclass ``__eq__`` would compare ndarrays with ``==``
    and fail on any array of more than one element. Messages whose fields are all immutable are
    hashable; those holding dicts set ``__hash__ = None``.
    """

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(_same(getattr(self, f), getattr(other, f)) for f in self.__slots__)

    def __hash__(self) -> int:
        return hash((type(self),) + tuple(getattr(self, f) for f in self.__slots__))


class Request(Message):
    """A message the master sends to a unit."""

    __slots__ = ()


class Reply(Message):
    """A message a unit sends back to the master."""

    __slots__ = ()


class ErrorKind(str, Enum):
    """What kind of failure an :class:`ErrorReply` reports; the master maps each to an error."""

    PROTOCOL = "protocol"
    """The request is not valid now: wrong order, unknown port, wrong shape, version mismatch."""
    UNSUPPORTED = "unsupported"
    """The unit lacks the feature (e.g. ``GetState`` when ``can_get_set_state`` is false)."""
    SIMULATION = "simulation"
    """The unit's model failed while it ran (a ``SimulationError`` inside the unit)."""
    CONVERGENCE = "convergence"
    """An iteration inside the unit did not converge (a ``ConvergenceError``)."""
    CODEC = "codec"
    """The unit could not decode the request."""
    INTERNAL = "internal"
    """Any other exception inside the unit: a bug in the unit, not in the model."""


@dataclass(frozen=True, slots=True)
class PortInfo:
    """One input or output port of a unit.

    Parameters
    ----------
    name : str
        Port name, unique among the unit's inputs (or outputs).
    shape : tuple of int
        Shape of the port value, e.g. ``()`` for a scalar, ``(3,)`` for a 3-vector. Values are
        ``float64`` arrays of exactly this shape.
    sample_time : float
        Outputs: the period (s) at which the value changes, held in between (a discrete
        output); 0.0 when it varies continuously or at every step of the unit. The master
        holds a discrete output over a macro step no longer than its period instead of
        extrapolating it (FMI's discrete variability).
    """

    name: str
    shape: tuple[int, ...]
    sample_time: float = 0.0

    def __post_init__(self):
        if type(self.name) is not str or not self.name:
            raise ModelError(f"port name must be a non-empty str, got {self.name!r}")
        if type(self.shape) is not tuple or not all(
                type(d) is int and d >= 0 for d in self.shape):
            raise ModelError(f"port {self.name!r}: shape must be a tuple of non-negative ints, "
                             f"got {self.shape!r}")


# ---------------------------------------------------------------------------------------------
# Requests (master -> unit)
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True, eq=False)
class Hello(Request):
    """Opens a session; the unit answers :class:`Welcome` or refuses with :class:`ErrorReply`.

    Parameters
    ----------
    protocol_version : int
        The master's :data:`PROTOCOL_VERSION`.
    session : str
        Opaque id the master chose for this run, so a unit server can tell a reconnecting master
        from a new one.
    """

    protocol_version: int
    session: str


@dataclass(frozen=True, slots=True, eq=False)
class Describe(Request):
    """Asks for the unit's :class:`UnitDescription`."""


@dataclass(frozen=True, slots=True, eq=False)
class Initialize(Request):
    """Puts the unit into its initial state at ``t0``; answered by :class:`Ok`.

    Parameters
    ----------
    t0 : float
        Start time, s.
    """

    t0: float


@dataclass(frozen=True, slots=True, eq=False)
class SetInputs(Request):
    """Sets input port values that hold for the next :class:`DoStep`; answered by :class:`Ok`.

    Parameters
    ----------
    values : dict of str to ndarray
        Input name -> value, a ``float64`` array of the port's shape. Inputs not named keep
        their previous value.
    derivatives : dict of str to tuple of ndarray
        Optional time derivatives (first, second) of inputs at the unit's current time (as
        FMI's input derivatives): over the coming step the input follows
        ``value + d1*tau + d2*tau**2/2``. Inputs not named are held constant.
    """

    values: dict[str, np.ndarray]
    derivatives: dict[str, tuple[np.ndarray, ...]] = field(default_factory=dict)
    __hash__ = None


@dataclass(frozen=True, slots=True, eq=False)
class DoStep(Request):
    """Advances the unit from ``t`` to ``t + h``; answered by :class:`StepDone`.

    The unit's own scheduler takes as many micro steps as it needs. A unit refuses ``h <= 0``
    (:class:`ErrorReply` of kind ``PROTOCOL``): outputs for new inputs at the current time
    are asked for with :class:`RefreshOutputs`.

    Parameters
    ----------
    t : float
        Current time of the unit, s; must equal the time the unit reached last.
    h : float
        Macro step, s, ``h > 0``.
    """

    t: float
    h: float


@dataclass(frozen=True, slots=True, eq=False)
class RefreshOutputs(Request):
    """Recomputes the outputs at the unit's current time for the inputs just set, without
    advancing time; answered by :class:`StepDone` (``t_reached`` is the current time).

    The refreshed outputs are logged as this time's sample, replacing one logged there
    before: the master sends it to make feedthrough outputs consistent with exchanged inputs
    (co-initialization, each macro point, the final point).
    """


@dataclass(frozen=True, slots=True, eq=False)
class GetOutputs(Request):
    """Asks for the output values at the unit's current time; answered by :class:`Outputs`."""


@dataclass(frozen=True, slots=True, eq=False)
class GetState(Request):
    """Asks for a snapshot of the unit's full state; answered by :class:`UnitState`."""


@dataclass(frozen=True, slots=True, eq=False)
class SetState(Request):
    """Restores a :class:`GetState` snapshot (rollback, checkpoint); answered by :class:`Ok`.

    Parameters
    ----------
    state : UnitState
        The snapshot, exactly as the same unit returned it.
    """

    state: UnitState
    __hash__ = None


@dataclass(frozen=True, slots=True, eq=False)
class CollectLogs(Request):
    """Asks for the logged samples gathered since the last call; answered by
    :class:`LogBatch`."""


@dataclass(frozen=True, slots=True, eq=False)
class Terminate(Request):
    """Ends the session; the unit releases its resources and answers :class:`Ok`."""


@dataclass(frozen=True, slots=True, eq=False)
class Heartbeat(Request):
    """Liveness probe, valid at any time, even while the unit steps; answered by
    :class:`Alive` (with the unit's progress) at once, never queued behind a step."""


@dataclass(frozen=True, slots=True, eq=False)
class Reload(Request):
    """Replaces every unit of the process that serves the addressed unit by new ones of the
    same names, built from ``unit_file``, as a new process started on it would build them;
    answered by :class:`Ok`. A parameter study runs each run's units in the processes of the
    run before instead of starting new ones. Only a process started to accept it does
    (a server a master spawned for itself, never one another team serves).

    Parameters
    ----------
    unit_file : str
        The text of a unit file (a model file whose top-level atomic subsystems are the
        units).
    """

    unit_file: str


@dataclass(frozen=True, slots=True, eq=False)
class SetParameters(Request):
    """Replaces every unit of the process that serves the addressed unit by new ones built
    from the unit file of the last :class:`Reload` (or the one the process started on) with
    these values of its top-level ``parameters:``, as a :class:`Reload` of that file with
    these values written in would build them, without sending or reading the file again;
    answered by :class:`Ok`. A parameter study sends it instead of a Reload when only
    parameter values change between its runs. Only a process that accepts Reload does.

    Parameters
    ----------
    parameters : dict of str to Any
        Every top-level parameter of the file (the same names), each a value as a model file
        holds it: a number, a string, a bool or nested lists of them.
    """

    parameters: dict[str, Any]

    __hash__ = None


#: The capability (:attr:`UnitDescription.capabilities`) of a unit that serves :class:`Step`.
FUSED_STEP = "fused-step"

#: :attr:`Step.mode` flags. ``STEP_REFRESH``: refresh the outputs after the step for the
#: inputs held (delayed feedthrough). ``STEP_RESET``: after the step, set every input of
#: :attr:`Step.inputs` to the values that follow in ``data`` (values at ``t + h``, no
#: derivatives) and refresh the outputs for them (a macro point's feedthrough refresh sent
#: with the step). ``STEP_KEEP``: the unit keeps its state as it is before this step (on its
#: own side). ``STEP_ROLLBACK``: first go back to the state kept last (iterations, rejected
#: adaptive steps: no state on the wire).
STEP_REFRESH, STEP_RESET, STEP_KEEP, STEP_ROLLBACK = 1, 2, 4, 8
#: Every :attr:`Step.mode` flag.
STEP_MODES = STEP_REFRESH | STEP_RESET | STEP_KEEP | STEP_ROLLBACK

#: The capability of a unit whose inputs may stay unlinked: such an input keeps the unit's
#: own value (an FMU's start value), as FMI importers leave it.
OPTIONAL_INPUTS = "optional-inputs"


@dataclass(frozen=True, slots=True, eq=False)
class Step(Request):
    """One unit's part of a macro step in one message: ``SetInputs``, ``DoStep``, a refresh
    (``RefreshOutputs``, after new inputs with :data:`STEP_RESET`) and ``GetOutputs`` fused,
    with rollback and keeping of the state on the unit's side; its values packed in one
    array. Answered by :class:`Stepped`, or by an :class:`ErrorReply` for the first part
    that failed (the later parts are then not run). Sent to units whose description lists
    :data:`FUSED_STEP`.

    The parts, in order: with :data:`STEP_ROLLBACK` go back to the state kept last; with
    :data:`STEP_KEEP` keep the state; set the inputs (values at ``t`` and derivatives); step
    over ``[t, t+h]`` unless ``h == 0``; with :data:`STEP_RESET` set the inputs to their
    values at ``t + h`` and refresh, else with :data:`STEP_REFRESH` refresh (a unit that
    stopped at an event in the step does not refresh); then the outputs.

    The fields that do not change from step to step come first, so that a sender can encode
    them once (``cluster.codec``).

    Parameters
    ----------
    inputs : tuple of str
        The inputs set, in the order of ``data``; inputs not named keep their value.
    orders : tuple of int
        Per input, how many time derivatives (0, 1 or 2) follow its value in ``data``.
    mode : int
        :data:`STEP_REFRESH`, :data:`STEP_RESET`, :data:`STEP_KEEP`, :data:`STEP_ROLLBACK`
        or'ed together (0: none).
    t : float
        The unit's current time, s.
    h : float
        Macro step, s, ``h >= 0``; ``0.0`` takes no step (a refresh at ``t``).
    data : ndarray
        ``float64``, shape ``(n,)``: per input in order, its value then its derivatives, each
        flattened (C order) from the port's shape; with :data:`STEP_RESET` then every input's
        value at ``t + h`` in the same order.
    """

    inputs: tuple[str, ...]
    orders: tuple[int, ...]
    mode: int
    t: float
    h: float
    data: np.ndarray
    __hash__ = None


# ---------------------------------------------------------------------------------------------
# Replies (unit -> master)
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True, eq=False)
class UnitDescription(Reply):
    """What a unit exposes to the master; the reply to :class:`Describe`.

    Parameters
    ----------
    name : str
        Unit name (its path in the model).
    inputs, outputs : tuple of PortInfo
        Ports in the unit's order; names are unique within each tuple.
    feedthrough : tuple of (str, tuple of str)
        For **every** output, exactly once, the inputs it depends on directly (within the same
        macro step); ``()`` for an output that depends on state only. The master builds its
        algebraic-loop graph from this, so an omitted output is an error, not a default.
    dt : float
        Base step of the unit's own scheduler, s; macro steps are integer multiples of it.
        ``0.0`` means the unit accepts any macro step (continuous or variable-step unit).
    can_get_set_state : bool
        Whether :class:`GetState` / :class:`SetState` are supported (needed for iteration
        and checkpoints).
    capabilities : tuple of str
        Optional features the unit supports, by name. Strings rather than an enum on purpose:
        a peer ignores names it does not know.

    Raises
    ------
    ModelError
        Listing every inconsistency (duplicate port, feedthrough naming an unknown port or
        missing an output, negative or non-finite ``dt``).
    """

    name: str
    inputs: tuple[PortInfo, ...]
    outputs: tuple[PortInfo, ...]
    feedthrough: tuple[tuple[str, tuple[str, ...]], ...]
    dt: float
    can_get_set_state: bool
    capabilities: tuple[str, ...]

    def __post_init__(self):
        problems = []
        if type(self.name) is not str or not self.name:
            problems.append(f"name must be a non-empty str, got {self.name!r}")
        ports_ok = True
        for side in ("inputs", "outputs"):
            ports = getattr(self, side)
            if type(ports) is not tuple or not all(type(p) is PortInfo for p in ports):
                problems.append(f"{side} must be a tuple of PortInfo, got {ports!r}")
                ports_ok = False
                continue
            names = [p.name for p in ports]
            problems += [f"{side[:-1]} {n!r} is declared twice"
                         for n in sorted({n for n in names if names.count(n) > 1})]
        if ports_ok:
            problems += self._feedthrough_problems()
        if isinstance(self.dt, (int, float)) and not isinstance(self.dt, bool):
            # Store a plain float whatever real number was given (np.float64, int), so that
            # equal descriptions compare, hash and encode alike.
            object.__setattr__(self, "dt", float(self.dt))
        if type(self.dt) is not float or not math.isfinite(self.dt) or self.dt < 0.0:
            problems.append(f"dt must be a finite number >= 0, got {self.dt!r}")
        if type(self.can_get_set_state) is not bool:
            problems.append(f"can_get_set_state must be a bool, got {self.can_get_set_state!r}")
        if type(self.capabilities) is not tuple or not all(
                type(c) is str for c in self.capabilities):
            problems.append(f"capabilities must be a tuple of str, got {self.capabilities!r}")
        if problems:
            raise ModelError(f"unit {self.name!r} describes itself inconsistently: "
                             + "; ".join(problems))

    def _feedthrough_problems(self) -> list[str]:
        if type(self.feedthrough) is not tuple or not all(
                type(e) is tuple and len(e) == 2 and type(e[1]) is tuple for e in self.feedthrough):
            return [f"feedthrough must be a tuple of (output, (input, ...)), "
                    f"got {self.feedthrough!r}"]
        inputs = {p.name for p in self.inputs}
        outputs = [p.name for p in self.outputs]
        listed = [out for out, _ in self.feedthrough]
        problems = [f"feedthrough names {out!r}, which is not an output"
                    for out in listed if out not in outputs]
        problems += [f"feedthrough lists output {out!r} more than once"
                     for out in sorted({o for o in listed if listed.count(o) > 1})]
        problems += [f"feedthrough misses output {out!r} (give () if it has no direct inputs)"
                     for out in outputs if out not in listed]
        problems += [f"feedthrough of {out!r} names {dep!r}, which is not an input"
                     for out, deps in self.feedthrough for dep in deps if dep not in inputs]
        return problems


@dataclass(frozen=True, slots=True, eq=False)
class Welcome(Reply):
    """The unit's answer to :class:`Hello`.

    Parameters
    ----------
    protocol_version : int
        The unit's :data:`PROTOCOL_VERSION`.
    unit : UnitDescription
        The unit's description, so the handshake needs no separate :class:`Describe`.
    """

    protocol_version: int
    unit: UnitDescription


@dataclass(frozen=True, slots=True, eq=False)
class Ok(Reply):
    """The request succeeded and has nothing to return."""


@dataclass(frozen=True, slots=True, eq=False)
class Alive(Reply):
    """The reply to :class:`Heartbeat`: the unit's process runs, and how far the unit is.

    A master waiting for a long step tells a slow unit (its ``t`` advances between
    heartbeats) from one whose step makes no progress (answered, ``t`` still) and from a
    frozen or lost process (no answer at all).

    Parameters
    ----------
    t : float or None
        The unit's simulated time now, s: while it steps, the time its step has reached so
        far (a served unit's step advances in chunks of ticks); None when the unit does
        not say.
    stepping : bool
        A step of the unit is under way (the heartbeat was answered beside it).
    """

    t: float | None
    stepping: bool


@dataclass(frozen=True, slots=True, eq=False)
class Outputs(Reply):
    """Output values at the unit's current time; the reply to :class:`GetOutputs`.

    Parameters
    ----------
    values : dict of str to ndarray
        Output name -> value, a ``float64`` array of the port's shape, for every output.
    """

    values: dict[str, np.ndarray]
    __hash__ = None


@dataclass(frozen=True, slots=True, eq=False)
class StepDone(Reply):
    """How far a :class:`DoStep` (or a :class:`RefreshOutputs`) got.

    Parameters
    ----------
    t_reached : float
        Time the unit reached, s; ``t + h`` unless it stopped early at an event.
    event : bool
        True when the unit stopped at an internal event (then ``t_reached < t + h``) and the
        master must synchronise the other units at ``t_reached``.
    next_event : float
        Time of the unit's next scheduled event after ``t_reached`` (inf: none); an adaptive
        master ends a macro step there rather than step over it.
    """

    t_reached: float
    event: bool
    next_event: float = math.inf


@dataclass(frozen=True, slots=True, eq=False)
class UnitState(Reply):
    """A snapshot of a unit's full state; the reply to :class:`GetState`.

    Parameters
    ----------
    t : float
        Time of the snapshot, s.
    data : dict of str to object
        Opaque to the master, meaningful to the unit that produced it. Values nest dicts (str
        keys), lists, ndarrays, and str / int / float / bool / None / bytes leaves. Tuples are
        not allowed: over the wire they would come back as lists, and a restored state must
        equal the saved one exactly.
    """

    t: float
    data: dict[str, Any]
    __hash__ = None


@dataclass(frozen=True, slots=True, eq=False)
class LogBatch(Reply):
    """A batch of logged samples; the reply to :class:`CollectLogs`.

    Parameters
    ----------
    signals : dict of str to (ndarray, ndarray)
        Signal name -> ``(time, values)`` with ``time`` of shape ``(n,)`` in s and ``values`` of
        shape ``(n, *port_shape)``; ``n`` may be 0. Only samples since the previous batch.
    """

    signals: dict[str, tuple[np.ndarray, np.ndarray]]
    __hash__ = None


@dataclass(frozen=True, slots=True, eq=False)
class ErrorReply(Reply):
    """The request failed inside the unit; may answer any request.

    Parameters
    ----------
    kind : ErrorKind
        What failed; the master raises the matching cosim error.
    message : str
        What went wrong, naming the block/port and a remedy where there is one.
    t : float or None
        Simulation time of the failure, s, if there is one.
    call : str
        The part of a fused :class:`Step` that failed (``"DoStep"``, ``"RefreshOutputs"``,
        ...), so the master names the call as for separate requests; ``""`` otherwise.
    """

    kind: ErrorKind
    message: str
    t: float | None = None
    call: str = ""


@dataclass(frozen=True, slots=True, eq=False)
class Stepped(Reply):
    """The reply to :class:`Step`: the last ``StepDone`` of the fused batch and the outputs.

    Parameters
    ----------
    t_reached, event, next_event : float, bool, float
        As :class:`StepDone` (of the refresh when the step asked for one).
    outputs : ndarray
        ``float64``, shape ``(n,)``: every output of the unit, in the order of its
        description, flattened (C order) and concatenated; after a :data:`STEP_RESET` step
        of ``h > 0``, shape ``(2n,)``: the outputs the step computed, then the refreshed ones
        (the same again when the unit stopped at an event).
    """

    t_reached: float
    event: bool
    next_event: float
    outputs: np.ndarray
    __hash__ = None


#: Wire tag of every message. Explicit numbers, never derived from declaration order: a tag is
#: part of the wire format. Requests use 1-31 and replies 32-63 (one-byte msgpack integers).
MESSAGE_TYPES: MappingProxyType[int, type[Message]] = MappingProxyType({
    1: Hello,
    2: Describe,
    3: Initialize,
    4: SetInputs,
    5: DoStep,
    6: GetOutputs,
    7: GetState,
    8: SetState,
    9: CollectLogs,
    10: Terminate,
    11: Heartbeat,
    12: RefreshOutputs,
    13: Step,
    14: Reload,
    15: SetParameters,
    32: Welcome,
    33: UnitDescription,
    34: Ok,
    35: Outputs,
    36: StepDone,
    37: UnitState,
    38: LogBatch,
    39: ErrorReply,
    40: Stepped,
    41: Alive,
})

#: The reply type of each request when it succeeds; any request may instead get an ErrorReply.
REPLIES: MappingProxyType[type[Request], type[Reply]] = MappingProxyType({
    Hello: Welcome,
    Describe: UnitDescription,
    Initialize: Ok,
    SetInputs: Ok,
    DoStep: StepDone,
    RefreshOutputs: StepDone,
    GetOutputs: Outputs,
    GetState: UnitState,
    SetState: Ok,
    CollectLogs: LogBatch,
    Terminate: Ok,
    Heartbeat: Alive,
    Step: Stepped,
    Reload: Ok,
    SetParameters: Ok,
})
