"""Fixed-point acceleration shared by the algebraic-loop solver and the co-simulation master.

Both solve ``y = G(y)`` by iteration: within a block diagram (one sweep of a loop's blocks) and
across units (one rolled-back macro step). The update rules live here once.

Both judge convergence the same way (:func:`converged`: relative to the iterate's size) and
stop an iterate that runs away (:func:`ran_away`), which no residual computed in floating
point can be trusted on: at ``|y| > 2**53 * 0.3`` the sum ``y + 0.3`` is ``y``, so a loop
``y = y + 0.3`` with no solution shows a zero residual there.

Every accelerator has the same two methods: ``reset()`` forgets the history (call it before a
new solve), and ``update(y, g)`` takes the current iterate ``y`` and ``g = G(y)`` (both
ndarray, shape ``(n,)``) and returns the next iterate, shape ``(n,)``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["Aitken", "Anderson", "RUNAWAY_GROWTH", "Relaxation", "converged", "magnitude",
           "ran_away"]

#: An iterate larger than this many times its solve's scale (the size of the first iterate
#: and of its image, at least 1) has run away: the iteration diverges, or the loop has no
#: solution near where it started. (A legitimate solution that far away needs a loop gain
#: within 1e-8 of 1, whose solution rounding already spoils beyond the default tolerances.)
RUNAWAY_GROWTH = 1e8


#: Arrays up to this size take their max norm in Python floats (:func:`magnitude`).
_SMALL = 16


def magnitude(v: np.ndarray) -> float:
    """Max norm of ``v`` (0.0 when empty; nan when it holds a nan)."""
    if v.size > _SMALL:
        return float(np.abs(v).max())
    # A coupling's few values: numpy's abs and max cost ~1.4 µs for what a loop over floats
    # does in ~0.3 (the same value: abs and max are exact).
    m = 0.0
    for x in v.ravel().tolist():
        a = abs(x)
        if a > m:
            m = a
        elif a != a:
            return float("nan")
    return float(m)


def converged(residual: float, iterate: np.ndarray, tolerance: float) -> bool:
    """Whether ``residual = max|G(y) - y|`` meets ``tolerance`` relative to the iterate's
    size: ``residual <= tolerance * max(1, max|y|)`` (absolute below 1), so that a loop
    whose values are 1e6 is not held to a resolution its floating point does not have."""
    return residual <= tolerance * max(1.0, magnitude(iterate))


def ran_away(iterate: np.ndarray, scale: float) -> bool:
    """Whether ``iterate`` is not finite or beyond :data:`RUNAWAY_GROWTH` times ``scale``
    (at least 1)."""
    return not magnitude(iterate) <= RUNAWAY_GROWTH * max(1.0, scale)


class Relaxation:
    """``y <- y + omega * (G(y) - y)`` (plain iteration when ``omega == 1``)."""

    def __init__(self, omega: float = 1.0):
        self.omega = omega

    def reset(self) -> None:
        """Nothing to forget: the rule has no history."""

    def update(self, y: np.ndarray, g: np.ndarray) -> np.ndarray:
        return g if self.omega == 1.0 else y + self.omega * (g - y)


class Aitken:
    """Aitken's dynamic relaxation (Irons–Tuck): ``omega`` adapted from successive residuals."""

    def __init__(self, omega0: float = 1.0):
        self.omega0 = omega0
        self.reset()

    def reset(self) -> None:
        self.omega = self.omega0
        self._r_prev = None

    def update(self, y: np.ndarray, g: np.ndarray) -> np.ndarray:
        r = g - y
        if self._r_prev is not None:
            dr = r - self._r_prev
            denom = float(dr @ dr)
            if denom > 0.0:
                self.omega = -self.omega * float(self._r_prev @ dr) / denom
        self._r_prev = r
        return y + self.omega * r


class Anderson:
    """Anderson acceleration (type II) of depth ``m`` on the residual ``f = G(y) - y``."""

    def __init__(self, m: int = 4):
        self.m = m
        self.reset()

    def reset(self) -> None:
        self._dF: list[np.ndarray] = []
        self._dG: list[np.ndarray] = []
        self._f = None
        self._g = None

    def update(self, y: np.ndarray, g: np.ndarray) -> np.ndarray:
        f = g - y
        out = g
        if self.m > 0 and self._f is not None:
            self._dF.append(f - self._f)
            self._dG.append(g - self._g)
            if len(self._dF) > self.m:
                self._dF.pop(0)
                self._dG.pop(0)
            gamma, *_ = np.linalg.lstsq(np.column_stack(self._dF), f, rcond=None)
            out = g - np.column_stack(self._dG) @ gamma
        self._f, self._g = f, g
        return out

