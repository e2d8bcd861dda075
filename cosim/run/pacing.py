"""Pacing a run against the wall clock: progress bars, streaming and real time."""

from __future__ import annotations

import sys
import time

from cosim.errors import ModelError, SimulationError
from cosim.numerics.timegrid import nearest_tick

__all__ = ["end_tick", "paced", "progress_bar", "run_ticks"]


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


def paced(sim, duration: float | None, tickrate: float, speed: float | None, callback):
    """Run ``sim`` for ``duration`` (default: to ``config.t_end``), yielding ``callback(sim)``
    (or the time) ``tickrate`` times a second of wall-clock time.

    Parameters
    ----------
    sim : Simulator
        Initialized here if it is not yet.
    duration : float or None
        Simulated time to run.
    tickrate : float
        Yields per second.
    speed : float or None
        Simulated seconds per wall-clock second; None runs as fast as possible.
    callback : callable or None
        ``callback(sim) -> value``.
    """
    if not sim.initialized:
        sim.initialize()
    k_end = end_tick(sim, duration, None)
    sim.state.stop_requested = False
    period = 1.0 / tickrate
    dt = sim.config.dt
    wall0, k0 = time.perf_counter(), sim.k
    chunk = 1
    while sim.k < k_end and not sim.stop_requested:
        tick_start = time.perf_counter()
        if speed is None:
            # As fast as possible: grow the chunk until one takes about one period.
            while time.perf_counter() - tick_start < period and sim.k < k_end \
                    and not sim.stop_requested:
                k = sim.k
                sim.advance_to(min(k_end, sim.k + chunk))
                if time.perf_counter() - tick_start < period / 4:
                    chunk *= 2
                if sim.k == k:
                    break
        else:
            target = k0 + int((time.perf_counter() - wall0 + period) * speed / dt)
            sim.advance_to(min(k_end, max(target, sim.k + 1)))
            lag = wall0 + (sim.k - k0) * dt / speed - time.perf_counter()
            if lag > 0:
                time.sleep(lag)
        yield callback(sim) if callback is not None else sim.t
    if not sim.stop_requested:
        sim.log_final_outputs()
    sim.state.blocks_current()
