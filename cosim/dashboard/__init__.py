"""A co-simulation or sweep in the browser: the model as a diagram, where each unit runs,
progress, per-unit step times (stragglers stand out), coupling iterations, recoveries and
events, live plots of chosen signals; the same page as a static file after the run.

``CoSimulation(model, config, dashboard=True)`` (or ``"HOST:PORT"``, or a
:class:`Dashboard`), ``cosim run MODEL --dashboard [HOST:PORT]``, ``sweep(...,
dashboard=...)``, ``cosim view MODEL`` and ``cosim report`` use it.

=============  ===========================================================================
module         its one job
=============  ===========================================================================
``board``      the page's state as JSON-ready data, and the deltas that grow it
``monitor``    the master's observer: samples a run, turns it into deltas on its own thread
``decimate``   fewer samples drawn the same (minimum and maximum per time slice)
``diagram``    a model's blocks and wires (and its units' facts) as data for the layout
``server``     the local web server: the page, its scripts, the event stream, a token
``page``       the page's HTML, live or static (everything inline)
``static``     the state of a finished run (``cosim report``) or of a model (``cosim view``)
``sweeps``     the state of a parameter sweep: runs per worker, the results table
=============  ===========================================================================

The JavaScript the page runs ships in ``static/``: ``dashboard.js`` (this package's), uPlot
(charts) and dagre (diagram layout), both MIT-licensed (``static/LICENSES.txt``).
"""

from __future__ import annotations

import sys

from cosim.dashboard.board import Board
from cosim.dashboard.diagram import model_diagram
from cosim.dashboard.page import render
from cosim.dashboard.server import DashboardServer

__all__ = ["Dashboard", "open_dashboard"]


class Dashboard:
    """A local web page showing a co-simulation (or a sweep) while it runs.

    Parameters
    ----------
    address : str, optional
        ``HOST:PORT`` to serve on (default ``127.0.0.1`` and a free port). Anything but a
        loopback host serves the page to the network: the token in :attr:`url` is then its
        only guard.
    signals : sequence of str, optional
        Signals to plot from the start: unit outputs (``unit.port``, ``unit.port[i]``) and
        logged signals as the run's logs name them (``unit/block.port`` inside a unit,
        ``block.port`` at the top level); the page can choose others while the run goes.
    period : float
        Seconds between updates of the page (the page redraws its charts at most once a
        second whatever the period).
    title : str, optional

    Attributes
    ----------
    url : str
        The page, with its random token.
    board : Board
        What the page shows.
    """

    def __init__(self, address: str | None = None, *, signals=None, period: float = 0.5,
                 title: str | None = None):
        self.signals = None if signals is None else list(signals)
        self.period = period
        self.board = Board(title or "cosim", "live")
        self.monitor = None
        self.server = DashboardServer(self.board, self._page, address, self._select)
        self.url = self.server.url

    def _page(self, token: str) -> str:
        return render(self.board.state["title"])

    def _select(self, labels):
        if self.monitor is None:
            return list(labels)
        return self.monitor.select(labels)

    def watch(self, sim) -> None:
        """Show co-simulation ``sim`` (a :class:`~cosim.master.cosimulation.CoSimulation`):
        its diagram now, its run as it goes (the master's observer)."""
        from cosim.dashboard.monitor import RunMonitor
        cfg = sim.config.cosim
        units = {}
        for spec in sim.partition.units:
            backend = cfg.backend_of(spec.name)
            units[spec.name] = {"backend": backend, "label": backend,
                                "kind": {"local": "in process", "ray": "ray",
                                         "remote": "remote"}.get(backend, "process"),
                                "dt": getattr(spec.config, "dt", None),
                                "solver": getattr(spec.config, "solver", None)}
        self.board.publish({"set": {"title": sim.model.name, "mode": "live",
                                    "diagram": model_diagram(sim.model), "units": units,
                                    "progress": {"t": sim.config.t0, "t0": sim.config.t0,
                                                 "t_end": sim.config.t_end, "steps": 0,
                                                 "status": "starting"}}})
        self.monitor = RunMonitor(sim, self.board, self.signals, self.period)
        sim.master.observer = self.monitor

    def update(self, status: str | None = None, message: str | None = None) -> None:
        """Show the watched run as it is now (``status``: ``failed``, ...; default ``done``
        at its end time, else ``paused``), with ``message`` as a mark (a failure)."""
        if self.monitor is None:
            return
        if message:
            self.board.publish({"marks": [{"t": self.monitor.sim.master.T,
                                           "kind": "error", "text": message}]})
        self.monitor.flush(status)

    def detach(self) -> None:
        """Stop watching (the page keeps showing the last state while the server runs)."""
        if self.monitor is not None:
            self.monitor.finish_thread()
            if self.monitor.sim.master.observer is self.monitor:
                self.monitor.sim.master.observer = None

    def close(self) -> None:
        """Stop watching and serving (an open page keeps what it shows)."""
        self.detach()
        self.server.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def open_dashboard(spec) -> tuple[Dashboard, bool]:
    """A :class:`Dashboard` from what a user passed as ``dashboard=``: True (localhost, a
    free port), ``"HOST:PORT"``, or a Dashboard (theirs to close). Returns it and whether
    the caller owns it (and so closes it); a new one's address is printed to stderr."""
    if isinstance(spec, Dashboard):
        return spec, False
    board = Dashboard(None if spec is True else str(spec))
    print(f"cosim dashboard: {board.url}", file=sys.stderr, flush=True)
    return board, True
