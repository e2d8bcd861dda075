"""Time on the integer tick grid: seconds <-> ticks, and when two times count as the same.

Time is counted in integer ticks of a base step, ``t = t0 + k*dt``, computed and never
accumulated. Durations given in seconds (sample times, periods, macro steps) are converted to
ticks once, with a relative tolerance for the rounding of decimal inputs such as ``0.1``.
Times that come out of floating-point arithmetic (a solver's ``t + h``, a unit's clock seen by
the master) are compared with a tolerance relative to their magnitude, floored at 1 s so that
times near zero are not held to an absolute precision they cannot have.

Named tolerances:

- :data:`CLOCK_RTOL` (1e-12): two times of one clock in one process (an event time against
  the solver's time, a scheduled event against the current tick).
- :data:`EXCHANGE_RTOL` (1e-9): times that crossed a unit boundary or were formed from a
  different step (the master's macro time against a unit's clock, the end of a run).
- :data:`TICK_RTOL` (1e-9): a duration is a whole number of ticks.
"""

from __future__ import annotations

import math

__all__ = ["CLOCK_RTOL", "EXCHANGE_RTOL", "TICK_RTOL", "TICK_SLACK", "floor_ticks",
           "nearest_tick", "same_time", "tick_time", "ticks", "time_tolerance"]

#: Relative tolerance for two times of one clock in one process.
CLOCK_RTOL = 1e-12
#: Relative tolerance for times exchanged between units or formed from different steps.
EXCHANGE_RTOL = 1e-9
#: Relative tolerance for a duration to count as a whole number of ticks.
TICK_RTOL = 1e-9
#: Fraction of a tick by which a duration may fall short and still count the tick in
#: :func:`floor_ticks` (absorbs the rounding of ``duration / dt``).
TICK_SLACK = 1e-9


def ticks(seconds: float, dt: float, rtol: float = TICK_RTOL) -> int | None:
    """``seconds / dt`` as an integer if it is one to a relative tolerance, else None.

    Parameters
    ----------
    seconds : float
        Duration (s), >= 0.
    dt : float
        Tick length (s), > 0.
    rtol : float
        Accept ``n`` when ``|n*dt - seconds| <= rtol * max(seconds, dt)``.

    Returns
    -------
    int or None
        ``n = round(seconds / dt)``, or None when ``seconds`` is not within tolerance of it.
    """
    n = round(seconds / dt)
    return n if abs(n * dt - seconds) <= rtol * max(abs(seconds), dt) else None


def floor_ticks(seconds: float, dt: float) -> int:
    """The number of whole ticks in ``seconds``, a duration a hair short still counting.

    Returns ``floor(seconds / dt + TICK_SLACK)``.
    """
    return math.floor(seconds / dt + TICK_SLACK)


def tick_time(k: int, dt: float, t0: float = 0.0) -> float:
    """The time of tick ``k``: ``t0 + k*dt`` (s), computed, never accumulated."""
    return t0 + k * dt


def nearest_tick(t: float, dt: float, t0: float = 0.0) -> int:
    """The tick nearest to time ``t``: ``round((t - t0) / dt)`` (ties to even)."""
    return int(round((t - t0) / dt))


def time_tolerance(t: float, rel: float) -> float:
    """Absolute tolerance (s) for times near ``t``: ``rel * max(1, |t|)``."""
    return rel * max(1.0, abs(t))


def same_time(a: float, b: float, rel: float) -> bool:
    """True if ``|a - b| <= rel * max(1, |b|)``.

    Parameters
    ----------
    a, b : float
        Times (s). ``b`` is the reference: its magnitude scales the tolerance.
    rel : float
        One of the named tolerances (:data:`CLOCK_RTOL`, :data:`EXCHANGE_RTOL`).
    """
    return abs(a - b) <= time_tolerance(b, rel)
