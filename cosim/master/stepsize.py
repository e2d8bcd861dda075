"""The macro-step grid and the adaptive macro step: the units' common step (the quantum every
macro step is a multiple of), the coupling error of a step, accept/reject, the next size.

The controller is stateless: its run state is the one number the master carries from step to
step, the proposed next macro step (``Master.H``), which every capture and checkpoint holds
(:mod:`~cosim.master.checkpoints`). A step shortened only to stop at an intermediate end time
would skew that proposal and the macro grid; the master makes such a step provisional and
rolls it back before going on (:meth:`Master.run <cosim.master.master.Master.run>`), so the
controller continues with the sequence of the run that never stopped."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from cosim.errors import ModelError
from cosim.numerics.timegrid import floor_ticks

__all__ = ["StepControl"]


class StepControl:
    """Macro step sizes on the grid of the units' steps.

    Parameters
    ----------
    cfg : CosimConfig
    dts : dict of str to float
        Unit -> its base step (s).

    Attributes
    ----------
    quantum : Fraction
        The least common multiple of the units' steps (s); every macro step is a multiple.
    """

    def __init__(self, cfg, dts: dict[str, float]):
        self.cfg = cfg
        q = None
        for dt in dts.values():
            f = Fraction(dt).limit_denominator(10**9)
            q = f if q is None else Fraction(math.lcm(q.numerator, f.numerator),
                                             math.gcd(q.denominator, f.denominator))
        self.quantum = q
        #: The quantum as a float (s), converted once: every macro step needs it.
        self.quantum_s = float(q)
        self._quanta_cache: dict[float, int] = {}
        H = cfg.H
        if not self.is_multiple(H):
            raise ModelError(f"macro step H={H} is not a common multiple of the units' steps "
                             f"({', '.join(f'{u}: {dt:g}' for u, dt in dts.items())}); "
                             f"use a multiple of {float(q):g}")

    def check_end(self, t0: float, t_end: float) -> None:
        """Refuse an end time off the units' common grid ``t0 + n * quantum``: no unit can
        stop there, so the run would log past it.

        Raises
        ------
        ModelError
            Naming ``t_end``, the grid and the two grid points around it.
        """
        n = (t_end - t0) / self.quantum_s
        if math.isfinite(n) and abs(n - round(n)) > 1e-9 * max(1.0, abs(n)):
            q = self.quantum_s
            below, above = t0 + math.floor(n) * q, t0 + math.ceil(n) * q
            raise ModelError(f"t_end={t_end:g} is not on the units' common grid (t0 + a "
                             f"multiple of {q:g} s, the least common multiple of their "
                             f"steps): no unit can stop there; end at {below:g} or "
                             f"{above:g} s")

    def quanta(self, H: float) -> int | None:
        """``H`` in quanta, or None if it is not a multiple."""
        n = self._quanta_cache.get(H)
        if n is None:
            f = Fraction(H).limit_denominator(10**9) / self.quantum
            n = self._quanta_cache[H] = f.numerator if f.denominator == 1 and f > 0 else 0
        return n or None

    def is_multiple(self, H: float) -> bool:
        return self.quanta(H) is not None

    def on_grid(self, H: float) -> float:
        """``H`` if it is a multiple of the quantum, else rounded down to one (at least one
        quantum)."""
        if self.quanta(H) is not None:     # (is_multiple, one call less per macro step)
            return H
        q = float(self.quantum)
        return max(q, floor_ticks(H, q) * q)

    def min_H(self) -> float:
        """The smallest adaptive macro step, s."""
        return max(self.cfg.H_min, float(self.quantum))

    def error(self, keys, outputs: dict, predict) -> float:
        """Scaled max difference between extrapolated and actual inputs at T+H.

        Parameters
        ----------
        keys : iterable of (str, str)
            The outputs that drive inputs.
        outputs : dict
            Their actual values at T+H.
        predict : callable
            ``predict(key)``: the value the extrapolation assumed at T+H.
        """
        cfg = self.cfg
        err = 0.0
        for key in keys:
            pred = predict(key)
            actual = outputs[key]
            if actual.dtype == object:
                continue            # text, held over the step: no coupling error to scale
            scale = cfg.atol + cfg.rtol * np.abs(actual)
            if actual.size:
                err = max(err, float(np.max(np.abs(actual - pred) / scale)))
        return err

    def accept(self, H: float, err: float) -> bool:
        """Whether a step of size ``H`` with coupling error ``err`` is accepted."""
        return err <= 1.0 or H <= self.min_H()

    def propose(self, H: float, err: float, shrink: bool) -> float:
        """The next macro step after one of size ``H`` with error ``err``: smaller after a
        rejection (``shrink``), else larger when calm; always on the grid."""
        p = self.cfg.extrapolation + 1
        factor = 0.9 * (err if err > 0 else 1e-10) ** (-1.0 / (p + 1))
        factor = min(max(factor, 0.2), 0.5) if shrink else min(max(factor, 1.0), 5.0)
        H_new = min(max(H * factor, self.min_H()), self.cfg.H_max)
        q = float(self.quantum)
        n = floor_ticks(H_new, q)
        if not shrink and factor > 1.2:
            n = max(n, round(H / q) + 1)    # growth is never lost to rounding down
        return max(q, min(n * q, self.cfg.H_max))
