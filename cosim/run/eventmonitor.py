"""The event monitor of one run: scheduled events and zero crossings, found and fired.

Zero crossings are located on the solver's dense output inside a step (bisection to the
event's tolerance) or, for jumps of discrete signals, at a tick; scheduled events bound the
solver's steps. Firing an event logs it, applies its resets to the continuous state, calls
its callback, and may stop the run at the event time.
"""

from __future__ import annotations

import math

import numpy as np

from cosim.compile.flatten import split_ref
from cosim.errors import CompileError
from cosim.model.block import Block
from cosim.model.events import Scheduled, ZeroCrossing
from cosim.numerics.timegrid import CLOCK_RTOL, EXCHANGE_RTOL, same_time, time_tolerance

__all__ = ["EventMonitor", "check_events", "switching_blocks"]

#: Time tolerance (s) to which mode switches are located.
SWITCH_TOL = 1e-12


def switching_blocks(plan) -> list:
    """The stage-evaluated blocks of ``plan`` that have modes, as ``(path, block)``."""
    return [(plan.names[i], b) for i, b in enumerate(plan.blocks)
            if plan.continuous[i] and b.has_modes]


def _surface_changes(old: np.ndarray, new: np.ndarray) -> bool:
    """True if a component of a switching surface changed sign (either way) from ``old``."""
    return bool(np.any(((old < 0.0) & (new >= 0.0)) | ((old > 0.0) & (new <= 0.0))))


def check_events(plan, events) -> None:
    """Raise one CompileError listing every event that names a missing block or signal."""
    problems = []
    names = dict(zip(plan.names, plan.blocks))
    for ev in events:
        if not isinstance(ev, (ZeroCrossing, Scheduled)):
            problems.append(f"{ev!r} is not a ZeroCrossing or Scheduled event")
            continue
        for bname in ev.reset:
            if bname not in names or not names[bname].has_derivative:
                problems.append(f"event {ev.name!r}: reset names {bname!r}, which is not a "
                                "block with continuous state")
        if isinstance(ev, ZeroCrossing):
            parts = split_ref(ev.watch)
            if parts is None:
                ok = ev.watch in names and names[ev.watch].has_derivative
            else:
                ok = parts[0] in names and parts[1] in names[parts[0]].output_names
            if not ok:
                problems.append(f"event {ev.name!r}: watch {ev.watch!r} is neither an output "
                                "'block.port' nor a block with continuous state")
    if problems:
        raise CompileError(problems, plan.name)


class EventMonitor:
    """Watches the events of one run.

    Parameters
    ----------
    events : list of ZeroCrossing or Scheduled
    plan : Plan
    state : RunState
        Its ``X`` is reset by events; its ``t_stop`` and ``stop_requested`` set by stops.
    evaluate : callable
        ``evaluate(t, x=None)``: the interpreter's evaluation of the stage-evaluated outputs.
    slices : dict of str to slice
        Block path -> its slice of the continuous state vector.
    owner : object
        Passed to event callbacks as their first argument (the simulator).

    Attributes
    ----------
    log : list of (float, str)
        Events that fired, as ``(t, name)``.
    g_prev : list
        Last value of each zero-crossing function (None for scheduled events).
    switching : list of (str, Block)
        Stage-evaluated blocks with modes (``Block.has_modes``), by path.
    switch_log : list of (float, str)
        Mode switches located, as ``(t, block path)``.
    """

    def __init__(self, events, plan, state, evaluate, slices, owner):
        self.events = list(events)
        self.plan = plan
        self.state = state
        self.evaluate = evaluate
        self.slices = slices
        self.owner = owner
        self.log: list[tuple[float, str]] = []
        self.g_prev: list = [None] * len(self.events)
        self.scheduled = [ev for ev in self.events if isinstance(ev, Scheduled)]
        self.crossings = [(n, ev) for n, ev in enumerate(self.events)
                          if isinstance(ev, ZeroCrossing)]
        self.switching = switching_blocks(plan)
        self.stepping = [sw for sw in self.switching
                         if type(sw[1]).completed_step is not Block.completed_step]
        self.s_prev: list = [None] * len(self.switching)
        self.switch_log: list[tuple[float, str]] = []

    @property
    def watching(self) -> bool:
        """True if solver steps must be searched for sign changes (crossings or modes)."""
        return bool(self.crossings or self.switching)

    def g(self, ev: ZeroCrossing) -> float:
        """The value of ``ev``'s zero-crossing function now."""
        parts = split_ref(ev.watch)
        if parts is None:
            return float(self.state.X[self.slices[ev.watch]][ev.index])
        return float(self.plan.blocks[self.plan.index[parts[0]]].outputs[parts[1]].ravel()[ev.index])

    def refresh(self, t: float) -> None:
        """Evaluate every zero-crossing function and switching surface at the current (t, X)."""
        self.evaluate(t)
        for n, ev in self.crossings:
            self.g_prev[n] = self.g(ev)
        for n, (_, b) in enumerate(self.switching):
            self.s_prev[n] = b.switch_surfaces(t).copy()

    def locate(self, t, t_new, r):
        """First sign change inside the step ``[t, t_new]`` (solver result ``r``), or None.

        Returns
        -------
        (float, list of ZeroCrossing, list of (str, Block)) or None
            The time just past the first change (within the tolerance), the events and the
            mode blocks that change there.
        """
        self.evaluate(t_new, r.x)
        cands = [(n, ev) for n, ev in self.crossings if ev.fires(self.g_prev[n], self.g(ev))]
        moving = [n for n, (_, b) in enumerate(self.switching)
                  if _surface_changes(self.s_prev[n], b.switch_surfaces(t_new))]
        if not cands and not moving:
            return None
        found = []
        for n, ev in cands:
            b = self._bisect(t, t_new, r, ev.tol, self.g_prev[n],
                             lambda tm: self.g(ev), ev.fires)
            found.append((b, ev, None))
        for n in moving:
            blk = self.switching[n][1]
            b = self._bisect(t, t_new, r, SWITCH_TOL, self.s_prev[n],
                             blk.switch_surfaces, _surface_changes)
            found.append((b, None, self.switching[n]))
        first = min(b for b, _, _ in found)
        evs = [ev for b, ev, _ in found if ev is not None and b - first <= 1e-15]
        blocks = [sw for b, _, sw in found if sw is not None and b - first <= 1e-15]
        return first, evs, blocks

    def _bisect(self, a, b, r, tol, ga, g_at, fires):
        """Shrink ``[a, b]`` around the first sign change of ``g_at`` to ``tol`` (bisection:
        robust and bounded, ~45 halvings); returns the end just past the change."""
        tol = max(tol, 4 * math.ulp(b))   # never ask for less than the clock resolves
        while b - a > tol:
            mid = 0.5 * (a + b)
            self.evaluate(mid, r.dense(mid))
            gm = g_at(mid)
            if fires(ga, gm):
                b = mid
            else:
                a, ga = mid, gm.copy() if isinstance(gm, np.ndarray) else gm
        return b

    def switch(self, blocks, t: float) -> None:
        """Let the mode blocks in ``blocks`` take their new modes at ``t`` (state: current X)."""
        self.evaluate(t)
        for path, b in blocks:
            b.switch_mode(t)
            self.switch_log.append((t, path))

    def step_events(self, t: float) -> bool:
        """After an accepted solver step ending at ``t``: let the blocks that ask for a step
        event (``Block.completed_step``) switch there; True if one did."""
        self.evaluate(t)
        asking = [sw for sw in self.stepping if sw[1].completed_step(t)]
        if asking:
            self.switch(asking, t)
        return bool(asking)

    def crossed_at_tick(self) -> list:
        """The zero crossings a jump at a tick made (since the last values seen, which it
        takes as seen)."""
        fired = []
        for n, ev in self.crossings:
            g = self.g(ev)
            if self.g_prev[n] is not None and ev.fires(self.g_prev[n], g):
                fired.append(ev)
            self.g_prev[n] = g
        return fired

    def crossings_at_tick(self, t: float) -> None:
        """Crossings made by a jump at a tick (discrete signals) fire at the tick."""
        fired = self.crossed_at_tick()
        if fired and self.fire(fired, t):
            self.state.t_stop = t

    def due_at_tick(self, t: float) -> list:
        """The scheduled events due at tick time ``t`` (fired before the tick's outputs)."""
        eps = time_tolerance(t, CLOCK_RTOL)
        return [ev for ev in self.scheduled if abs(ev.next_after(t - 2 * eps, 0.0) - t) <= eps]

    def scheduled_at(self, t: float) -> None:
        """Fire the scheduled events due at tick time ``t``."""
        due = self.due_at_tick(t)
        if due and self.fire(due, t):
            self.state.t_stop = t

    def bound(self, t: float, t_next: float) -> float:
        """The end of a solver step from ``t``: ``t_next`` or an earlier scheduled event."""
        bound = t_next
        for ev in self.scheduled:
            tt = ev.next_after(t, time_tolerance(t, CLOCK_RTOL))
            if tt < bound - time_tolerance(bound, CLOCK_RTOL):
                bound = tt
        return bound

    def due(self, t: float) -> list:
        """The scheduled events due at ``t`` (a step just ended there)."""
        return [ev for ev in self.scheduled
                if same_time(ev.next_after(t - time_tolerance(t, EXCHANGE_RTOL), 0), t,
                             CLOCK_RTOL)]

    def fire(self, evs, t: float) -> bool:
        """Run the actions of ``evs`` at ``t``; True if one of them stops the run."""
        X = self.state.X
        stop = False
        for ev in evs:
            self.log.append((t, ev.name))
            for bname, new in ev.reset.items():
                sl = self.slices[bname]
                val = new(X[sl].copy()) if callable(new) else new
                X[sl] = np.asarray(val, dtype=np.float64).reshape(-1)
            if ev.callback is not None:
                ev.callback(self.owner, t)
            stop = stop or ev.stop
        if stop:
            self.state.stop_requested = True
            self.state.t_stop = t
        return stop
