"""A live plot of a running simulation or co-simulation (``cosim run --live``).

The run is driven by its paced modes (``run_streaming``, or ``run_realtime`` at a speed):
about ``tickrate`` times a second the lines of the chosen signals are given the samples
logged so far and the figure is redrawn, one panel per unit as in :mod:`~cosim.run.plotting`.
Works with any matplotlib backend; on a non-interactive one (Agg) the figure is drawn all the
same, so the redraws can be counted.
"""

from __future__ import annotations

from cosim.errors import ModelError
from cosim.run.plotting import panels

__all__ = ["LiveView"]


class LiveView:
    """Lines of ``keys`` kept current while ``sim`` runs.

    Parameters
    ----------
    sim : Simulator or CoSimulation
        Initialized (its logs name the signals).
    keys : list of str
        Logged signals to show (checked by the caller, e.g. with
        :func:`~cosim.run.plotting.select_signals`).
    title : str, optional
    backend : str, optional
        matplotlib backend (default: matplotlib's choice).
    tickrate : float
        Redraws per second of wall time.

    Attributes
    ----------
    redraws : int
        Times the figure was drawn.
    figure : matplotlib.figure.Figure
    """

    def __init__(self, sim, keys, title: str | None = None, backend: str | None = None,
                 tickrate: float = 10.0):
        try:
            import matplotlib
            if backend is not None:
                matplotlib.use(backend)
            import matplotlib.pyplot as plt
        except ImportError as err:
            raise ModelError("the live view needs matplotlib: pip install 'cosim[plot]'") \
                from err
        if not keys:
            raise ModelError("nothing to show live: no signal is logged")
        self.sim = sim
        self.keys = list(keys)
        self.tickrate = tickrate
        self.redraws = 0
        self._plt = plt
        plt.ion()
        groups = panels(self.keys)
        self.figure, axes = plt.subplots(len(groups), 1, sharex=True, squeeze=False,
                                         figsize=(9, 2.2 * len(groups) + 0.8),
                                         layout="constrained")
        self.lines = {}
        for ax, (group, ks) in zip(axes[:, 0], groups.items()):
            for k in ks:
                (self.lines[k],) = ax.plot([], [], label=k)
            ax.set_title(group, loc="left", fontsize=10)
            ax.grid(True, alpha=0.3)
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8,
                      frameon=False)
        self.axes = axes[:, 0]
        self.axes[-1].set_xlabel("time [s]")
        if title:
            self.figure.suptitle(title)

    def run(self, realtime: float | None = None) -> None:
        """Run ``sim`` to its end, redrawing about ``tickrate`` times a second (``realtime``:
        simulated seconds per wall second; None: as fast as possible)."""
        ticks = self.sim.run_streaming(tickrate=self.tickrate) if realtime is None else \
            self.sim.run_realtime(speed=realtime, tickrate=self.tickrate)
        for _ in ticks:
            self.update()

    def update(self) -> None:
        """Give every line the samples logged so far (first component of a vector) and
        redraw."""
        logs = self.sim.logs
        for k, line in self.lines.items():
            values = logs[k]
            line.set_data(logs.time_of(k), values.reshape(len(values), -1)[:, 0])
        for ax in self.axes:
            ax.relim()
            ax.autoscale_view()
        self.figure.canvas.draw()
        self.figure.canvas.flush_events()
        self.redraws += 1

    def close(self) -> None:
        """Close the figure."""
        self._plt.close(self.figure)
