"""``SolverOptions``: the settings every solver shares, as one frozen record."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

EPS = float(np.finfo(float).eps)


@dataclass(frozen=True)
class SolverOptions:
    """Options shared by every solver; they travel together, so they are one frozen record.

    Parameters
    ----------
    rtol, atol : float
        Relative and absolute tolerance of adaptive solvers: the scaled error norm
        ``rms(err / (atol + rtol * max(|x|, |x_new|)))`` of an accepted step is <= 1.  Implicit
        solvers also scale their Newton corrections with them, so fixed-step implicit solvers
        use them too.
    dt_min : float
        Smallest step [s] an adaptive solver may *choose*; needing a smaller one raises
        `SimulationError`.  A smaller ``h`` imposed by the caller (a nearby sample hit) is
        still taken.  Never below 10 ulp of ``t``.
    dt_max : float
        Largest step [s] an adaptive solver takes.  Fixed-step solvers ignore it (they take the
        ``h`` they are given).
    h0 : float or None
        First step [s] after `Solver.reset`; None chooses it as Hairer, Norsett & Wanner do.
    newton_tol : float or None
        Convergence tolerance of the Newton iteration of implicit solvers, on the scaled norm of
        the correction.  None: ``max(10 * eps / rtol, min(0.03, sqrt(rtol)))`` (as scipy Radau).
    newton_max : int
        Newton iterations per stage before the iteration is declared failed.
    safety, min_factor, max_factor : float
        Step-size controller: ``h_new = h * clip(safety * err**(-1 / (q + 1)), min_factor,
        max_factor)`` where q is the order of the error estimator.
    fixed : bool
        Run an adaptive solver with fixed steps: take exactly the ``h`` given, never reject.
        The error estimate is still reported in `StepResult.error`.
    """

    rtol: float = 1e-6
    atol: float = 1e-9
    dt_min: float = 1e-12
    dt_max: float = math.inf
    h0: float | None = None
    newton_tol: float | None = None
    newton_max: int = 8
    safety: float = 0.9
    min_factor: float = 0.2
    max_factor: float = 10.0
    fixed: bool = False

    def __post_init__(self):
        problems = []
        if not self.rtol > 0:
            problems.append(f"rtol={self.rtol!r} must be > 0")
        if not self.atol >= 0:
            problems.append(f"atol={self.atol!r} must be >= 0")
        if not 0 <= self.dt_min < self.dt_max:
            problems.append(f"need 0 <= dt_min < dt_max, got dt_min={self.dt_min!r}, "
                            f"dt_max={self.dt_max!r}")
        if self.h0 is not None and not 0 < self.h0 < math.inf:
            problems.append(f"h0={self.h0!r} must be a positive finite step or None")
        if self.newton_tol is not None and not self.newton_tol > 0:
            problems.append(f"newton_tol={self.newton_tol!r} must be > 0 or None")
        if not (isinstance(self.newton_max, int) and self.newton_max >= 1):
            problems.append(f"newton_max={self.newton_max!r} must be an int >= 1")
        if not 0 < self.safety <= 1:
            problems.append(f"safety={self.safety!r} must be in (0, 1]")
        if not 0 < self.min_factor < 1 < self.max_factor:
            problems.append(f"need 0 < min_factor < 1 < max_factor, got "
                            f"{self.min_factor!r}, {self.max_factor!r}")
        if problems:
            raise ValueError("invalid SolverOptions: " + "; ".join(problems))

    @property
    def newton_tolerance(self) -> float:
        """The Newton tolerance actually used (resolves ``newton_tol=None``)."""
        if self.newton_tol is not None:
            return self.newton_tol
        return max(10 * EPS / self.rtol, min(0.03, self.rtol ** 0.5))
