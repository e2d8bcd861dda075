"""Sinks: blocks that consume signals."""

from __future__ import annotations

from cosim.block import Block, Kernel

__all__ = ["Recorder", "Terminator"]


class Recorder(Block):
    """Logs its inputs (keys ``"name.in"`` or ``"name.in1"``, ...), whatever ``config.log`` says.

    Parameters
    ----------
    name : str
    n_inputs : int
        Number of inputs; 1 gives the port ``in``, more give ``in1`` .. ``inN``.
    """

    output_ports = ()
    direct_feedthrough = False
    records_inputs = True

    def __init__(self, name: str, n_inputs: int = 1, **kw):
        ports = ("in",) if n_inputs == 1 else tuple(f"in{i + 1}" for i in range(n_inputs))
        super().__init__(name, inputs=ports, **kw)

    def kernel(self):
        return Kernel({})


class Terminator(Block):
    """Consumes a signal that is deliberately left unused."""

    output_ports = ()
    direct_feedthrough = False

    def kernel(self):
        return Kernel({})
