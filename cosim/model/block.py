"""The block model: what a block is, what it must declare, and the life cycle the simulator drives.

A block is the unit of computation of a diagram (as in pySimBlocks). Ports are dicts of numpy
float64 arrays with a fixed shape per port; discrete state lives in ``state`` / ``next_state``
dicts; parameters are plain attributes fixed at construction. Declarations are checked when a
block *class* is defined (``__init_subclass__``), so a malformed block fails at import time with
its class name rather than deep inside a run.
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
import re
import types
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from cosim.errors import ModelError, SimulationError
from cosim.model.expr import has_expression

NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

#: The empty set of optional inputs, shared (``frozenset()`` allocates 216 bytes per call).
_NONE: frozenset = frozenset()
#: No text ports (Block rule 11), shared and read-only.
_NO_KINDS = types.MappingProxyType({})

__all__ = ["Block", "Kernel", "NAME_RE", "as_signal", "check_sample_time", "has_spec",
           "is_deferred"]


def _recording(init):
    """Wrap a block class's ``__init__`` so every block remembers how it was made.

    The arguments are the block's *specification*: model files are written from it, remote
    units rebuild blocks from it (no pickling), and a block given parameter expressions
    (``"=2*wn"``) is *deferred*: it is built with the evaluated values during the evaluation
    phase, once the workspaces are known.
    """
    # Attributes, not ``self.__dict__`` entries: reading an instance's ``__dict__`` makes
    # Python give it a dict object of its own (64 bytes per block more than the attribute
    # values it keeps otherwise).
    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        if self._spec_args is None:
            # No keywords (most blocks): None, not an empty dict per block.
            self._spec_args = (args, kwargs or None)
            self._spec_init = init
            if has_expression((args[1:], kwargs)):
                name = args[0] if args else kwargs.get("name")
                if not isinstance(name, str) or not NAME_RE.match(name):
                    raise ModelError(f"block name {name!r} is invalid: use letters, digits "
                                     "and '_', starting with a letter")
                self.name = name
                self._deferred = True
                return
        init(self, *args, **kwargs)
    return __init__


def is_deferred(block) -> bool:
    """True if ``block`` waits for the evaluation phase (it was given parameter expressions)."""
    return getattr(block, "_deferred", False)


def has_spec(block) -> bool:
    """True if ``block`` was made through its class's constructor, so :meth:`Block.spec`
    gives its parameters (and :meth:`Block.rebuild` can remake it)."""
    return getattr(block, "_spec_init", None) is not None


def as_signal(value) -> np.ndarray:
    """Return ``value`` as a float64 signal array (scalars become shape ``(1,)``).

    Parameters
    ----------
    value : float or array_like
        A number, or an array of any fixed shape.

    Returns
    -------
    numpy.ndarray
        float64 array; a scalar gives shape ``(1,)``, an array keeps its shape.
    """
    a = np.asarray(value, dtype=np.float64)
    return a.reshape(1) if a.ndim == 0 else a


def check_sample_time(value, where: str):
    """Validate a sample-time declaration and return it normalised.

    Parameters
    ----------
    value : None, float or (float, float)
        ``None`` inherits the simulation base step; ``0`` is continuous time; a positive
        period, optionally with an offset ``(period, offset)``, ``0 <= offset < period``.
    where : str
        Name used in the error message.

    Returns
    -------
    None, float or tuple of float
    """
    if value is None:
        return None
    if isinstance(value, list) and len(value) == 2:     # (period, offset) from a model file
        value = tuple(value)
    if isinstance(value, tuple) and len(value) == 2:
        period, offset = value
        ok = all(isinstance(v, numbers.Real) and math.isfinite(v) for v in value)
        if ok and period > 0 and 0 <= offset < period:
            return (float(period), float(offset))
    elif isinstance(value, numbers.Real) and not isinstance(value, bool):
        if math.isfinite(value) and value >= 0:
            return float(value)
    raise ModelError(f"{where}: sample_time {value!r} is invalid; use None (inherit the base "
                     "step), 0 (continuous), a period > 0, or (period, offset) with "
                     "0 <= offset < period")


@dataclass(frozen=True)
class Kernel:
    """Scalar source code of a block, for the generated fast path.

    The fast path (see :mod:`cosim.fastpath.scalar`) inlines these expressions into one generated step
    function over plain Python floats, instead of calling the block's methods. Each expression
    is Python source over the names ``u_<input port>``, ``x_<state name>``, ``t`` (time of the
    tick), ``dt`` (the block's sample period) and ``math``; parameters are inlined as literals
    (use ``repr(float(p))`` so they round-trip exactly). A kernel must compute *bit for bit* the
    same numbers as the block's own methods: the test suite checks every fast path against the
    reference interpreter.

    Continuous blocks name their state components ``c_0``, ``c_1``, ... and give one
    derivative expression per component; the fast path then integrates them inline when the
    solver is a fixed-step explicit Runge–Kutta method.

    Parameters
    ----------
    outputs : dict of str to str
        Output port -> expression of its (scalar) value.
    state : dict of str to str
        State name -> expression of its next value (all evaluated before any is assigned).
    derivatives : tuple of str
        Expression of ``d c_i / dt`` for each continuous state component ``c_i``.
    cstate : tuple of str, optional
        Expression of each ``c_i`` after the block's state update, for a block whose
        ``state_update`` changes its continuous state between solver intervals (an Integrator
        holding its state within limits); empty when it never does.
    params : dict of str to float
        Values of the names ``p_<name>`` used in the expressions. Blocks whose kernels differ
        only in these values share one template, so the fast path can run many of them as
        one numpy operation (a chain of 1000 lags becomes a handful of vector operations).
    live : list of float, optional
        Values that change between calls of the step function, read as ``l_0``, ``l_1``, ...
        The block keeps this very list and writes into it (e.g. an Inport whose value the
        co-simulation master sets every macro step).
    held : dict of str to str, optional
        A block with modes (``switch_surfaces``): its outputs inside solver steps, the mode
        held (``held_output_update``).
    surfaces : tuple of str, optional
        A block with modes: its switching surfaces (``switch_surfaces``), whose sign changes
        inside a solver step are located. Generated code that holds the modes through its
        steps (ensembles, :mod:`cosim.fastpath.ensemble`) runs a step that changes a sign
        again on the interpreter.
    """

    outputs: dict[str, str]
    state: dict[str, str] = field(default_factory=dict)
    derivatives: tuple[str, ...] = ()
    cstate: tuple[str, ...] = ()
    params: dict[str, float] = field(default_factory=dict)
    live: list | None = None
    held: dict[str, str] = field(default_factory=dict)
    surfaces: tuple[str, ...] = ()


@functools.lru_cache(maxsize=None)
def _signature(init) -> inspect.Signature:
    """The signature of a block class's ``__init__`` (one per class: a model of 100,000 blocks
    asks for it once per block)."""
    return inspect.signature(init)


class _Inputs(dict):
    """Input port dict: reading a port that is not connected names ``block.port``."""

    __slots__ = ("owner",)

    def __missing__(self, port):
        owner = self.owner
        if port in owner.input_names:
            raise SimulationError(
                f"input {owner.name}.{port} is not connected; connect a signal to it "
                f"(model.connect('<block>.<port>', '{owner.name}.{port}'))", block=owner.name)
        raise SimulationError(f"{owner.name} has no input {port!r}; its inputs are "
                              f"{', '.join(owner.input_names) or '(none)'}", block=owner.name)


class Block:
    """Base class of every block.

    How to write a block
    --------------------
    1. Declare ports: class attributes ``input_ports`` / ``output_ports`` (tuples of names;
       single-input/single-output blocks use ``in`` / ``out``, multi-port blocks ``in1``,
       ``in2``, ...). A block whose port count depends on a parameter passes ``inputs=`` /
       ``outputs=`` to ``Block.__init__`` instead.
    2. Declare ``direct_feedthrough`` (class attribute, default True): False when no output
       depends on the *current* input (delays, integrators, sinks). An instance may refine it in
       ``__init__`` (a state-space block with ``D == 0`` has none).
    3. Optionally declare ``sample_time`` (None inherits the base step ``dt``; a period that is an
       integer multiple of ``dt``; or ``(period, offset)``); instances take ``sample_time=``.
    4. Keep parameters as plain attributes set in ``__init__``; validate them there and raise
       :class:`~cosim.errors.ModelError` naming the block.
    5. Implement ``initialize(t0)``: set ``self.state`` (dict of float64 arrays) and, if you
       can, ``self.outputs``. Outputs left unset are filled by one ``output_update(t0, dt)``
       call, made when the block's inputs are ready.
    6. Implement ``output_update(t, dt)``: set every output from the current state and (with
       feedthrough) the current inputs ``self.inputs[port]``. It must be a pure function of
       ``(t, state, inputs)``: loop solvers may call it several times per tick.
    7. If the block has state, implement ``state_update(t, dt)``: write ``self.next_state``
       from ``self.state`` and the inputs. The simulator commits ``next_state`` into ``state``
       after every block of the tick has updated.
    8. Arrays are values: always build new arrays; never write into an array you have put
       in ``outputs`` or ``state`` (logs and downstream blocks hold references to them).
    9. Optionally return a :class:`Kernel` from ``kernel()`` for the generated fast path.
    10. A block whose output jumps when an input crosses a threshold (a *mode*, like a
        relay's on/off) implements ``switch_surfaces``, ``switch_mode`` and
        ``held_output_update``. Evaluated at solver stages, it then keeps its mode through
        every stage of a step (``held_output_update``); the simulator locates the sign change
        of a surface on the solver's dense output, like a zero-crossing event, and calls
        ``switch_mode`` there. Deciding the mode inside stages instead makes one step mix two
        right-hand sides: the solver's error estimate and dense output no longer describe the
        trajectory, and a hysteresis loop can slide along its threshold instead of switching.
        Such a block may also implement ``completed_step(t)``: called after every accepted
        solver step, True asks for ``switch_mode`` at the step's end (an FMU's step event).
    11. A port that carries text is of its own kind: name it in ``input_kinds`` /
        ``output_kinds`` (port -> ``"String"`` or ``"Binary"``, set in ``__init__``); its
        value is an object array of the port's shape holding ``str`` / ``bytes``. Only a
        port of the same kind may be wired to it (compile names both ends otherwise), it is
        logged as such and runs on the interpreter (the fast path carries numbers).

    The base class does the rest: port dicts, unconnected-input errors, sample-time checks,
    commit, and the declaration checks made when the subclass is defined.

    Parameters
    ----------
    name : str
        Block name, unique in its diagram; letters, digits and ``_``.
    sample_time : None, float or (float, float), optional
        Overrides the class's ``sample_time``.
    inputs, outputs : tuple of str, optional
        Override the class's declared ports (for blocks whose port count is a parameter).
    """

    input_ports: ClassVar[tuple[str, ...]] = ("in",)
    output_ports: ClassVar[tuple[str, ...]] = ("out",)
    #: Text ports (rule 11): port -> "String" / "Binary" (an instance sets its own dicts;
    #: the others hold numbers). Read-only class defaults: no dict per block.
    input_kinds: ClassVar = _NO_KINDS
    output_kinds: ClassVar = _NO_KINDS
    direct_feedthrough: ClassVar[bool] = True
    sample_time: ClassVar = None
    #: With an inherited sample time in a model with continuous state, the block is evaluated
    #: at every solver stage too; False keeps it on the base step (atomic subsystems).
    runs_at_stages: ClassVar[bool] = True
    #: The block runs a plan of its own whose signals are logged under the block's path
    #: (``"path/inner.port"``; atomic subsystems).
    nests_plan: ClassVar[bool] = False
    #: How the block was made, ``((args, kwargs or None), the class's own __init__)``: set
    #: on the instance by its constructor (see ``_recording``); None on a block made without.
    _spec_args = None
    _spec_init = None
    #: True while the block waits for the evaluation phase (see :func:`is_deferred`).
    _deferred = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "__init__" in cls.__dict__:
            cls.__init__ = _recording(cls.__dict__["__init__"])
        elif cls.__init__ is Block.__init__:
            # A block class taking Block's own arguments (ZeroOrderHold, Abs, ...) records
            # them too: without a specification it could be neither written to a model
            # file nor rebuilt in a unit's server process.
            cls.__init__ = _recording(Block.__init__)
        where = f"block class {cls.__qualname__}"
        for attr in ("input_ports", "output_ports"):
            ports = getattr(cls, attr)
            if not isinstance(ports, tuple) or not all(isinstance(p, str) and NAME_RE.match(p)
                                                        for p in ports):
                raise TypeError(f"{where}: {attr} must be a tuple of identifiers, got {ports!r}")
            if len(set(ports)) != len(ports):
                raise TypeError(f"{where}: {attr} has duplicate names: {ports!r}")
        if not isinstance(cls.direct_feedthrough, bool):
            raise TypeError(f"{where}: direct_feedthrough must be True or False, "
                            f"got {cls.direct_feedthrough!r}")
        try:
            check_sample_time(cls.sample_time, where)
        except ModelError as err:
            raise TypeError(str(err)) from None
        for meth, nargs in (("initialize", 1), ("output_update", 2), ("state_update", 2),
                            ("derivative", 1), ("finalize", 0), ("switch_surfaces", 1),
                            ("switch_mode", 1), ("held_output_update", 2),
                            ("completed_step", 1)):
            fn = cls.__dict__.get(meth)
            if fn is None:
                continue
            try:
                inspect.signature(fn).bind(None, *range(nargs))
            except TypeError:
                raise TypeError(f"{where}: {meth} must accept {nargs} argument(s) after self "
                                f"({'t0' if meth == 'initialize' else 't, dt' if nargs else ''})"
                                ) from None
        modes = [m for m in ("switch_surfaces", "switch_mode", "held_output_update")
                 if getattr(cls, m) is not getattr(Block, m)]
        if modes and len(modes) != 3:
            raise TypeError(f"{where} implements {', '.join(modes)}: a block with modes must "
                            "implement switch_surfaces, switch_mode and held_output_update")
        if cls.output_ports and cls.output_update is Block.output_update:
            raise TypeError(f"{where} declares outputs {cls.output_ports} but does not "
                            "implement output_update(t, dt)")

    def __init__(self, name: str, *, sample_time=None, inputs: tuple[str, ...] | None = None,
                 outputs: tuple[str, ...] | None = None):
        if not isinstance(name, str) or not NAME_RE.match(name):
            raise ModelError(f"block name {name!r} is invalid: use letters, digits and '_', "
                             "starting with a letter")
        self.name = name
        self.input_names: tuple[str, ...] = tuple(inputs) if inputs is not None \
            else self.input_ports
        self.output_names: tuple[str, ...] = tuple(outputs) if outputs is not None \
            else self.output_ports
        for p in self.input_names + self.output_names:
            if not NAME_RE.match(p):
                raise ModelError(f"{name}: port name {p!r} is invalid")
        if sample_time is not None:
            self.sample_time = check_sample_time(sample_time, f"block {name!r}")
        self.inputs = _Inputs()
        self.inputs.owner = self
        self.outputs: dict[str, np.ndarray] = {}
        self.state: dict[str, np.ndarray] = {}
        self.next_state: dict[str, np.ndarray] = {}
        # Continuous state (1-D float64) of blocks that implement ``derivative``.
        self.cstate: np.ndarray | None = None
        # Expected input shapes, where the block knows them (checked at initialize, naming
        # both ends of the connection).
        self.input_shapes: dict[str, tuple[int, ...]] = {}
        # Inputs that may stay unconnected (the block checks ``port in self.inputs``).
        self.optional_inputs: frozenset[str] = _NONE

    # -- life cycle ------------------------------------------------------------------------

    def initialize(self, t0: float) -> None:
        """Set the initial state (and outputs where possible) at time ``t0``."""

    def output_update(self, t: float, dt: float) -> None:
        """Compute every output at time ``t`` from the state and (feedthrough) the inputs."""

    def state_update(self, t: float, dt: float) -> None:
        """Write ``next_state`` from ``state`` and the inputs at time ``t``."""

    def finalize(self) -> None:
        """Release resources at the end of a run."""

    def derivative(self, t: float) -> np.ndarray:
        """Time derivative of the continuous state ``self.cstate`` at ``t`` (continuous blocks).

        A block with continuous state sets ``self.cstate`` (1-D float64, its initial value) in
        ``initialize`` and implements this method, reading ``self.cstate`` and its inputs. The
        simulator integrates every block's state as one vector: it replaces ``self.cstate`` by
        a view of that vector and overwrites it at every solver stage, so copy it before
        putting it in ``outputs``. Returns an array of the shape of ``cstate``.
        """
        raise NotImplementedError

    def kernel(self) -> Kernel | None:
        """Scalar source for the generated fast path, or None (the default) to opt out."""
        return None

    # -- modes (blocks that switch at a threshold) -----------------------------------------

    def switch_surfaces(self, t: float) -> np.ndarray:
        """Switching functions of the current mode and inputs, shape (m,).

        A component changing sign (``< 0`` to ``>= 0`` or ``> 0`` to ``<= 0``) means the mode
        must change there. Only called for blocks evaluated at solver stages.
        """
        raise NotImplementedError

    def switch_mode(self, t: float) -> None:
        """Take the mode the current inputs call for (at a located sign change, time ``t``).

        Writes ``self.state`` directly (new arrays): the change happens between solver steps,
        not as part of a tick's commit.
        """
        raise NotImplementedError

    def held_output_update(self, t: float, dt: float) -> None:
        """Outputs with the mode held (solver stages and ticks in continuous time)."""
        raise NotImplementedError

    def completed_step(self, t: float) -> bool:
        """The solver accepted a step ending at ``t`` (the state is its end): True asks for
        ``switch_mode(t)`` now (a step event). Optional; the default asks for none."""
        return False

    # -- introspection ---------------------------------------------------------------------

    @property
    def has_derivative(self) -> bool:
        """True if the block has continuous state (implements ``derivative``)."""
        return type(self).derivative is not Block.derivative

    @property
    def has_modes(self) -> bool:
        """True if the block switches modes at thresholds (implements ``switch_surfaces``)."""
        return type(self).switch_surfaces is not Block.switch_surfaces

    @property
    def has_state_update(self) -> bool:
        """True if the block implements ``state_update``."""
        return type(self).state_update is not Block.state_update

    def spec(self) -> dict[str, object]:
        """The construction arguments by parameter name (without ``name``), as given.

        Values may be parameter expressions (``"=k/m"``); see :meth:`build`.
        """
        init = self._spec_init
        if init is None:
            return {}
        args, kwargs = self._spec_args
        sig = _signature(init)
        bound = sig.bind(self, *args, **(kwargs or {})).arguments
        out = {}
        for key, val in list(bound.items())[1:]:
            if key == "name":
                continue
            if isinstance(val, dict) and sig.parameters[key].kind \
                    is inspect.Parameter.VAR_KEYWORD:
                out.update(val)
            else:
                out[key] = val
        return out

    def spec_has_expression(self) -> bool:
        """True when a construction argument is a parameter expression (``"=k/m"``); cheaper
        than looking into :meth:`spec` (no signature binding), for every block of a model."""
        args = self._spec_args
        return args is not None and has_expression(args)

    def rebuild(self, params: dict[str, object]) -> None:
        """(Re)construct this block in place from evaluated parameters (evaluation phase).

        The specification (what the user wrote, expressions included) is kept, so a later
        evaluation with other parameter values builds it again.
        """
        init = self._spec_init
        init(self, self.name, **params)
        self._deferred = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"
