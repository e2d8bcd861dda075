"""The members of an ensemble that run alone for a while: a step that switches a mode or
crosses a watched surface, a tick where scheduled events fire (:class:`Located`, used by
:func:`cosim.fastpath.ensemble_run.run_members`).
"""

from __future__ import annotations

import copy

import numpy as np

__all__ = ["Located"]


class Located:
    """What an ensemble runs member by member: steps that switch modes or cross, and events.

    A member whose step changes a switching surface's sign (a relay on a continuous signal)
    or a watched state's (a zero crossing), and every member whose step holds a scheduled
    event, has that step run again on its own interpreter as its own run runs it: from the
    step's start (its continuous state, discrete states and the held outputs the step
    reads), the switches and crossings located on the solver's dense output, the events
    fired there; the member's continuous and discrete states taken back. Every other
    member's step is the vectorised one: without a sign change or an event the
    interpreter's step is the plain Runge-Kutta step with the modes held.

    Scheduled events at tick times fire before the tick's outputs (:meth:`at_tick`, between
    two calls of the step function): each member's resets applied to its own state by the
    very code a run's :meth:`~cosim.run.eventmonitor.EventMonitor.fire` runs, or, where an
    event calls back or a zero crossing is watched (a reset may cross it at the tick), on
    the member's own interpreter; a crossing such a reset makes fires after the tick's
    outputs, as in the member's run: at the start of its step, on its interpreter. A member
    whose event stops its run stops there (:attr:`stopped`): nothing more runs for it, and
    its logs end with that tick.

    Parameters
    ----------
    sim : Simulator
        The reference run (its plan's paths name the blocks; its event monitor says when
        the scheduled events fire).
    model : Model
        Its model; each member handled alone gets a copy with its parameters.
    fast : FastPath
        The scalar fast path translated (its flat slots name the values).
    overrides : list of dict
        The members' parameters.
    arrays : dict of str to ndarray
        The translated function's arrays by name (``C0``, ``C``, ``x<j>``).
    D : ndarray, shape (n_d, N)
        Every discrete state's initial values (those the function never names keep them).
    k_end : int
        The last tick of the run.

    Attributes
    ----------
    fire_ticks : list of int
        Ticks at whose start scheduled events fire.
    stopped : dict of int to int
        Member -> the tick its run stopped at.
    """

    def __init__(self, sim, model, fast, overrides, arrays, D, k_end: int):
        from cosim.model.events import Scheduled, ZeroCrossing
        self.model, self.config, self.overrides = model, sim.config, overrides
        self.arrays, self.D = arrays, D
        self.n = len(overrides)
        plan = sim.plan
        self.states = [(plan.path_of[id(b)], name, f"x{j}")
                       for j, (b, name) in enumerate(fast.flat.state_slots)]
        self.signals = [(plan.path_of[id(b)], port)
                        for b, port in fast.flat.signal_slots]
        self.sims: dict[int, object] = {}
        self.stopped: dict[int, int] = {}
        self.fired: list[list] = [[] for _ in range(self.n)]
        self.pending: dict[int, list] = {}      # member -> crossings made at this tick
        events = getattr(sim, "events", None) or []
        monitor = sim.monitor
        self.slices = monitor.slices if monitor is not None else {}
        cfg = sim.config
        self.at: dict[int, list] = {}
        self.inside: set[int] = set()
        if any(isinstance(ev, Scheduled) for ev in events):
            # A run's last tick only computes its outputs: nothing fires there.
            for k in range(k_end):
                t = cfg.t0 + k * cfg.dt
                due = monitor.due_at_tick(t)
                if due:
                    self.at[k] = due
                if arrays.get("C") is not None and \
                        monitor.bound(t, cfg.t0 + (k + 1) * cfg.dt) < cfg.t0 + (k + 1) * cfg.dt:
                    self.inside.add(k)
        self.fire_ticks = sorted(self.at)
        # Resets alone, no crossing to watch after them: applied here, member by member.
        self.direct = not any(isinstance(ev, ZeroCrossing) for ev in events) and \
            not any(ev.callback is not None for ev in events)

    def member(self, m: int):
        """Member ``m``'s own simulator (built when first needed) and its snapshot."""
        if m not in self.sims:
            from cosim import Simulator
            model = copy.deepcopy(self.model)
            model.parameters.update(self.overrides[m])
            sim = Simulator(model, self.config)
            sim.initialize()
            self.sims[m] = (sim, sim.state.snapshot())
        return self.sims[m]

    def __call__(self, k: int, flags: tuple, held: tuple, slots: tuple) -> None:
        """After tick ``k``'s vectorised step: run again the members with a nonzero flag
        (a surface changed sign), all if a scheduled event falls inside the step; ``held``
        the values of signal ``slots`` the step read."""
        if k in self.inside:
            crossed = np.ones(self.n, dtype=bool)
        elif not flags and not self.pending:
            return
        else:
            crossed = np.zeros(self.n, dtype=bool)
            for f in flags:
                crossed = crossed | (f != 0.0)
            crossed[list(self.pending)] = True
        for m in np.flatnonzero(crossed).tolist():
            if m not in self.stopped:
                self.step(m, k, held, slots)

    def _restore(self, m: int, k: int, X, held: tuple = (), slots: tuple = ()):
        """Member ``m``'s simulator at tick ``k`` with the ensemble's values of it."""
        sim, tree = self.member(m)
        arrays = self.arrays
        blocks = {path: {"state": dict(v["state"]), "outputs": dict(v["outputs"])}
                  for path, v in tree["blocks"].items()}
        for j, (path, name, local) in enumerate(self.states):
            v = arrays[local][m] if local in arrays else self.D[j, m]
            blocks[path]["state"][name] = np.array([v])
        for j, v in zip(slots, held):
            path, port = self.signals[j]
            blocks[path]["outputs"][port] = np.array([v[m] if np.ndim(v) else v])
        sim.state.restore({**tree, "k": k, "X": X, "blocks": blocks})
        return sim

    def _take_back(self, m: int, sim) -> None:
        arrays = self.arrays
        if "C" in arrays:
            arrays["C"][:, m] = sim.state.X
        for path, name, local in self.states:
            if local in arrays:
                arrays[local][m] = sim.plan.blocks[sim.plan.index[path]].state[name][0]

    def step(self, m: int, k: int, held: tuple, slots: tuple) -> None:
        """Member ``m``'s step from tick ``k`` on its own interpreter (first firing the
        crossings a reset made at the tick, as its run does after the tick's outputs)."""
        sim = self._restore(m, k, self.arrays["C0"][:, m], held, slots)
        pending = self.pending.pop(m, None)
        if pending and sim.monitor.fire(pending, self.config.t0 + k * self.config.dt):
            self.stopped[m] = k
        if not sim.interpreter.integrate_tick(k) or sim.state.stop_requested:
            self.stopped[m] = k          # an event stopped its run in this step
        self._take_back(m, sim)

    def at_tick(self, k: int) -> None:
        """Fire the scheduled events due at tick ``k`` (before its outputs) for every member
        still running, as each member's own run fires them."""
        due = self.at[k]
        t = self.config.t0 + k * self.config.dt
        C = self.arrays.get("C")
        for m in range(self.n):
            if m in self.stopped:
                continue
            if not self.direct:
                sim = self._restore(m, k, C[:, m] if C is not None else np.zeros(0))
                monitor = sim.monitor
                # A reset may make a watched state cross at the tick (the run's check after
                # its outputs): compared with the values before the events (none at the
                # first tick, where a run has no value before).
                for n, ev in monitor.crossings:
                    monitor.g_prev[n] = monitor.g(ev) if k else None
                monitor.scheduled_at(t)
                # Those fire after the tick's outputs: at the member's step (see step).
                crossed = monitor.crossed_at_tick()
                stops = sim.state.t_stop is not None or sim.state.stop_requested
                if crossed and not stops:
                    self.pending[m] = crossed
                if stops:
                    self.stopped[m] = k
                self._take_back(m, sim)
                if crossed and stops:
                    # Its run still fires them after this tick's outputs, then stops: fired
                    # here on its own simulator once the ensemble has its state (their
                    # resets come after everything its logs hold, so they stay there).
                    monitor.fire(crossed, t)
                continue
            stop = False
            for ev in due:
                # EventMonitor.fire's resets, on this member's column.
                self.fired[m].append((t, ev.name))
                for bname, new in ev.reset.items():
                    sl = self.slices[bname]
                    val = new(C[sl, m].copy()) if callable(new) else new
                    C[sl, m] = np.asarray(val, dtype=np.float64).reshape(-1)
                stop = stop or ev.stop
            if stop:
                self.stopped[m] = k

    def switch_log(self, m: int) -> list:
        """Member ``m``'s located switches ``(t, block path)`` (none if it never switched)."""
        return list(self.sims[m][0].switch_log) if m in self.sims else []

    def event_log(self, m: int) -> list:
        """Member ``m``'s events ``(t, name)``, in time order (fired here, or by its own
        interpreter)."""
        own = list(self.sims[m][0].event_log) if m in self.sims else []
        return sorted(own + self.fired[m], key=lambda e: e[0])
