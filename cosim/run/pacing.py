"""Pacing a run against the wall clock: progress bars, streaming and real time."""

from __future__ import annotations

import sys
import time

from cosim.errors import ModelError, SimulationError
from cosim.numerics.timegrid import nearest_tick

__all__ = ["PacedRuns", "end_tick", "progress_bar", "run_ticks"]


def end_tick(sim, duration: float | None, t_end: float | None) -> int:
    """The tick a run of ``sim`` ends at: ``duration`` from now, or ``t_end``, or
    ``config.t_end``."""
    cfg = sim.config
    if duration is not None and t_end is not None:
        raise ModelError("run: give duration or t_end, not both")
    if duration is not None:
        t_end = cfg.t0 + sim.k * cfg.dt + duration
    elif t_end is None:
        t_end = cfg.t_end
    k_end = nearest_tick(t_end, cfg.dt, cfg.t0)
    if k_end < sim.k:
        raise SimulationError(f"run: end time {t_end} is before the current time {sim.t}")
    return k_end


def progress_bar(sim, k_end: int):
    """A tqdm bar over the ticks to ``k_end``, or None (``config.progress``; by default
    only on a terminal and for runs of more than 20,000 ticks)."""
    show = sim.config.progress
    if show is None:
        show = sys.stderr.isatty() and k_end - sim.k > 20000
    if not show:
        return None
    from tqdm import tqdm
    return tqdm(total=k_end - sim.k, unit="tick", desc=sim.plan.name, leave=False)


def run_ticks(sim, k_end: int) -> None:
    """Advance ``sim`` to tick ``k_end`` (or a stop), with a progress bar where wanted."""
    bar = progress_bar(sim, k_end)
    if bar is None:
        sim.advance_to(k_end)
        return
    chunk = max(1, (k_end - sim.k) // 200)
    while sim.k < k_end and not sim.stop_requested:
        k0 = sim.k
        sim.advance_to(min(k_end, sim.k + chunk))
        bar.update(sim.k - k0)
    bar.close()


class PacedRuns:
    """Streaming and real-time runs, written once for every run that advances in whole steps:
    a :class:`~cosim.run.simulator.Simulator` (ticks) and a
    :class:`~cosim.master.cosimulation.CoSimulation` (macro steps).

    A class using it provides ``t`` (the current time, s), ``stop_requested`` (bool) and

    * ``_pace_start(duration) -> end``: initialize if needed, clear a stop request, and mark
      where a paced run of ``duration`` (None: to ``config.t_end``) ends;
    * ``_pace_more(end) -> bool``: whether the run has not reached ``end``;
    * ``_pace_to(t_target, end)``: advance by whole steps, at least one, until ``t`` reaches
      ``t_target``, never past ``end``;
    * ``_pace_finish(complete)``: log the end point (``complete``: the run reached its end
      rather than a stop request) and leave the run readable.

    A paced run takes the same steps as ``run`` and logs the same samples, bit for bit: only
    when control returns to the caller differs.
    """

    def run_streaming(self, duration: float | None = None, tickrate: float = 10.0,
                      callback=None):
        """Run as fast as possible, yielding ``callback(self)`` (None: the time) about
        ``tickrate`` times a second, for ``duration`` (default: up to ``config.t_end``).

        The last value is yielded after the end point is logged, so a callback that collects
        ``logs_since`` sees every sample of the run.
        """
        yield from self._paced(duration, tickrate, None, callback)

    def run_realtime(self, duration: float | None = None, speed: float = 1.0,
                     tickrate: float = 30.0, callback=None):
        """Run in step with the wall clock (``speed`` simulated seconds per second), yielding
        ``tickrate`` times a second (see :meth:`run_streaming`).

        Never ahead of the wall clock: each yield waits until the wall clock has caught up
        with the simulated time; a run slower than real time yields as it goes.
        """
        if not speed > 0:
            raise ModelError(f"run_realtime: speed must be > 0, got {speed!r}")
        yield from self._paced(duration, tickrate, speed, callback)

    def _paced(self, duration, tickrate: float, speed: float | None, callback):
        if not tickrate > 0:
            raise ModelError(f"tickrate must be > 0 yields per second, got {tickrate!r}")
        end = self._pace_start(duration)
        period = 1.0 / tickrate
        wall0, t0 = time.perf_counter(), self.t
        chunk = 0.0                     # simulated seconds per advance; 0: one step
        more = self._pace_more(end)
        finished = False
        while more and not self.stop_requested:
            tick_start = time.perf_counter()
            if speed is None:
                # As fast as possible: grow the chunk until one takes about one period.
                while more and not self.stop_requested \
                        and time.perf_counter() - tick_start < period:
                    t_before = self.t
                    self._pace_to(t_before + chunk, end)
                    if time.perf_counter() - tick_start < period / 4:
                        chunk = max(2.0 * chunk, self.t - t_before)
                    more = self._pace_more(end)
            else:
                self._pace_to(t0 + (time.perf_counter() - wall0 + period) * speed, end)
                more = self._pace_more(end)
                lag = wall0 + (self.t - t0) / speed - time.perf_counter()
                if lag > 0:
                    time.sleep(lag)
            if not more:
                self._pace_finish(complete=True)
                finished = True
            yield callback(self) if callback is not None else self.t
        if not finished:                # at the end already, or a stop request
            self._pace_finish(complete=not more)
