"""The reference interpreter: runs a plan's ticks by calling the blocks' own methods.

Each tick ``k`` (time ``t = t0 + k*dt``) runs, for the tasks active at that tick: (1)
``output_update`` of each block in topological order, its outputs propagated to downstream
inputs at once (algebraic loops solved by iteration); (2) ``state_update``; (3) commit of
``next_state`` into ``state``; then (4) the continuous state is integrated to the next tick by
the configured solver, whose steps never cross a tick, a scheduled event or a located zero
crossing. Blocks of inactive tasks hold their outputs. What each activation pattern executes
is precomputed once as flat lists (:class:`Schedule`), so the hot loop does no lookups.
"""

from __future__ import annotations

import sys

import numpy as np

from cosim.errors import CosimError, ModelError, SimulationError, StopSimulation
from cosim.model.block import Block
from cosim.run.loops import AlgebraicLoop, LoopOptions

__all__ = ["Interpreter", "Schedule", "block_in_traceback"]


def block_in_traceback(tb) -> Block | None:
    """The innermost block whose method raised (found from the traceback, so the hot loop
    pays nothing for error reporting)."""
    found = None
    while tb is not None:
        obj = tb.tb_frame.f_locals.get("self")
        if isinstance(obj, Block):
            found = obj
        tb = tb.tb_next
    return found


def _same(state: dict, nxt: dict) -> bool:
    """True if committing ``nxt`` leaves ``state`` unchanged."""
    for key, v in nxt.items():
        old = state.get(key)
        if old is not v and (old is None or not np.array_equal(old, v)):
            return False
    return True


class Schedule:
    """What one activation pattern (set of active tasks) executes, precomputed."""

    __slots__ = ("outputs", "states", "commits", "logs", "ticks", "discrete", "cont_commits")

    def __init__(self, outputs, states, commits, logs, ticks, discrete, cont_commits):
        self.outputs = outputs    # [(output_update or loop, dt, [(dst_inputs, dport, src_outputs, sport)])]
        self.states = states      # [(bound state_update, dt)]
        self.commits = commits    # [(state dict, next_state dict)]
        self.logs = logs          # [(list.append, outputs dict, port)]
        self.ticks = ticks        # [list.append of the active tasks' tick lists]
        self.discrete = discrete  # a discrete-rate block runs: its held outputs may jump
        self.cont_commits = cont_commits  # commits of stage-evaluated blocks with state


class Interpreter:
    """Runs ticks of one plan on a run state, calling the blocks' methods.

    Parameters
    ----------
    plan : Plan
    config : SimulationConfig
    state : RunState
        The clock, continuous state and stop flags it advances.

    Attributes
    ----------
    solver : Solver or None
        The continuous solver (None without continuous state).
    cslices : list of (Block, slice)
        Each continuous block's slice of ``state.X``.
    """

    def __init__(self, plan, config, state):
        self.plan = plan
        self.config = config
        self.state = state
        self.store = None
        self.monitor = None
        self.solver = None
        self.cslices: list = []
        self._schedules: dict[tuple[bool, ...], Schedule] = {}
        self._minor: list | None = None         # stage-evaluated entries (see _stages)
        self._derivs: list | None = None
        self.loops, self.loop_of = [], {}

    def reset(self) -> None:
        """Fresh loop solvers and schedules (before the blocks are initialized)."""
        self._schedules.clear()
        self._build_loops()

    def release(self) -> None:
        """Drop the flat lists the hot loop walks (the generated fast path runs the plan:
        about 140 bytes per block); they are built again if the interpreter runs."""
        self._schedules.clear()
        self._minor = self._derivs = None

    def attach(self, store, monitor) -> None:
        """Log into ``store`` and watch events with ``monitor`` (or None) from now on."""
        self.store = store
        self.monitor = monitor
        self._schedules.clear()

    # -- activation -------------------------------------------------------------------------

    def active(self, k: int) -> tuple[bool, ...]:
        """Which tasks run at tick ``k``."""
        return tuple(k >= tk.offset and (k - tk.offset) % tk.period == 0
                     for tk in self.plan.tasks)

    def _schedule(self, active: tuple[bool, ...]) -> Schedule:
        """Build (once per activation pattern) the flat lists the hot loop walks."""
        plan = self.plan
        run = [active[plan.task_of[i]] for i in range(len(plan.blocks))]
        outputs = self._entries(lambda i: run[i])
        states, commits, cont_commits = [], [], []
        for i, b in enumerate(plan.blocks):
            if run[i] and b.has_state_update:
                states.append((b.state_update, plan.sample_period[i]))
                commits.append((b.state, b.next_state))
                if plan.continuous[i]:
                    cont_commits.append((b.state, b.next_state))
        discrete = any(run[i] and not plan.continuous[i] for i in range(len(plan.blocks)))
        logs = []
        for i, p, key in self.store.refs:
            if run[i]:
                b = plan.blocks[i]
                src = b.outputs if p in b.output_names else b.inputs
                logs.append((self.store.appender(key), src, p))
        ticks = [self.store.task_ticks[n].append for n, on in enumerate(active) if on]
        return Schedule(outputs, states, commits, logs, ticks, discrete, cont_commits)

    def schedule(self, active: tuple[bool, ...]) -> Schedule:
        """The schedule of an activation pattern (built on first use)."""
        sch = self._schedules.get(active)
        if sch is None:
            sch = self._schedules[active] = self._schedule(active)
        return sch

    # -- the hot loop -----------------------------------------------------------------------

    def advance(self, k_stop: int) -> None:
        """Run ticks ``state.k .. k_stop-1`` (outputs, logs, state update, commit, integrate)."""
        cfg, state, store, monitor = self.config, self.state, self.store, self.monitor
        t0, dt = cfg.t0, cfg.dt
        schedules = self._schedules
        has_x = state.X.size > 0
        k = state.k
        t = t0 + k * dt
        try:
            while k < k_stop and not state.stop_requested:
                t = t0 + k * dt
                if state.t_stop is not None:
                    break
                active = self.active(k)
                sch = schedules.get(active)
                if sch is None:
                    sch = schedules[active] = self._schedule(active)
                if monitor:
                    monitor.scheduled_at(t)
                for update, bdt, fan in sch.outputs:
                    update(t, bdt)
                    for dins, dport, souts, sport in fan:
                        dins[dport] = souts[sport]
                if monitor:
                    monitor.crossings_at_tick(t)
                if k > store.last:
                    for append, src, port in sch.logs:
                        append(src[port])
                    for append in sch.ticks:
                        append(k)
                    store.last = k
                if has_x:
                    x_before = state.X.copy()
                for update, bdt in sch.states:
                    update(t, bdt)
                if has_x:
                    # The solver restarts (drops FSAL/history) only where the right-hand side
                    # may jump: a discrete block ran, a stage block's state or x changed.
                    jump = sch.discrete or not all(_same(st, nx) for st, nx in sch.cont_commits)
                for st, nxt in sch.commits:
                    st.update(nxt)
                if has_x:
                    jump = jump or not np.array_equal(x_before, state.X)
                    if not self._integrate(t, t0 + (k + 1) * dt, jump):
                        break
                k += 1
                state.k = k
        except StopSimulation as stop:
            # A block asked to end the run (an FMU's termination request): a clean stop at
            # its time, like a stopping event; its outputs there (between ticks) are its
            # last sample.
            state.stop_requested = True
            state.t_stop = stop.t
            if stop.outputs and stop.block is not None:
                i = self.plan.index.get(self.plan.path_of.get(id(stop.block)))
                for j, port, key in store.refs:
                    if j == i and port in stop.outputs:
                        store.add_late(key, stop.t, stop.outputs[port])
        except CosimError as err:
            if isinstance(err, SimulationError) and err.t is None:
                err.t = t
            raise
        except Exception as err:
            self.raise_from(err, t)

    def outputs_only(self, k: int, log: bool) -> None:
        """Compute (and with ``log`` log) the outputs of tick ``k`` without updating state."""
        store = self.store
        t = self.config.t0 + k * self.config.dt
        sch = self.schedule(self.active(k))
        try:
            for update, bdt, fan in sch.outputs:
                update(t, bdt)
                for dins, dport, souts, sport in fan:
                    dins[dport] = souts[sport]
        except CosimError:
            raise
        except Exception as err:
            self.raise_from(err, t)
        if not log:
            return
        for append, src, port in sch.logs:
            append(src[port])
        for append in sch.ticks:
            append(k)
        store.last = k

    def integrate_tick(self, k: int) -> bool:
        """Integrate the continuous state from tick ``k`` to ``k + 1`` as tick ``k`` ends
        (after its state update, as :meth:`advance` does), locating events and mode switches;
        False when an event stopped the run. An ensemble runs a member's step that switches
        modes this way (:mod:`cosim.fastpath.ensemble_run`)."""
        t0, dt = self.config.t0, self.config.dt
        return self._integrate(t0 + k * dt, t0 + (k + 1) * dt, True)

    def _integrate(self, t: float, t_next: float, jump: bool) -> bool:
        """Integrate the continuous state from tick time ``t`` to ``t_next``; False on stop."""
        solver, X, monitor = self.solver, self.state.X, self.monitor
        if jump:
            solver.reset(t, X.copy())
        sched = monitor is not None and monitor.scheduled
        zcs = monitor is not None and monitor.watching
        if zcs:
            monitor.refresh(t)
        while t < t_next:
            bound = monitor.bound(t, t_next) if sched else t_next
            h = bound - t
            if solver.adaptive and solver.h_next is not None:
                h = min(h, solver.h_next)
            r = solver.step(t, X.copy(), h)
            t_new = bound if r.h == bound - t else t + r.h
            if zcs:
                fired = monitor.locate(t, t_new, r)
                if fired is not None:
                    t_e, evs, switched = fired
                    X[:] = r.dense(t_e)
                    if switched:
                        monitor.switch(switched, t_e)
                    if evs and monitor.fire(evs, t_e):
                        return False
                    t = t_e
                    solver.reset(t, X.copy())
                    monitor.refresh(t)
                    continue
            X[:] = r.x
            t = t_new
            if zcs:
                if monitor.stepping and monitor.step_events(t):
                    solver.reset(t, X.copy())
                monitor.refresh(t)
            if sched and t == bound and bound < t_next:
                if monitor.fire(monitor.due(t), t):
                    return False
                solver.reset(t, X.copy())
        return True

    def raise_from(self, err: Exception, t: float):
        """Raise ``err`` as a SimulationError naming the block whose method raised it."""
        blk = block_in_traceback(sys.exc_info()[2])
        name = self.plan.path_of.get(id(blk)) if blk is not None else None
        raise SimulationError(f"{type(err).__name__}: {err}", t=t, block=name) from err

    # -- continuous state -------------------------------------------------------------------

    def setup_continuous(self) -> None:
        """Concatenate the blocks' continuous states into ``state.X`` and make the solver."""
        plan, cfg = self.plan, self.config
        parts, self.cslices, n = [], [], 0
        for b in plan.blocks:
            if not b.has_derivative:
                continue
            x = b.cstate
            if not isinstance(x, np.ndarray) or x.ndim != 1 or x.dtype != np.float64:
                raise SimulationError("a block with continuous state must set self.cstate to a "
                                      "1-D float64 array in initialize", t=cfg.t0,
                                      block=plan.path_of[id(b)])
            parts.append(x)
            self.cslices.append((b, slice(n, n + x.size)))
            n += x.size
        X = self.state.X = np.concatenate(parts) if parts else np.zeros(0)
        for b, sl in self.cslices:
            b.cstate = X[sl]
        self._minor = self._derivs = None
        self.solver = None
        if n:
            from cosim.solvers import SolverOptions, get_solver
            try:
                cls = get_solver(cfg.solver)
                opts = SolverOptions(rtol=cfg.rtol, atol=cfg.atol, dt_min=cfg.dt_min,
                                     dt_max=cfg.dt_max, h0=cfg.h0)
            except ValueError as err:
                raise ModelError(f"SimulationConfig: {err}") from None
            self.solver = cls(self.rhs, n, opts)
            self.solver.reset(cfg.t0, X.copy())

    def _stages(self) -> list:
        """Output-phase entries of the stage-evaluated blocks (built on first use)."""
        if self._minor is None:
            plan = self.plan
            self._derivs = [(b.derivative, sl) for b, sl in self.cslices]
            self._minor = self._entries(lambda i: plan.continuous[i], held=True)
        return self._minor

    def evaluate_outputs(self, t: float, x: np.ndarray | None = None) -> None:
        """Evaluate the outputs of every stage-evaluated block at ``(t, x)`` (x: current)."""
        if x is not None:
            self.state.X[:] = x
        for update, bdt, fan in self._stages():
            update(t, bdt)
            for dins, dport, souts, sport in fan:
                dins[dport] = souts[sport]

    def rhs(self, t: float, x: np.ndarray) -> np.ndarray:
        """The model's right-hand side: stage outputs at ``(t, x)``, then the derivatives."""
        X = self.state.X
        X[:] = x
        for update, bdt, fan in self._stages():
            update(t, bdt)
            for dins, dport, souts, sport in fan:
                dins[dport] = souts[sport]
        dx = np.empty_like(X)
        for deriv, sl in self._derivs:
            dx[sl] = deriv(t)
        return dx

    # -- loops and entries ------------------------------------------------------------------

    def _build_loops(self) -> None:
        """One AlgebraicLoop per strongly connected feedthrough component of the plan."""
        plan, cfg = self.plan, self.config
        opts = LoopOptions(cfg.tolerance_fpi, cfg.iterations_max, cfg.iterations_min, cfg.anderson)
        fanout = self.state.fanout
        self.loops, self.loop_of = [], {}
        for members in plan.loops:
            pos = {i: n for n, i in enumerate(members)}
            tears = []
            for w in plan.wires:
                if w.src in pos and w.dst in pos and pos[w.dst] <= pos[w.src]:
                    key = (plan.blocks[w.src], w.src_port)
                    if key not in tears:
                        tears.append(key)
            lp = AlgebraicLoop([(plan.blocks[i], plan.sample_period[i], fanout[i])
                                for i in members], tears, opts, self.state.stats,
                               names=[plan.names[i] for i in members])
            self.loops.append(lp)
            for i in members:
                self.loop_of[id(plan.blocks[i])] = lp

    def _entries(self, include, held: bool = False) -> list:
        """Output-phase entries for the blocks selected by ``include(i)``, loops as one entry;
        with ``held`` (solver stages), blocks with modes keep theirs."""
        plan = self.plan
        fanout = self.state.fanout
        out, seen = [], set()
        for i, b in enumerate(plan.blocks):
            if not include(i):
                continue
            lp = self.loop_of.get(id(b))
            if lp is not None:
                if id(lp) not in seen:
                    seen.add(id(lp))
                    out.append((lp, plan.sample_period[i], []))
            elif b.output_names:
                update = b.held_output_update if held and b.has_modes else b.output_update
                out.append((update, plan.sample_period[i], fanout[i]))
        return out
