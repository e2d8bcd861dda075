"""Simulation options that travel together: one frozen dataclass instead of many keywords."""

from __future__ import annotations

import enum
import math
import numbers
import os
from dataclasses import dataclass, field, fields

from cosim.errors import ModelError

__all__ = ["Acceleration", "CosimConfig", "Feedthrough", "OnNonConvergence", "Scheme",
           "SimulationConfig",
           "UnitOptions"]


class Scheme(enum.Enum):
    """Orchestration of the units in a macro step."""

    JACOBI = "jacobi"                 #: all units step concurrently on extrapolated inputs
    GAUSS_SEIDEL = "gauss-seidel"     #: units step in the order of the unit graph


class Feedthrough(enum.Enum):
    """What a unit's direct-feedthrough outputs show at a macro point (see
    ``docs/cosim-semantics.md``)."""

    RESOLVE = "resolve"  #: recomputed for the inputs exchanged at the point (no delay)
    DELAY = "delay"      #: as computed at the end of the step: a macro step of delay per unit


class Acceleration(enum.Enum):
    """Update rule of the coupling iteration."""

    NONE = "none"          #: relaxation only
    AITKEN = "aitken"      #: Aitken's dynamic relaxation
    ANDERSON = "anderson"  #: Anderson acceleration
    NEWTON = "newton"      #: Newton with a finite-difference coupling Jacobian


class OnNonConvergence(enum.Enum):
    """What a coupling iteration that does not converge does."""

    RAISE = "raise"        #: raise ConvergenceError (the default)
    CONTINUE = "continue"  #: accept the last iterate and record it in the iteration log


#: Backend of the units another team serves (those with an ``address``), whatever
#: ``CosimConfig.backend`` says: a backend like the others, found in the same registry.
REMOTE_BACKEND = "remote"

#: The unit of a model's top-level blocks that are not atomic subsystems (the glue between
#: the units: sources, sums, scopes; :mod:`cosim.master.partition`).
MAIN_UNIT = "main"


def _real(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _whole(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _check(problems: list, obj, name: str, kind: str, *, low: float | None = None,
           strict: bool = False, infinite: bool = False, none: bool = False) -> None:
    """Append to ``problems`` what is wrong with setting ``name`` of ``obj``.

    ``kind``: ``"real"`` (a number, finite unless ``infinite``), ``"int"`` (a whole number),
    ``"bool"`` or ``"str"``; ``low`` the least value (excluded when ``strict``); ``none``
    allows None.
    """
    value = getattr(obj, name)
    if none and value is None:
        return
    if kind == "bool":
        ok = isinstance(value, bool)
        want = "True or False"
    elif kind == "str":
        ok = isinstance(value, str) and value != ""
        want = "a non-empty string"
    else:
        ok = _whole(value) if kind == "int" else (
            _real(value) and (infinite or math.isfinite(value)) and not math.isnan(value))
        want = "a whole number" if kind == "int" else (
            "a number" if infinite else "a finite number")
        if low is not None:
            want += f" {'>' if strict else '>='} {low:g}"
            ok = ok and (value > low if strict else value >= low)
    if not ok:
        problems.append(f"{name} must be {want}{' or None' if none else ''}, got {value!r}")


@dataclass(frozen=True)
class UnitOptions:
    """Where and how one unit runs (``CosimConfig(units={name: UnitOptions(...)})``; a plain
    dict with these keys is accepted too).

    Parameters
    ----------
    process : str, optional
        Units given the same name share one Ray actor or server process (one message per
        macro step for all of them).
    address : str, optional
        ``tcp://host:port`` of a unit another team serves (``cosim serve``): the unit is
        remote on every backend.
    curve_server_public, curve_client_keys : str, optional
        With ``address``, for a CURVE server: its public key file and this client's key file
        (with its secret).
    num_cpus : float, optional
        Ray: CPUs the unit's actor reserves (default 0: units mostly wait for the master).
    resources : dict of str to float, optional
        Ray: custom resources the actor needs, e.g. ``{"gpu_node": 1}``.
    node : str, optional
        Ray: the id of the node the actor must run on (hard affinity).
    """

    process: str | None = None
    address: str | None = None
    curve_server_public: str | None = None
    curve_client_keys: str | None = None
    num_cpus: float | None = None
    resources: dict | None = field(default=None, hash=False)
    node: str | None = None

    @classmethod
    def of(cls, unit: str, value) -> UnitOptions:
        """``value`` (UnitOptions or a dict of its fields) as UnitOptions for ``unit``.

        Raises
        ------
        ModelError
            For a key that is not a field, naming the unit, the key and the valid keys.
        """
        if isinstance(value, cls):
            return value
        if not isinstance(value, dict):
            raise ModelError(f"CosimConfig.units[{unit!r}] must be a UnitOptions or a dict, "
                             f"got {type(value).__name__}")
        valid = [f.name for f in fields(cls)]
        unknown = [k for k in value if k not in valid]
        if unknown:
            raise ModelError(f"CosimConfig.units[{unit!r}]: unknown option(s) "
                             f"{', '.join(map(repr, unknown))}; valid: {', '.join(valid)}")
        try:
            return cls(**value)
        except ModelError as err:
            raise ModelError(f"CosimConfig.units[{unit!r}]: {err.args[0].partition(': ')[2]}"
                             ) from None

    def __post_init__(self):
        problems = []
        for name in ("process", "address", "curve_server_public", "curve_client_keys", "node"):
            _check(problems, self, name, "str", none=True)
        _check(problems, self, "num_cpus", "real", low=0, none=True)
        if self.resources is not None:
            if not (isinstance(self.resources, dict) and all(
                    isinstance(k, str) and _real(v) and math.isfinite(v) and v >= 0
                    for k, v in self.resources.items())):
                problems.append("resources must be a dict of resource name to a finite "
                                f"amount >= 0, got {self.resources!r}")
        if problems:
            raise ModelError("UnitOptions: " + "; ".join(problems))


_DEFAULT_OPTIONS = UnitOptions()


@dataclass(frozen=True)
class CosimConfig:
    """Options of a co-simulation (``SimulationConfig(cosim=CosimConfig(...))``).

    Parameters
    ----------
    H : float
        Macro step (s); a common multiple of every unit's step. The initial one when adaptive.
    scheme : Scheme or str
        ``"jacobi"`` or ``"gauss-seidel"``.
    extrapolation : int
        Degree (0, 1, 2) of the polynomial a unit's input follows over a macro step: through
        the driving output's values at past macro points (extrapolation), and under
        Gauss–Seidel through its value at the end of the step too when its unit already
        stepped (interpolation). See ``docs/cosim-semantics.md``.
    feedthrough : Feedthrough or str
        ``"resolve"`` (default): direct-feedthrough units recompute their outputs at each
        macro point for the inputs exchanged there, and algebraic couplings are iterated —
        no delay through a chain of units. ``"delay"``: the classic exchange of FMI masters
        (libcosim, FMI-standard Jacobi): outputs are what the unit computed at the end of its
        step, one macro step of delay per feedthrough unit; no couplings to iterate.
    order : tuple of str, optional
        Gauss–Seidel order of the units (every unit once); None derives it from the unit
        graph (upstream first; a cycle entered at its first unit).
    iterate : bool
        Iterate algebraic couplings (groups of units coupled through direct feedthrough) to a
        fixed point each macro step, rolling units back between iterations.
    tolerance : float
        Tolerance of the coupling iteration on the max norm of ``G(c) - c``, relative to
        ``max(1, max|c|)``; an iterate that runs away (1e8 times where it started) is no
        solution (:mod:`cosim.numerics.fixedpoint`).
    max_iterations : int
    relaxation : float
        Relaxation factor (initial factor for Aitken).
    acceleration : Acceleration or str
        ``"none"``, ``"aitken"``, ``"anderson"`` or ``"newton"``.
    on_nonconvergence : OnNonConvergence or str
        ``"raise"`` or ``"continue"`` (recorded in the iteration log).
    adaptive : bool
        Adapt H from the coupling error (extrapolated vs actual inputs), rejecting and rolling
        back steps over tolerance; a macro step ends at a unit's next scheduled event rather
        than step over it. (With any H, a unit's stop event ends the co-simulation at its
        time.)
    rtol, atol : float
        Coupling-error tolerances of the adaptive macro step.
    H_min, H_max : float
        Bounds of the adaptive macro step (s).
    log_every : int
        Collect the units' logs every this many macro steps (and at the end).
    backend : str
        Where units run: ``"local"`` (in process), ``"ray"``, ``"zmq"``, ``"remote"`` (every
        unit served elsewhere), or another backend registered under the ``cosim.backends``
        entry point group (see :mod:`cosim.master.backends`).
    units : dict of str to UnitOptions
        Per-unit options by unit name (plain dicts are converted): Ray placement
        (``num_cpus``, ``resources``, ``node``); ``process`` (units sharing the name share
        one Ray actor or server process); the ``address`` of a unit another team serves
        (remote on every backend). The top-level blocks' unit ``"main"`` runs in the
        master's process unless it is given options here (see :meth:`backend_of`).
    processes : int or "cores", optional
        Host the units that have no options of their own on this many Ray actors / server
        processes, balanced by their number of blocks (``"cores"``: as many as this machine
        has cores). Many small units exchange several times faster that way than with a
        process each, which on few cores costs a context switch per unit and macro step.
        None (default): a process each.
    checkpoint_every : int, optional
        Keep a central checkpoint every this many macro steps; when a unit's actor or process
        dies, it is recreated, every unit is restored from the last checkpoint and the run
        replays from there (fault recovery). None: a unit failure fails the run.
    max_restarts : int
        How often a unit may be recreated (Ray actor restarts) over the run.
    checkpoint_path : str, optional
        Where the last checkpoint is written when a unit fails for good (unreachable past
        ``timeout``), so the run can be resumed from it.
    timeout : float
        Seconds a unit may take to answer one batch of requests (and to come back after a
        failure) before a TransportError.
    connect_timeout : float
        Seconds to reach a unit's server and shake hands; a refused handshake (keys,
        encryption) fails at once, and the error says whether nothing was listening, the
        handshake was refused, or the server was slow.
    address : str, optional
        Ray cluster to join (``"auto"`` or the head's ``"host:port"``; Ray Client
        ``ray://`` addresses are refused); None starts a local Ray instance when the Ray
        backend is used.
    trace : bool
        Record every unit call (for tests and debugging).
    curve : bool
        Encrypt and authenticate the data between the master and the units it starts on
        other hosts (Ray actors) with CURVE keys made for the run; False sends plain
        messages (an explicit opt-out, for trusted networks).
    compiled : bool
        When every unit runs in this process on generated code, step plain macro steps
        through one generated loop (:mod:`cosim.master.compiled`; results bit-identical to
        the protocol path). False sends every exchange through the protocol.
    engine : bool
        Run macro steps through the macro-step program (:mod:`cosim.master.engine`: fewest
        round trips, rollback on the units' side; results bit-identical to the protocol
        path). False sends each unit the protocol's separate requests (the reference).
    partition : int, optional
        Cut the model automatically into this many units of balanced estimated cost, on
        signals after states where it can (:mod:`cosim.master.autosplit`); the logs keep the
        model's own keys. For a model of plain blocks and virtual subsystems.
    runtime_env : dict, optional
        Ray backend: the Ray runtime environment of every unit actor (code and packages
        shipped to the nodes: ``working_dir``, ``py_modules``, ``pip``, ``env_vars``).
    ports : (int, int), optional
        Ray backend: bind each unit actor's data-plane port in ``[low, high]`` (the range a
        firewall between the machines leaves open); None: any free port.
    """

    H: float
    scheme: Scheme | str = Scheme.JACOBI
    extrapolation: int = 0
    feedthrough: Feedthrough | str = Feedthrough.RESOLVE
    order: tuple | None = None
    iterate: bool = True
    tolerance: float = 1e-10
    max_iterations: int = 50
    relaxation: float = 1.0
    acceleration: Acceleration | str = Acceleration.ANDERSON
    on_nonconvergence: OnNonConvergence | str = OnNonConvergence.RAISE
    adaptive: bool = False
    rtol: float = 1e-4
    atol: float = 1e-6
    H_min: float = 0.0
    H_max: float = math.inf
    log_every: int = 100
    backend: str = "local"
    units: dict = field(default_factory=dict, hash=False)
    processes: int | str | None = None
    checkpoint_every: int | None = None
    max_restarts: int = 3
    checkpoint_path: str | None = None
    timeout: float = 60.0
    connect_timeout: float = 10.0
    address: str | None = None
    trace: bool = False
    curve: bool = True
    compiled: bool = True
    engine: bool = True
    partition: int | None = None
    runtime_env: dict | None = field(default=None, hash=False)
    ports: tuple | None = None

    def __post_init__(self):
        problems = []
        if self.partition is not None and not (
                isinstance(self.partition, int) and not isinstance(self.partition, bool)
                and self.partition >= 1):
            problems.append(f"partition must be a whole number of units >= 1, got "
                            f"{self.partition!r}")
        for name, enum_cls in (("scheme", Scheme), ("acceleration", Acceleration),
                               ("on_nonconvergence", OnNonConvergence),
                               ("feedthrough", Feedthrough)):
            try:
                object.__setattr__(self, name, enum_cls(getattr(self, name)))
            except ValueError:
                problems.append(f"{name}={getattr(self, name)!r} is not one of "
                                f"{[e.value for e in enum_cls]}")
        _check(problems, self, "H", "real", low=0, strict=True)
        if not (_whole(self.extrapolation) and self.extrapolation in (0, 1, 2)):
            problems.append(f"extrapolation must be 0, 1 or 2, got {self.extrapolation!r}")
        for name in ("iterate", "adaptive", "trace", "curve", "compiled"):
            _check(problems, self, name, "bool")
        for name in ("tolerance", "relaxation", "timeout", "connect_timeout"):
            _check(problems, self, name, "real", low=0, strict=True)
        for name in ("rtol", "atol", "H_min"):
            _check(problems, self, name, "real", low=0)
        _check(problems, self, "H_max", "real", low=0, strict=True, infinite=True)
        if _real(self.H_min) and _real(self.H_max) and self.H_min > self.H_max:
            problems.append(f"H_min ({self.H_min}) is above H_max ({self.H_max})")
        if self.rtol == 0 and self.atol == 0:
            problems.append("rtol and atol are both 0: the adaptive step could never pass")
        for name in ("max_iterations", "log_every"):
            _check(problems, self, name, "int", low=1)
        _check(problems, self, "checkpoint_every", "int", low=1, none=True)
        _check(problems, self, "max_restarts", "int", low=0)
        _check(problems, self, "backend", "str")
        _check(problems, self, "address", "str", none=True)
        if not (self.checkpoint_path is None
                or isinstance(self.checkpoint_path, (str, os.PathLike))):
            problems.append(f"checkpoint_path must be a path or None, got "
                            f"{self.checkpoint_path!r}")
        if not isinstance(self.units, dict):
            problems.append(f"units must be a dict of unit name to UnitOptions, got "
                            f"{self.units!r}")
        if self.order is not None:
            if isinstance(self.order, str) or not all(isinstance(u, str) for u in self.order):
                problems.append(f"order must be a sequence of unit names, got {self.order!r}")
            else:
                object.__setattr__(self, "order", tuple(self.order))
        if self.processes == "cores":
            object.__setattr__(self, "processes", os.cpu_count() or 1)
        elif self.processes is not None and not (type(self.processes) is int
                                                 and self.processes >= 1):
            problems.append(f"processes must be an int >= 1, 'cores' or None, got "
                            f"{self.processes!r}")
        if problems:
            raise ModelError("CosimConfig: " + "; ".join(problems))
        object.__setattr__(self, "units", {name: UnitOptions.of(name, opts)
                                           for name, opts in self.units.items()})

    def options(self, unit: str) -> UnitOptions:
        """The options of ``unit`` (the defaults when none were given)."""
        return self.units.get(unit, _DEFAULT_OPTIONS)

    def backend_of(self, unit: str) -> str:
        """The registered backend that runs ``unit``: :data:`REMOTE_BACKEND` for a unit with
        an ``address`` (another team serves it); ``"local"`` (the master's own process) for
        the top-level blocks' unit :data:`MAIN_UNIT` unless its options place it (any of
        ``process``, ``num_cpus``, ``resources``, ``node``); else :attr:`backend`.

        The top-level blocks are the master's part of the diagram: run beside the master
        they cost no round trip, so a feedthrough unit fed by them gets its step and its
        refresh at T+H in one message (:mod:`cosim.master.program`), and their events work
        on every backend."""
        opts = self.options(unit)
        if opts.address is not None:
            return REMOTE_BACKEND
        if unit == MAIN_UNIT and opts == _DEFAULT_OPTIONS:
            return "local"
        return self.backend


@dataclass(frozen=True)
class SimulationConfig:
    """Options of one simulation run.

    Parameters
    ----------
    dt : float
        Base step (s). Every discrete sample time must be an integer multiple of it; time is
        counted in integer ticks, ``t = t0 + k*dt``.
    t_end : float
        End time (s), logged inclusively.
    t0 : float
        Start time (s).
    log : tuple of str, optional
        Signals to log, as ``"block.port"``; None logs every block output, and ``"*"`` in the
        selection stands for every block output too (``("*", "scope.in")`` logs them and an
        input). Recorder inputs are always logged.
    fast : bool
        Run the generated step function when every block of the plan has a kernel (results are
        bit-identical to the reference interpreter); False forces the interpreter.
    solver : str
        Continuous-time solver, a name of :data:`cosim.solvers.SOLVERS` (``"SSPRK22"``,
        ``"RK4"``, ``"RK45"``, ``"ESDIRK32"``, ``"BDF"``, ...).
    rtol, atol, dt_min, dt_max, h0 : float
        Adaptive solvers' tolerances and step bounds (s); ``h0=None`` chooses the first step.
    loop_solver : bool
        Solve algebraic loops by iteration; False makes each loop a compile error.
    tolerance_fpi : float
        Tolerance of the algebraic-loop iteration on the max norm of ``G(y) - y``, relative
        to ``max(1, max|y|)`` (:mod:`cosim.run.loops`).
    iterations_max : int
        Fixed-point iterations (and then Newton iterations) before a ConvergenceError.
    iterations_min : int, optional
        Minimum iterations per loop solve; None uses the loop's length (PathSim's rule).
    anderson : int
        Anderson acceleration depth of the loop iteration (0 disables it).
    progress : bool, optional
        Show a progress bar; None shows one only on a terminal and for runs over ~2 s.
    cosim : CosimConfig, optional
        Co-simulate: every top-level atomic subsystem becomes a unit (the other top-level
        blocks one more), advanced by a master. None simulates the model monolithically.
    """

    dt: float
    t_end: float
    t0: float = 0.0
    log: tuple[str, ...] | None = None
    fast: bool = True
    solver: str = "SSPRK22"
    rtol: float = 1e-6
    atol: float = 1e-9
    dt_min: float = 1e-12
    dt_max: float = math.inf
    h0: float | None = None
    loop_solver: bool = True
    tolerance_fpi: float = 1e-12
    iterations_max: int = 100
    iterations_min: int | None = None
    anderson: int = 4
    progress: bool | None = None
    cosim: CosimConfig | None = None

    def __post_init__(self):
        problems = []
        if not (isinstance(self.dt, (int, float)) and math.isfinite(self.dt) and self.dt > 0):
            problems.append(f"dt must be a finite number > 0, got {self.dt!r}")
        if not (isinstance(self.t0, (int, float)) and math.isfinite(self.t0)):
            problems.append(f"t0 must be a finite number, got {self.t0!r}")
        if not (isinstance(self.t_end, (int, float)) and math.isfinite(self.t_end)):
            problems.append(f"t_end must be a finite number, got {self.t_end!r}")
        elif isinstance(self.t0, (int, float)) and self.t_end < self.t0:
            problems.append(f"t_end ({self.t_end}) is before t0 ({self.t0})")
        if self.log is not None:
            if isinstance(self.log, str):
                object.__setattr__(self, "log", (self.log,))
            else:
                object.__setattr__(self, "log", tuple(self.log))
            if not all(isinstance(k, str) for k in self.log):
                problems.append(f"log must be signal names ('block.port'), got {self.log!r}")
        for name in ("fast", "loop_solver"):
            _check(problems, self, name, "bool")
        _check(problems, self, "progress", "bool", none=True)
        for name in ("rtol", "atol", "dt_min"):
            _check(problems, self, name, "real", low=0)
        if self.rtol == 0 and self.atol == 0:
            problems.append("rtol and atol are both 0: an adaptive solver could never pass")
        _check(problems, self, "dt_max", "real", low=0, strict=True, infinite=True)
        if _real(self.dt_min) and _real(self.dt_max) and self.dt_min > self.dt_max:
            problems.append(f"dt_min ({self.dt_min}) is above dt_max ({self.dt_max})")
        _check(problems, self, "h0", "real", low=0, strict=True, none=True)
        _check(problems, self, "tolerance_fpi", "real", low=0, strict=True)
        _check(problems, self, "iterations_max", "int", low=1)
        _check(problems, self, "iterations_min", "int", low=1, none=True)
        _check(problems, self, "anderson", "int", low=0)
        problem = _solver_problem(self.solver)
        if problem:
            problems.append(problem)
        if not (self.cosim is None or isinstance(self.cosim, CosimConfig)):
            problems.append(f"cosim must be a CosimConfig or None, got "
                            f"{type(self.cosim).__name__}")
        if problems:
            raise ModelError("SimulationConfig: " + "; ".join(problems))
        object.__setattr__(self, "dt", float(self.dt))
        object.__setattr__(self, "t0", float(self.t0))
        object.__setattr__(self, "t_end", float(self.t_end))

    @property
    def n_steps(self) -> int:
        """Number of base steps from ``t0`` to ``t_end`` (rounded to the nearest tick)."""
        return int(round((self.t_end - self.t0) / self.dt))


def _solver_problem(name) -> str | None:
    """What is wrong with ``solver=name`` (an unknown name, a class that is no Solver), with
    the valid names and the closest ones; None when it is fine. (An unknown solver is an
    error whether or not the model has continuous state: it would be silently unused, or
    fail once a continuous block is added.)"""
    import difflib

    from cosim.solvers import SOLVERS, get_solver
    try:
        get_solver(name)
    except ValueError as err:
        close = difflib.get_close_matches(str(name), list(SOLVERS), n=3, cutoff=0.5)
        return f"solver: {err}" + (f"; did you mean {', '.join(map(repr, close))}?"
                                   if close else "")
    return None
