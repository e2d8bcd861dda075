"""Discrete-time blocks: difference equations updated at their sample hits."""

from __future__ import annotations

from cosim.block import Block, Kernel, as_signal

__all__ = ["UnitDelay"]


class UnitDelay(Block):
    """``out[k] = in[k-1]``, ``out[0] = initial``.

    Parameters
    ----------
    name : str
    initial : float or array_like
        Output before the first sample (its shape is the signal shape).
    """

    direct_feedthrough = False

    def __init__(self, name: str, initial=0.0, **kw):
        super().__init__(name, **kw)
        self.initial = as_signal(initial)

    def initialize(self, t0):
        self.state["x"] = self.initial.copy()
        self.outputs["out"] = self.state["x"]

    def output_update(self, t, dt):
        self.outputs["out"] = self.state["x"]

    def state_update(self, t, dt):
        self.next_state["x"] = self.inputs["in"]

    def kernel(self):
        return Kernel({"out": "x_x"}, {"x": "u_in"})
