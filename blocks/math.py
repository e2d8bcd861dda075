"""Math operators: memoryless blocks with direct feedthrough."""

from __future__ import annotations

import numpy as np

from cosim.block import Block, Kernel
from cosim.errors import ModelError

__all__ = ["Gain", "Sum"]


class Gain(Block):
    """``out = k * in`` (scalar ``k``) or ``out = K @ in`` (matrix ``K``).

    Parameters
    ----------
    name : str
    k : float or array_like
        Scalar gain, or a matrix of shape ``(n_out, n_in)``.
    """

    def __init__(self, name: str, k=1.0, **kw):
        super().__init__(name, **kw)
        k = np.asarray(k, dtype=np.float64)
        if k.ndim == 0:
            self.k = float(k)
        elif k.ndim == 2:
            self.k = k
            self.input_shapes["in"] = (k.shape[1],)
        else:
            raise ModelError(f"Gain {name!r}: k must be a scalar or a 2-D matrix, got shape "
                             f"{k.shape}")

    def output_update(self, t, dt):
        if isinstance(self.k, float):
            self.outputs["out"] = self.k * self.inputs["in"]
        else:
            self.outputs["out"] = self.k @ self.inputs["in"]

    def kernel(self):
        return Kernel({"out": f"{self.k!r} * u_in"}) if isinstance(self.k, float) else None


class Sum(Block):
    """Signed sum of the inputs ``in1``, ``in2``, ... : ``out = ±in1 ±in2 ...``.

    Parameters
    ----------
    name : str
    signs : str
        One ``+`` or ``-`` per input, e.g. ``"+-"`` (the default).
    """

    def __init__(self, name: str, signs: str = "++", **kw):
        if not isinstance(signs, str) or not signs or set(signs) - {"+", "-"}:
            raise ModelError(f"Sum {name!r}: signs must be a string of '+' and '-', "
                             f"got {signs!r}")
        super().__init__(name, inputs=tuple(f"in{i + 1}" for i in range(len(signs))), **kw)
        self.signs = signs

    def initialize(self, t0):
        pass

    def output_update(self, t, dt):
        ins = self.inputs
        names = self.input_names
        acc = ins[names[0]] if self.signs[0] == "+" else -ins[names[0]]
        # Accumulate left to right: the kernel's expression does the same, bit for bit.
        for s, p in zip(self.signs[1:], names[1:]):
            acc = acc + ins[p] if s == "+" else acc - ins[p]
        self.outputs["out"] = acc

    def kernel(self):
        first = ("" if self.signs[0] == "+" else "-") + f"u_{self.input_names[0]}"
        rest = "".join(f" {s} u_{p}" for s, p in zip(self.signs[1:], self.input_names[1:]))
        return Kernel({"out": f"{first}{rest}"})
