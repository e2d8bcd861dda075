"""Signal routing: Mux concatenates signals into one vector, Demux splits a vector.

Both are memoryless with direct feedthrough and no arithmetic: the output values are the
input values, in order.
"""

from __future__ import annotations

import numpy as np

from blocks._support import Params
from cosim.model.block import Block, Kernel
from cosim.errors import SimulationError

__all__ = ["Demux", "Mux"]


def _ports_and_sizes(p: Params, count, sizes, count_name):
    """Number of ports and optional widths; ``sizes`` gives the count when ``count`` is None."""
    if sizes is not None:
        if isinstance(sizes, (str, bytes)) or not hasattr(sizes, "__len__") or not sizes:
            raise p.error("sizes", f"must be a non-empty sequence of widths, got {sizes!r}")
        sizes = tuple(p.count("sizes", s) for s in sizes)
        if count is not None and p.count(count_name, count) != len(sizes):
            raise p.error(count_name, f"is {count!r} but sizes has {len(sizes)} entries; "
                                      "give one of them, or make them agree")
        return len(sizes), sizes
    return p.count(count_name, 2 if count is None else count), None


class Mux(Block):
    """Concatenates its inputs, each flattened, into one vector.

    Parameters
    ----------
    name : str
    n_inputs : int, optional
        Number of inputs (default 2, or ``len(sizes)``).
    sizes : sequence of int, optional
        Width of each input; when given, each input must have shape ``(sizes[i],)``.

    Ports
    -----
    in1 .. inN : any shapes (``(sizes[i],)`` when ``sizes`` is given)
    out : (total number of input elements,)

    Notes
    -----
    Direct feedthrough. Fast-path kernel only for a single scalar input (every other Mux
    output is a vector, which the fast path does not hold).
    """

    def __init__(self, name: str, n_inputs=None, sizes=None, **kw):
        p = Params(self, name)
        n, self.sizes = _ports_and_sizes(p, n_inputs, sizes, "n_inputs")
        super().__init__(name, inputs=tuple(f"in{i + 1}" for i in range(n)), **kw)
        self.n_inputs = n
        if self.sizes is not None:
            self.input_shapes.update({port: (s,) for port, s in zip(self.input_names,
                                                                    self.sizes)})

    def output_update(self, t, dt):
        ins = self.inputs
        self.outputs["out"] = np.concatenate([ins[p].ravel() for p in self.input_names])

    def kernel(self):
        return Kernel({"out": "u_in1"}) if self.n_inputs == 1 else None


class Demux(Block):
    """Splits a vector into consecutive pieces, one per output.

    Parameters
    ----------
    name : str
    n_outputs : int, optional
        Number of outputs (default 2, or ``len(sizes)``). Without ``sizes`` the input is split
        into equal pieces (its length must be a multiple of ``n_outputs``).
    sizes : sequence of int, optional
        Width of each output; the input must then have shape ``(sum(sizes),)``.

    Ports
    -----
    in : (n,)
    out1 .. outN : (sizes[i],), or (n / N,)

    Notes
    -----
    Direct feedthrough. Fast-path kernel only for a single output of a scalar input.
    """

    input_ports = ("in",)

    def __init__(self, name: str, n_outputs=None, sizes=None, **kw):
        p = Params(self, name)
        n, self.sizes = _ports_and_sizes(p, n_outputs, sizes, "n_outputs")
        super().__init__(name, outputs=tuple(f"out{i + 1}" for i in range(n)), **kw)
        self.n_outputs = n
        if self.sizes is not None:
            self.input_shapes["in"] = (sum(self.sizes),)

    def initialize(self, t0):
        # Piece boundaries; for equal pieces they follow from the input's length, found at
        # the first output_update (the input is not known before).
        self._bounds = None if self.sizes is None else np.cumsum((0,) + self.sizes).tolist()

    def output_update(self, t, dt):
        u = self.inputs["in"]
        b = self._bounds
        if b is None:
            n = self.n_outputs
            if u.ndim != 1 or u.shape[0] % n:
                raise SimulationError(f"input {self.name}.in has shape {u.shape}, which does "
                                      f"not split into {n} equal pieces; give sizes=",
                                      t=t, block=self.name)
            w = u.shape[0] // n
            b = self._bounds = list(range(0, u.shape[0] + 1, w))
        for i, port in enumerate(self.output_names):
            self.outputs[port] = u[b[i]:b[i + 1]]

    def kernel(self):
        return Kernel({"out1": "u_in"}) if self.n_outputs == 1 else None
