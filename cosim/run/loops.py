"""Algebraic loops: a strongly connected feedthrough component solved at every evaluation.

The loop's blocks are swept in execution order (Gauss–Seidel); the outputs read by a block at or
before their producer in that order are the *tear* variables ``y``. One sweep is a map
``y -> G(y)``; the loop is solved when ``max|G(y) - y| <= tolerance_fpi * max(1, max|y|)``
(max norm, as PathSim; relative to the tear values' size above 1), after at least
``iterations_min`` sweeps (default: the number of blocks in the loop, the longest feedthrough
path inside it). Anderson acceleration speeds up the fixed-point iteration; if it stalls or
runs away (:func:`~cosim.numerics.fixedpoint.ran_away`: diverging, or no solution near the
start), Newton's method on ``G(y) - y`` with a finite-difference Jacobian takes over (from
the starting tear values when the iteration ran away); a Newton iterate that runs away too
is a ConvergenceError naming the loop, the residual and the iterate's size.
"""

from __future__ import annotations

import math

import numpy as np

from cosim.errors import ConvergenceError
from cosim.numerics.fixedpoint import Anderson, Relaxation, converged, magnitude, ran_away
from cosim.numerics.jacobian import FORWARD_REL_STEP, fd_jacobian

__all__ = ["AlgebraicLoop", "LoopOptions"]


class LoopOptions:
    """Options of the loop solver (taken from :class:`~cosim.config.SimulationConfig`).

    Parameters
    ----------
    tolerance_fpi : float
        Max-norm tolerance on ``G(y) - y``, relative to ``max(1, max|y|)``.
    iterations_max : int
        Fixed-point sweeps before Newton takes over (and Newton steps after that).
    iterations_min : int or None
        Minimum sweeps; None uses the loop's block count.
    anderson : int
        Anderson acceleration depth (0 disables it).
    """

    __slots__ = ("tolerance_fpi", "iterations_max", "iterations_min", "anderson")

    def __init__(self, tolerance_fpi=1e-12, iterations_max=100, iterations_min=None, anderson=4):
        self.tolerance_fpi = tolerance_fpi
        self.iterations_max = iterations_max
        self.iterations_min = iterations_min
        self.anderson = anderson


class AlgebraicLoop:
    """Callable that solves one loop in place: ``loop(t, dt)`` leaves consistent outputs.

    Parameters
    ----------
    members : list of (Block, float, list)
        The loop's blocks in execution order, each with its sample period and fan-out list
        ``[(dst_inputs, dst_port, src_outputs, src_port)]``.
    tears : list of (Block, str)
        Output ports read at or before their producer in the sweep order.
    options : LoopOptions
    stats : dict
        Shared statistics; ``loop_iterations`` is incremented here.
    """

    def __init__(self, members, tears, options: LoopOptions, stats: dict, names=None):
        self.members = members
        self.tears = tears
        self.opts = options
        self.stats = stats
        self.names = list(names) if names is not None else [m[0].name for m in members]
        self.min_it = options.iterations_min if options.iterations_min is not None \
            else len(members)
        fan = {id(m[0]): m[2] for m in members}
        self._tear_fans = [[w for w in fan[id(b)] if w[3] == p] for b, p in tears]
        self._shapes = None
        self._accel = Anderson(options.anderson) if options.anderson > 0 else Relaxation()

    def describe(self) -> str:
        return "algebraic loop " + " -> ".join(self.names + self.names[:1])

    def _get(self) -> np.ndarray:
        return np.concatenate([b.outputs[p].ravel() for b, p in self.tears])

    def _set(self, y: np.ndarray) -> None:
        i = 0
        for (b, p), fan, shape in zip(self.tears, self._tear_fans, self._shapes):
            n = int(np.prod(shape))
            b.outputs[p] = y[i:i + n].reshape(shape).copy()
            i += n
            for dins, dport, souts, sport in fan:
                dins[dport] = souts[sport]

    def _sweep(self, t: float, y: np.ndarray) -> np.ndarray:
        self._set(y)
        for blk, bdt, fan in self.members:
            blk.output_update(t, bdt)
            for dins, dport, souts, sport in fan:
                dins[dport] = souts[sport]
        self.stats["loop_iterations"] += 1
        return self._get()

    def __call__(self, t: float, dt: float) -> None:
        opts = self.opts
        if self._shapes is None:
            self._shapes = [b.outputs[p].shape for b, p in self.tears]
        y = self._get()
        g = self._sweep(t, y)
        scale = max(magnitude(y), magnitude(g))
        res = magnitude(g - y)
        it = 1
        accel = self._accel
        accel.reset()
        tol = opts.tolerance_fpi
        first = y
        while it < self.min_it or not converged(res, y, tol) or ran_away(y, scale):
            away = ran_away(y, scale) or ran_away(g, scale)
            if it >= opts.iterations_max or away:
                # A run-away iteration may still have a solution Newton finds: from where
                # it started.
                self._newton(t, first if away else g, it, scale)
                return
            y = accel.update(y, g)
            g = self._sweep(t, y)
            res = magnitude(g - y)
            it += 1
        # The last sweep left every output consistent with the converged tear values.

    def _newton(self, t, y, it, scale):
        """Newton on F(y) = G(y) - y with a forward-difference Jacobian; raise if it fails
        (or its iterate runs away from ``scale``)."""
        opts = self.opts
        tol = opts.tolerance_fpi
        res = math.inf
        for _ in range(opts.iterations_max):
            g = self._sweep(t, y)
            F = g - y
            res = magnitude(F)
            it += 1
            if ran_away(y, scale) or ran_away(g, scale):
                break
            if converged(res, y, tol):
                return
            J = fd_jacobian(lambda v: self._sweep(t, v) - v, y, F, rel=FORWARD_REL_STEP,
                            represented_step=False)
            try:
                y = y - np.linalg.solve(J, F)
            except np.linalg.LinAlgError:
                break
        else:
            g = self._sweep(t, y)
            res = magnitude(g - y)
            if converged(res, y, tol) and not ran_away(y, scale):
                return
        away = ran_away(y, scale)
        raise ConvergenceError(
            self.describe() + (" ran away from where it started (diverging, or no solution "
                               "there) and" if away else ""), it, res, t=t, size=magnitude(y),
            remedy="check the loop gain (|gain| >= 1 diverges under fixed-point iteration; "
                   "a loop gain of exactly 1 has no solution), raise iterations_max or "
                   "tolerance_fpi, or break the loop with a UnitDelay")
