"""Continuous-time blocks: their state is integrated by the simulator's solver.

Each block sets ``self.cstate`` (its initial continuous state, 1-D float64) in ``initialize``
and supplies ``derivative(t)``; the simulator integrates the concatenated state of all blocks
(bdsim's getstate0 / setstate / deriv). ``cstate`` is a view the solver overwrites, so outputs
are copies of it.
"""

from __future__ import annotations

import numpy as np

from cosim.block import Block, Kernel, as_signal
from cosim.errors import ModelError

__all__ = ["Integrator"]


class Integrator(Block):
    """``out = x``, ``dx/dt = in``, with optional limits and a reset input.

    Ports: ``in`` (shape of ``initial``), optional ``reset`` (scalar; a rising edge through
    zero at a tick sets ``x`` back to ``initial``); ``out`` (shape of ``initial``).

    Parameters
    ----------
    name : str
    initial : float or array_like
        Initial state; its length is the signal width.
    lower, upper : float, optional
        Limits: the state stops at a limit (its derivative is zeroed while it pushes outwards)
        and the output is clipped to them.
    """

    direct_feedthrough = False

    def __init__(self, name: str, initial=0.0, lower=None, upper=None, **kw):
        super().__init__(name, inputs=("in", "reset"), **kw)
        self.optional_inputs = frozenset({"reset"})
        self.initial = as_signal(initial).ravel()
        self.lower = -np.inf if lower is None else float(lower)
        self.upper = np.inf if upper is None else float(upper)
        if not self.lower < self.upper:
            raise ModelError(f"Integrator {name!r}: need lower < upper, got {lower}, {upper}")
        self.limited = lower is not None or upper is not None
        self.input_shapes["in"] = self.initial.shape

    def initialize(self, t0):
        self.cstate = self.initial.copy()
        self.outputs["out"] = self.initial.copy()
        self.state["reset_prev"] = np.zeros(1)

    def output_update(self, t, dt):
        x = self.cstate
        self.outputs["out"] = np.clip(x, self.lower, self.upper) if self.limited else x.copy()

    def derivative(self, t):
        u = self.inputs["in"]
        if not self.limited:
            return u
        x = self.cstate
        return np.where(((x <= self.lower) & (u < 0)) | ((x >= self.upper) & (u > 0)), 0.0, u)

    def kernel(self):
        if self.limited or "reset" in self.inputs or self.initial.shape != (1,):
            return None
        return Kernel({"out": "c_0"}, {"reset_prev": "x_reset_prev"}, ("u_in",))

    def state_update(self, t, dt):
        # Limits and resets act on the continuous state in place, between solver intervals.
        if self.limited:
            np.clip(self.cstate, self.lower, self.upper, out=self.cstate)
        if "reset" in self.inputs:
            r = self.inputs["reset"]
            if self.state["reset_prev"][0] <= 0.0 < r[0]:
                self.cstate[:] = self.initial
            self.next_state["reset_prev"] = r.copy()
