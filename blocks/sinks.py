"""Sinks: blocks that consume signals."""

from __future__ import annotations

import numpy as np

from blocks._support import Params
from cosim.model.block import Block, Kernel

__all__ = ["Recorder", "Scope", "Terminator"]


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


class Scope(Block):
    """Plots its inputs after a run (matplotlib), as a scope in a block diagram would.

    The inputs are also logged like a Recorder's. At the end of a run (``finalize``) the
    figure is drawn: saved to ``path`` when given (PNG, PDF, SVG by extension), else kept as
    ``self.figure``.

    Parameters
    ----------
    name : str
    n_inputs : int
        1 gives the port ``in``; more give ``in1`` .. ``inN`` (one line each).
    path : str, optional
        File to save the figure to.
    title : str, optional
    sample_time : float, optional
        How often it samples (default: the base step).

    Notes
    -----
    No fast-path kernel: it keeps Python lists of its samples for the plot (which a
    checkpoint does not capture).
    """

    output_ports = ()
    direct_feedthrough = False
    records_inputs = True
    #: Parameters naming files the block writes: a model file may give only relative
    #: paths inside the run's folder (checked when the file is read).
    output_files = ("path",)

    def __init__(self, name: str, n_inputs: int = 1, path: str | None = None,
                 title: str | None = None, **kw):
        if not isinstance(n_inputs, int) or n_inputs < 1:
            from cosim.errors import ModelError
            raise ModelError(f"Scope {name!r}: n_inputs must be an integer >= 1, got "
                             f"{n_inputs!r}")
        ports = ("in",) if n_inputs == 1 else tuple(f"in{i + 1}" for i in range(n_inputs))
        super().__init__(name, inputs=ports, **kw)
        self.path = path
        self.title = title
        self.figure = None

    def initialize(self, t0):
        self._t, self._y = [], {p: [] for p in self.input_names}

    def state_update(self, t, dt):
        self._t.append(t)
        for p in self.input_names:
            self._y[p].append(self.inputs[p].ravel().copy())

    def finalize(self):
        if not self._t:
            return
        import matplotlib
        if self.path is not None:
            matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(8, 3.5))
        for p in self.input_names:
            y = np.array(self._y[p])
            for j in range(y.shape[1]):
                ax.step(self._t, y[:, j], where="post",
                        label=f"{self.name}.{p}" + (f"[{j}]" if y.shape[1] > 1 else ""))
        ax.set_xlabel("time [s]")
        ax.set_ylabel("value")
        ax.grid(True, alpha=0.3)
        ax.legend(loc="best", fontsize=8)
        ax.set_title(self.title or self.name)
        fig.tight_layout()
        if self.path is not None:
            fig.savefig(self.path, dpi=110)
            plt.close(fig)
        else:
            self.figure = fig
