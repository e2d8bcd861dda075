"""Exception hierarchy of cosim.

Build-time problems (``ModelError``, ``CompileError``) are distinct from run-time ones
(``SimulationError``, ``ConvergenceError``, ``TransportError``, ``CodecError``), so callers can
tell a bad model from a failed run. Every message names the thing at fault (``block.port``,
connection, unit), the simulation time where there is one, and a remedy where there is one.
"""

from __future__ import annotations


class CosimError(Exception):
    """Base class of every error cosim raises."""


class ModelError(CosimError):
    """A model is malformed in a way found while it is being built or evaluated."""


class Problem(str):
    """One problem's message that also names the block it is about.

    A ``str`` (so lists of problems print and compare as text) with ``block``, the block's
    path (``"sub/gain"``), and ``port``; a model file's loader uses them to point at the
    block's line in the file.
    """

    block: str | None
    port: str | None

    def __new__(cls, message: str, block: str | None = None, port: str | None = None):
        self = super().__new__(cls, message)
        self.block, self.port = block, port
        return self


class CompileError(ModelError):
    """Compilation found one or more problems; ``problems`` lists every one of them.

    Parameters
    ----------
    problems : list of str
        One human-readable line per problem, each naming the block/port at fault.
    """

    def __init__(self, problems: list[str], model: str = "model"):
        self.problems = list(problems)
        self.model = model
        n = len(self.problems)
        lines = "\n".join(f"  {i + 1}. {p}" for i, p in enumerate(self.problems))
        super().__init__(f"{model!r} has {n} problem{'s' if n != 1 else ''}:\n{lines}")


class SimulationError(CosimError):
    """A block failed while the simulation ran.

    Parameters
    ----------
    message : str
        What went wrong.
    t : float, optional
        Simulation time at which it went wrong.
    block : str, optional
        Name (path) of the block at fault.
    """

    def __init__(self, message: str, t: float | None = None, block: str | None = None):
        self.t = t
        self.block = block
        where = []
        if block is not None:
            where.append(f"block {block!r}")
        if t is not None:
            where.append(f"t={t:.9g}")
        prefix = f"[{', '.join(where)}] " if where else ""
        super().__init__(prefix + message)


class ConvergenceError(SimulationError):
    """An iteration (algebraic loop, Newton, co-simulation coupling) did not converge.

    Parameters
    ----------
    what : str
        The loop or coupling, naming its blocks or units.
    iterations : int
        Iterations performed.
    residual : float
        Max-norm residual at the last iteration.
    t : float, optional
        Simulation time.
    remedy : str, optional
        What the user can change.
    size : float, optional
        Max norm of the last iterate (a residual means little once it ran away).
    """

    def __init__(self, what: str, iterations: int, residual: float, t: float | None = None,
                 remedy: str = "", size: float | None = None):
        self.what = what
        self.iterations = iterations
        self.residual = residual
        self.size = size
        msg = f"{what} did not converge after {iterations} iterations (residual {residual:.3g}"
        msg += ")" if size is None else f", iterate magnitude {size:.3g})"
        if remedy:
            msg += f"; {remedy}"
        super().__init__(msg, t=t)


class TransportError(CosimError):
    """A call to a unit over a transport failed or timed out.

    Parameters
    ----------
    unit : str
        Name of the unit.
    method : str
        The protocol call (``do_step``, ``get_state``, ...).
    message : str
        What went wrong.
    t : float, optional
        Simulation time of the call.
    """

    def __init__(self, unit: str, method: str, message: str, t: float | None = None):
        self.unit = unit
        self.method = method
        self.message = message
        self.t = t
        at = f" at t={t:.9g}" if t is not None else ""
        super().__init__(f"unit {unit!r}: {method}{at} failed: {message}")


class StopSimulation(CosimError):
    """Raised by a block (an FMU asking to terminate) to end the run cleanly at time ``t``.

    Not a failure: the simulator ends the run there like a stopping event (the run's end
    time becomes ``t``); a unit reports it to the master as a stop, which ends the
    co-simulation at ``t`` on every backend.

    Parameters
    ----------
    t : float
        Time at which the run ends, s.
    reason : str
        Who asked and why (logged with the stop).
    block : Block, optional
        The block that asked, with ``outputs``: its outputs at ``t`` (port -> value), logged
        as its sample there when ``t`` falls between ticks (an FMU that stopped inside its
        step logs where it stopped, as fmpy does).
    """

    def __init__(self, t: float, reason: str, block=None, outputs: dict | None = None):
        self.t = t
        self.reason = reason
        self.block = block
        self.outputs = outputs
        super().__init__(f"stop at t={t:.9g}: {reason}")


class UnsupportedError(CosimError):
    """A unit cannot do what was asked (e.g. an FMU that cannot save its state)."""


class CodecError(CosimError):
    """A message could not be encoded or decoded (malformed, oversized, wrong version)."""
