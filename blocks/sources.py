"""Sources: blocks with no inputs that produce signals of time."""

from __future__ import annotations

import math

import numpy as np

from cosim.block import Block, Kernel, as_signal
from cosim.errors import ModelError

__all__ = ["Constant", "Sine"]


class Constant(Block):
    """A constant signal.

    Parameters
    ----------
    name : str
    value : float or array_like
        The output value; its shape is the output shape (a scalar gives ``(1,)``).
    """

    input_ports = ()
    direct_feedthrough = False

    def __init__(self, name: str, value=0.0, **kw):
        super().__init__(name, **kw)
        self.value = as_signal(value)
        self.value.flags.writeable = False   # shared by every tick's output: keep it a value

    def initialize(self, t0):
        self.outputs["out"] = self.value

    def output_update(self, t, dt):
        self.outputs["out"] = self.value

    def kernel(self):
        if self.value.shape != (1,):
            return None
        return Kernel({"out": repr(float(self.value[0]))})


class Sine(Block):
    """``amplitude * sin(2*pi*frequency*t + phase) + bias``.

    Parameters
    ----------
    name : str
    amplitude : float
    frequency : float
        Hz.
    phase : float
        rad.
    bias : float
    """

    input_ports = ()
    direct_feedthrough = False

    def __init__(self, name: str, amplitude=1.0, frequency=1.0, phase=0.0, bias=0.0, **kw):
        super().__init__(name, **kw)
        vals = []
        for pname, v in (("amplitude", amplitude), ("frequency", frequency), ("phase", phase),
                         ("bias", bias)):
            try:
                vals.append(float(v))
            except (TypeError, ValueError):
                raise ModelError(f"Sine {name!r}: {pname} must be a number, got {v!r}") from None
        self.amplitude, self.frequency, self.phase, self.bias = vals
        self._w = 2.0 * math.pi * self.frequency

    def output_update(self, t, dt):
        self.outputs["out"] = np.array(
            [self.amplitude * math.sin(self._w * t + self.phase) + self.bias])

    def kernel(self):
        return Kernel({"out": f"{self.amplitude!r} * math.sin({self._w!r} * t + {self.phase!r})"
                              f" + {self.bias!r}"})
