"""The master's per-step records: what happened in each macro step attempt, typed."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np

__all__ = ["StepRecord", "StepStatus", "step_log_arrays"]


class StepStatus(Enum):
    """How a macro step attempt ended. The order is the code saved by :func:`step_log_arrays`."""

    ACCEPTED = "accepted"
    """Accepted; every algebraic coupling converged."""
    REJECTED = "rejected"
    """Adaptive macro step over tolerance: rolled back and retried with a smaller H."""
    CONTINUED = "continued"
    """A coupling did not converge and was accepted on request (``on_nonconvergence``)."""
    UNITERATED = "uniterated"
    """An algebraic coupling run without iteration (``iterate=False``); see the residual."""
    RECOVERED = "recovered"
    """A unit failed; every unit was restored from the last central checkpoint."""
    STOPPED = "stopped"
    """A unit's stop event ended the co-simulation at ``t``."""


@dataclass(slots=True)
class StepRecord:
    """One macro step attempt (or co-initialization, recovery, stop) of the master: a value
    (changed only through :func:`dataclasses.replace`; not frozen, because a frozen
    dataclass costs 4x as much to make and the compiled exchange makes one per step).

    Parameters
    ----------
    t : float
        Start of the attempt, s (the time of a recovery or a stop).
    H : float
        Macro step, s; 0.0 for co-initialization, recovery and stop.
    iterations : int
        Most coupling iterations any algebraic coupling took in the attempt.
    residual : float
        Largest final max-norm residual of a coupling (of the uniterated coupling error
        with ``iterate=False``).
    status : StepStatus
    coupling_error : float, optional
        Adaptive macro step: the scaled difference between extrapolated and actual inputs
        (accepted when <= 1).
    message : str, optional
        Why a unit stopped the run, or the failure a recovery answered.
    """

    t: float
    H: float
    iterations: int = 0
    residual: float = 0.0
    status: StepStatus = StepStatus.ACCEPTED
    coupling_error: float | None = None
    message: str | None = None


def step_log_arrays(records: list[StepRecord]) -> dict[str, np.ndarray]:
    """The records as arrays (saved beside the logs): ``t``, ``H``, ``iterations``,
    ``residual`` of shape ``(n,)``, ``status`` as codes into ``status_names``."""
    statuses = list(StepStatus)
    return {"t": np.array([r.t for r in records]), "H": np.array([r.H for r in records]),
            "iterations": np.array([r.iterations for r in records]),
            "residual": np.array([r.residual for r in records]),
            "status": np.array([statuses.index(r.status) for r in records]),
            "status_names": np.array([s.value for s in statuses])}
