"""Diagrams as written by the user: models, subsystems, their ports, signal tags, references.

A :class:`Model` is the top diagram; a :class:`Subsystem` is a diagram used as a block in its
parent, with :class:`Inport` / :class:`Outport` blocks as its ports. Virtual subsystems are
flattened at compile time; atomic ones (``atomic=True``) stay one node with their own plan,
rate and solver — the unit that co-simulation distributes. :class:`Goto` / :class:`From` carry a
signal by tag; :class:`Reference` names a reusable subsystem definition, inlined at evaluation.
Problems are not raised while a diagram is built: compilation collects them all.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from cosim.model.block import NAME_RE, Block, Kernel
from cosim.errors import ModelError

__all__ = ["Connection", "Diagram", "From", "Goto", "Inport", "Model", "Outport", "Reference",
           "Subsystem", "VISIBILITIES"]

VISIBILITIES = ("local", "scoped", "global")


@dataclass(frozen=True, slots=True)
class Connection:
    """A wire from an output port to an input port, both written ``"block.port"``."""

    src: str
    dst: str

    def __str__(self) -> str:
        return f"{self.src} -> {self.dst}"


class Diagram:
    """Blocks and the wires between their ports (the common part of models and subsystems).

    Parameters
    ----------
    name : str
    context : dict, optional
        Workspace variables of this diagram (values or ``"=expr"`` strings), visible to its
        blocks and to the diagrams inside it; inner definitions shadow outer ones.
    """

    def __init__(self, name: str, context: dict | None = None):
        self.name = name
        self.blocks: list = []
        self.connections: list[Connection] = []
        self.context: dict = dict(context or {})
        self.events: list = []

    def add_event(self, *events) -> None:
        """Add zero-crossing or scheduled events (:mod:`cosim.model.events`) naming this
        diagram's blocks; those of a subsystem go with it: an atomic one (a co-simulation
        unit) watches and resets them in its own run. A model's event may also name a block
        inside a top-level atomic subsystem as ``"sub/block"``, and is then that
        subsystem's event (:func:`cosim.model.events.route`)."""
        self.events.extend(events)

    def add(self, *blocks):
        """Add blocks, subsystems or references; returns the last one added."""
        for b in blocks:
            if not isinstance(b, (Block, Subsystem, Reference)):
                raise ModelError(f"{self.name!r}: add() takes blocks, subsystems or references, "
                                 f"got {b!r}")
            self.blocks.append(b)
        return blocks[-1] if blocks else None

    def connect(self, src: str, *dsts: str) -> None:
        """Wire output ``src`` (``"block.port"``) to one or more inputs (fan-out allowed)."""
        if not dsts:
            raise ModelError(f"{self.name!r}: connect({src!r}) needs at least one destination "
                             "'block.port'")
        for d in dsts:
            self.connections.append(Connection(src, d))

    def __getitem__(self, name: str):
        """The block or subsystem called ``name``; a path ``"sub/inner"`` descends."""
        head, _, rest = name.partition("/")
        for b in self.blocks:
            if b.name == head:
                if rest:
                    if not isinstance(b, Diagram):
                        break
                    return b[rest]
                return b
        raise KeyError(f"{self.name!r} has no block {name!r}")

    def __contains__(self, name: str) -> bool:
        try:
            self[name]
        except KeyError:
            return False
        return True

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.name!r}, {len(self.blocks)} blocks, "
                f"{len(self.connections)} wires)")


class Model(Diagram):
    """The top-level diagram.

    Parameters
    ----------
    name : str
        Model name, used in messages and logs.
    parameters : dict, optional
        Model workspace (values or ``"=expr"`` strings): the outermost scope of every
        parameter expression. Parameter studies override these.

    Examples
    --------
    >>> m = Model("demo")
    >>> m.add(Sine("src", amplitude=1.0, frequency=0.5))
    >>> m.add(Gain("g", 2.0))
    >>> m.connect("src.out", "g.in")
    """

    #: The simulation configuration a model file carried (``Model.from_yaml``), else None.
    simulation = None

    def __init__(self, name: str = "model", parameters: dict | None = None):
        super().__init__(name)
        self.parameters: dict = dict(parameters or {})

    def to_yaml(self, path=None, *, simulation=None) -> str:
        """Write this model as a model file (see :mod:`cosim.modelfile`); returns the text.

        ``simulation`` (a SimulationConfig) becomes the file's ``simulation:`` section
        (default: ``self.simulation`` when the model was read from a file).
        """
        from cosim.modelfile import dump_model
        return dump_model(self, path, simulation=simulation)

    @classmethod
    def from_yaml(cls, path_or_text) -> Model:
        """Read a model file (a path or YAML text; see :mod:`cosim.modelfile`).

        The file's ``simulation:`` section is the returned model's ``simulation`` attribute
        (a SimulationConfig, or None). Raises CompileError listing every problem, located.
        """
        from cosim.modelfile import load_model
        return load_model(path_or_text)


class Subsystem(Diagram):
    """A diagram used as one block of its parent; its ports are its Inport/Outport blocks.

    Parameters
    ----------
    name : str
    atomic : bool
        False (virtual): flattened into the parent at compile time. True: compiled into its own
        plan and run as one block (or one co-simulation unit) with its own ``dt`` and solver.
    context : dict, optional
        This diagram's workspace.
    dt : float, optional
        Atomic only: the inner base step (default: the parent's). Also the subsystem's sample
        time in the parent.
    solver : str, optional
        Atomic only: the inner continuous solver (default: the parent's).
    options : dict, optional
        Atomic only: other :class:`~cosim.config.SimulationConfig` fields for the inner plan.
    """

    def __init__(self, name: str, *, atomic: bool = False, context: dict | None = None,
                 dt: float | None = None, solver: str | None = None,
                 options: dict | None = None):
        if not isinstance(name, str) or not NAME_RE.match(name):
            raise ModelError(f"subsystem name {name!r} is invalid: use letters, digits and '_'")
        super().__init__(name, context)
        self.atomic = bool(atomic)
        self.dt = dt
        self.solver = solver
        self.options = dict(options or {})
        if not atomic and (dt is not None or solver is not None or options):
            raise ModelError(f"subsystem {name!r}: dt, solver and options apply to atomic "
                             "subsystems only (pass atomic=True)")

    @property
    def input_names(self) -> tuple[str, ...]:
        """Input ports: the names of its Inport blocks, in the order they were added."""
        return tuple(b.name for b in self.blocks if isinstance(b, Inport))

    @property
    def output_names(self) -> tuple[str, ...]:
        """Output ports: the names of its Outport blocks, in the order they were added."""
        return tuple(b.name for b in self.blocks if isinstance(b, Outport))


class Inport(Block):
    """An input port of a subsystem: inside, a source whose ``out`` is the port's signal.

    In a virtual subsystem it vanishes when flattened. In an atomic subsystem or a unit it
    holds the value set from outside.

    Parameters
    ----------
    name : str
        The port name seen from the parent (``"subsystem.<name>"``).
    shape : tuple of int
        Signal shape.
    initial : float or array_like, optional
        Value before the first input arrives (default zeros): what the inside sees while a
        unit is initialized, before the master exchanges values.
    """

    input_ports = ()
    direct_feedthrough = False

    def __init__(self, name: str, shape=(1,), initial=None, **kw):
        super().__init__(name, **kw)
        self.shape = tuple(int(n) for n in np.atleast_1d(shape))
        self.initial = None if initial is None else \
            np.broadcast_to(np.asarray(initial, dtype=np.float64), self.shape).copy()

    value = None
    derivatives = ()
    t_ref = 0.0
    #: The fast path's live values ``[value, has derivatives, d1, d2, t_ref]`` once a kernel
    #: was asked for (scalar ports only), else None.
    live = None

    def initialize(self, t0):
        if self.value is None:
            self.value = self.initial if self.initial is not None else np.zeros(self.shape)
        self.outputs["out"] = self.value
        self._sync_live()

    def output_update(self, t, dt):
        v = self.value
        d = self.derivatives
        if d:
            # Input polynomial from the master's extrapolation: v + d1*tau + d2*tau^2/2,
            # the same operations as the kernel (bit for bit).
            tau = t - self.t_ref
            v = v + d[0] * tau
            v = v + (d[1] if len(d) > 1 else 0.0 * v) * (0.5 * tau * tau)
        self.outputs["out"] = v

    def _sync_live(self) -> None:
        """Mirror value, derivatives and reference time into the fast path's live list."""
        live = self.live
        if live is None or self.value is None:
            return
        d = self.derivatives
        live[0] = float(self.value[0])
        if d:
            live[1] = 1.0
            live[2] = float(d[0][0])
            live[3] = float(d[1][0]) if len(d) > 1 else 0.0
        else:
            live[1] = live[2] = live[3] = 0.0
        live[4] = float(self.t_ref)

    def kernel(self):
        if self.shape != (1,):
            return None
        self.live = [0.0] * 5
        self._sync_live()
        # l_1 selects the polynomial, so a held input is returned as it is (as above).
        return Kernel({"out": "(l_0 if not l_1 else (l_0 + l_2 * (t - l_4)) + l_3 * "
                              "(0.5 * (t - l_4) * (t - l_4)))"}, live=self.live)

    def set(self, value: np.ndarray, derivatives=(), t_ref: float = 0.0) -> None:
        """Set the value seen inside (from the parent or the co-simulation master).

        Parameters
        ----------
        value : ndarray
            Value at ``t_ref``, shape ``self.shape``.
        derivatives : sequence of ndarray
            Optional first (and second) time derivatives at ``t_ref``: the input then follows
            the polynomial over the coming step (FMI's input derivatives).
        t_ref : float
            Time (s) the value and derivatives refer to.
        """
        self.value = value
        self.derivatives = tuple(derivatives) if derivatives else ()
        self.t_ref = t_ref
        if self.live is not None:
            self._sync_live()


class Outport(Block):
    """An output port of a subsystem: inside, a sink whose ``in`` is the port's signal."""

    output_ports = ()
    direct_feedthrough = True

    def __init__(self, name: str, **kw):
        super().__init__(name, **kw)

    def kernel(self):
        return Kernel({})


class Goto(Block):
    """Sends its input to the :class:`From` blocks of the same tag, without a wire.

    Parameters
    ----------
    name : str
    tag : str
    visibility : str
        ``"local"`` (Froms in the same diagram), ``"scoped"`` (the same diagram and the
        diagrams inside it) or ``"global"`` (anywhere in the model).
    """

    output_ports = ()

    def __init__(self, name: str, tag: str, visibility: str = "local"):
        super().__init__(name)
        if visibility not in VISIBILITIES:
            raise ModelError(f"Goto {name!r}: visibility {visibility!r} is not one of "
                             f"{VISIBILITIES}")
        if not isinstance(tag, str) or not tag:
            raise ModelError(f"Goto {name!r}: tag must be a non-empty string")
        self.tag = tag
        self.visibility = visibility


class From(Block):
    """Outputs the signal of the visible :class:`Goto` with the same tag (innermost wins)."""

    input_ports = ()

    def __init__(self, name: str, tag: str):
        super().__init__(name)
        if not isinstance(tag, str) or not tag:
            raise ModelError(f"From {name!r}: tag must be a non-empty string")
        self.tag = tag

    def output_update(self, t, dt):  # never runs: Goto/From pairs become wires
        raise ModelError(f"From {self.name!r} was not resolved to a Goto")


@dataclass
class Reference:
    """A reusable subsystem definition, inlined at evaluation with parameter overrides.

    Parameters
    ----------
    name : str
        Name of the inlined subsystem in this diagram.
    source : str or callable
        A library name registered with :func:`cosim.model.library.register`, a YAML subsystem file
        path, or (from Python) a factory callable ``f(name) -> Subsystem``. Never an
        importable module path: loading a model file must not run code it names.
    overrides : dict
        Values for the definition's context (they shadow its defaults).
    """

    name: str
    source: object
    overrides: dict = field(default_factory=dict)
