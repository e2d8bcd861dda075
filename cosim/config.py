"""Simulation options that travel together: one frozen dataclass instead of many keywords."""

from __future__ import annotations

import math
from dataclasses import dataclass

from cosim.errors import ModelError

__all__ = ["SimulationConfig"]


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
        Signals to log, as ``"block.port"``; None logs every block output. Recorder inputs are
        always logged.
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
        Max-norm tolerance of the algebraic-loop iteration.
    iterations_max : int
        Fixed-point iterations (and then Newton iterations) before a ConvergenceError.
    iterations_min : int, optional
        Minimum iterations per loop solve; None uses the loop's length (PathSim's rule).
    anderson : int
        Anderson acceleration depth of the loop iteration (0 disables it).
    progress : bool, optional
        Show a progress bar; None shows one only on a terminal and for runs over ~2 s.
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
        if problems:
            raise ModelError("SimulationConfig: " + "; ".join(problems))
        object.__setattr__(self, "dt", float(self.dt))
        object.__setattr__(self, "t0", float(self.t0))
        object.__setattr__(self, "t_end", float(self.t_end))

    @property
    def n_steps(self) -> int:
        """Number of base steps from ``t0`` to ``t_end`` (rounded to the nearest tick)."""
        return int(round((self.t_end - self.t0) / self.dt))
