"""Sinks: blocks that consume signals."""

from __future__ import annotations

from blocks._support import Params
from cosim.block import Block, Kernel

__all__ = ["Recorder", "Terminator"]


class Recorder(Block):
    """Logs its inputs, whatever ``SimulationConfig.log`` says.

    The simulator logs every input of a Recorder under the key ``"<name>.<port>"``
    (``"rec.in"``, or ``"rec.in1"`` .. ``"rec.inN"``), one row per sample hit of the recorder:
    ``logs["rec.in"]`` has shape ``(n_samples, *signal_shape)`` and ``logs.time_of("rec.in")``
    its times. With a ``sample_time`` the recorder samples its inputs at that rate (a slow
    recorder decimates a fast signal). Recording costs nothing extra in the fast path.

    Parameters
    ----------
    name : str
    n_inputs : int
        Number of inputs; 1 gives the port ``in``, more give ``in1`` .. ``inN``.
    sample_time : None, float or (float, float), optional
        Logging rate; None logs at the base step.

    Ports
    -----
    in, or in1 .. inN : any shapes (each keeps its shape in the logs)

    Notes
    -----
    No outputs, no state, no direct feedthrough. Fast-path kernel: yes.
    """

    output_ports = ()
    direct_feedthrough = False
    records_inputs = True

    def __init__(self, name: str, n_inputs: int = 1, **kw):
        n_inputs = Params(self, name).count("n_inputs", n_inputs)
        ports = ("in",) if n_inputs == 1 else tuple(f"in{i + 1}" for i in range(n_inputs))
        super().__init__(name, inputs=ports, **kw)
        self.n_inputs = n_inputs

    def kernel(self):
        return Kernel({})


class Terminator(Block):
    """Consumes a signal that is deliberately left unused (so its output counts as driven
    somewhere and the diagram documents the choice).

    Ports
    -----
    in : any shape

    Notes
    -----
    No outputs, no state, no direct feedthrough. Fast-path kernel: yes.
    """

    output_ports = ()
    direct_feedthrough = False

    def kernel(self):
        return Kernel({})
