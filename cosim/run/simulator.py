"""The simulator: runs one compiled plan (initialize -> step loop -> finalize).

A :class:`Simulator` compiles a model into a plan and puts together the pieces that run it,
each the one owner of its part: the :class:`~cosim.run.state.RunState` (clock, continuous
state, block values), the :class:`~cosim.run.logstore.LogStore`, the
:class:`~cosim.run.eventmonitor.EventMonitor`, and either the reference
:class:`~cosim.run.interpreter.Interpreter` or the generated fast path
(:mod:`cosim.fastpath`), which runs plans whose blocks all have kernels bit for bit faster.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from cosim.compile.plan import Plan, compile_model
from cosim.config import SimulationConfig
from cosim.errors import CompileError, ModelError, SimulationError
from cosim.run import heap, pacing
from cosim.model.events import lifted, route
from cosim.run.eventmonitor import EventMonitor, check_events, switching_blocks
from cosim.run.interpreter import Interpreter
from cosim.run.logs import Logs
from cosim.run.logstore import LogStore
from cosim.run.nogc import nogc
from cosim.run.startup import initialize_blocks
from cosim.run.state import RunState
from cosim.numerics.timegrid import EXCHANGE_RTOL, floor_ticks, same_time

__all__ = ["LAZY_BLOCKS", "LAZY_SECONDS_PER_BLOCK", "LAZY_TICKS", "Simulator"]

#: Plans of this many blocks start on the interpreter and switch to the generated fast path
#: after :data:`LAZY_TICKS` ticks (a run that ends sooner never generates code), or sooner:
#: once the interpreter has spent what generating the code is expected to cost
#: (:data:`LAZY_SECONDS_PER_BLOCK` per block), but not before the second tick. Waiting that
#: long costs at most twice the better choice made knowing the run's length (the rent-or-buy
#: argument); a heavy continuous plan switches after a tick or two, a cheap discrete one
#: after ten.
LAZY_BLOCKS = 5000
LAZY_TICKS = 10
LAZY_SECONDS_PER_BLOCK = 15e-6

#: After generating the code of a plan of this many blocks, the memory the C allocator
#: holds free is given back (:func:`cosim.run.heap.trim`: about 10 ms, 4 MB at 1,000).
TRIM_BLOCKS = 1000


class Simulator(pacing.PacedRuns):
    """Run a model's compiled plan.

    Construction compiles the model (raising :class:`~cosim.errors.CompileError` with every
    problem). ``run()`` initializes, steps to ``t_end`` and finalizes; ``initialize()`` and
    ``step()`` allow manual stepping under an external clock; ``run_streaming()`` and
    ``run_realtime()`` (:class:`~cosim.run.pacing.PacedRuns`) yield at a wall-clock rate.

    Parameters
    ----------
    model : Model
        The diagram (its ``events`` are watched).
    config : SimulationConfig
    events : list, optional
        Events to watch besides the diagram's own (an atomic subsystem's run gets those its
        parent routes to it, :func:`cosim.model.events.route`).
        Base step, end time, solver, loop solver, logging and fast-path options.

    Attributes
    ----------
    plan : Plan
        The compiled plan.
    state : RunState
        The run state (tick, continuous state, block values).
    stats : dict
        Counters: ``ticks``, ``loop_iterations`` and the solver's ``nfev``, ``naccept``,
        ``nreject``, ``nnewton``, ... (see :attr:`solver_stats`).
    """

    def __init__(self, model, config: SimulationConfig, events=None):
        if not isinstance(config, SimulationConfig):
            raise ModelError(f"Simulator needs a SimulationConfig, got {type(config).__name__}")
        if config.cosim is not None:
            raise ModelError("SimulationConfig.cosim is set: co-simulate with "
                             "cosim.CoSimulation(model, config), or let "
                             "cosim.simulation(model, config) choose from the config")
        self.model = model
        self.config = config
        from cosim.model.diagram import Model
        from cosim.model.evaluate import evaluate
        from cosim.run.atomic import AtomicSubsystem, nested_log
        with nogc():
            if isinstance(model, Model):
                evaluate(model)        # a subsystem was evaluated with its parent's workspaces
            self.plan: Plan = compile_model(model, config.dt, config.log,
                                            allow_loops=config.loop_solver)
        self.atomics = [(n, b) for n, b in zip(self.plan.names, self.plan.blocks)
                        if isinstance(b, AtomicSubsystem)]
        # Events naming blocks inside an atomic subsystem are its own run's (route).
        # (A virtual subsystem's events are the diagram's, naming "sub/block".)
        self.events, inner, problems = route(
            list(getattr(model, "events", ()) if events is None else events)
            + lifted(model, atomic=False), {path for path, _ in self.atomics})
        if problems:
            raise CompileError(problems, self.plan.name)
        for path, b in self.atomics:
            b.bind(config, nested_log(config.log, path), inner.get(path, ()))
        check_events(self.plan, self.events)
        self.state = RunState(self.plan)
        self.stats = self.state.stats
        self.store: LogStore | None = None
        self.monitor: EventMonitor | None = None
        self.fast_path = None
        self._fast_at: int | None = None       # tick at which the fast path is built
        self._lazy_spent = 0.0                 # interpreter seconds before that
        self.interpreter = Interpreter(self.plan, config, self.state)
        self._initialized = False

    # -- the clock --------------------------------------------------------------------------

    @property
    def k(self) -> int:
        """Current tick; ``t = t0 + k*dt``."""
        return self.state.k

    @property
    def t(self) -> float:
        """Current simulation time (s): ``t0 + k*dt``, or the event time after a stop."""
        if self.state.t_stop is not None:
            return self.state.t_stop
        return self.config.t0 + self.state.k * self.config.dt

    @property
    def stopped(self) -> bool:
        """True once an event stopped the run between ticks."""
        return self.state.t_stop is not None

    @property
    def stop_requested(self) -> bool:
        """True once :meth:`stop` or a stopping event asked the run to stop."""
        return self.state.stop_requested

    @property
    def initialized(self) -> bool:
        """True once :meth:`initialize` (or ``run``) has run."""
        return self._initialized

    @property
    def solver(self):
        """The continuous solver (None without continuous state)."""
        return self.interpreter.solver

    @property
    def event_log(self) -> list[tuple[float, str]]:
        """Events that fired, as ``(t, name)``, in time order; an atomic subsystem's
        (its own or routed to it) as ``(t, "sub/name")``."""
        return self._gathered("log", "event_log")

    @property
    def switch_log(self) -> list[tuple[float, str]]:
        """Mode switches located in continuous time (relays), as ``(t, block path)``, in
        time order, those inside atomic subsystems included."""
        return self._gathered("switch_log", "switch_log")

    def _gathered(self, own: str, inner: str) -> list[tuple[float, str]]:
        entries = list(getattr(self.monitor, own)) if self.monitor is not None else []
        for path, b in self.atomics:
            if b.inner is not None:
                entries += [(t, f"{path}/{name}") for t, name in getattr(b.inner, inner)]
        return sorted(entries, key=lambda e: e[0]) if self.atomics else entries

    # -- running ----------------------------------------------------------------------------

    def initialize(self, t0: float | None = None) -> None:
        """Initialize every block in execution order, propagating its outputs at once.

        Parameters
        ----------
        t0 : float, optional
            Start time; defaults to ``config.t0``.
        """
        if t0 is not None and t0 != self.config.t0:
            self.config = replace(self.config, t0=t0)
            self.interpreter.config = self.config
        state = self.state
        with nogc(freeze=len(self.plan.blocks) >= LAZY_BLOCKS):
            self.interpreter.reset()
            initialize_blocks(self.plan, self.interpreter, self.config.t0)
            self.interpreter.setup_continuous()
            state.k = 0
            state.t_stop = None
            state.stop_requested = False
            self._start(k0=0, last=-1)
        self._initialized = True

    def _start(self, k0: int, last: int) -> None:
        """A new log store from tick ``k0``, the event monitor, and the fast path if any."""
        interp = self.interpreter
        self.store = LogStore(self.plan, self.config.log, k0=k0, last=last)
        if self.events or switching_blocks(self.plan):
            slices = self.state_slices()
            self.monitor = EventMonitor(self.events, self.plan, self.state,
                                        self.evaluate_outputs, slices, self)
        interp.attach(self.store, self.monitor)
        self.state.drop_flat()
        self.fast_path = None
        self._fast_at = None
        # Located events and mode switches run on the interpreter (its solver steps end there).
        if self.config.fast and not self.plan.loops and self.monitor is None:
            if len(self.plan.blocks) >= LAZY_BLOCKS:
                # Generating a large plan's code takes seconds: the first ticks run on the
                # interpreter, so a short run does not wait for it (bit-identical either way).
                self._fast_at = self.state.k + LAZY_TICKS
                self._lazy_spent = 0.0
            else:
                self._build_fast()

    def _build_fast(self, lazy: bool = False) -> None:
        """Attach the generated fast path (None when the plan cannot have one); ``lazy``:
        from :meth:`advance_to`, which runs it next (the blocks' dicts may go stale)."""
        from cosim.fastpath.choose import build
        interp = self.interpreter
        self._fast_at = None
        # The interpreter's lists are rebuilt if it runs again (a restart, a checkpoint, a
        # plan the fast path cannot run): dropped first, generating the code reuses their
        # memory (a large plan's peak is lower by about 300 bytes per block).
        interp.release()
        self.state.release_fanout()
        with nogc(freeze=len(self.plan.blocks) >= LAZY_BLOCKS):
            self.fast_path = build(self.plan, self.config, self.state, self.store,
                                   interp.solver, interp.cslices, release=lazy)
        if len(self.plan.blocks) >= TRIM_BLOCKS:
            heap.trim()

    def advance_to(self, k_stop: int, outputs: bool = False) -> None:
        """Run ticks ``k .. k_stop-1`` (stops early at a stopping event); with ``outputs``,
        then compute the outputs at ``k_stop`` (unlogged; not after a stop).

        The stepping API of units and atomic subsystems: the blocks' dicts are not refreshed
        (read values with :meth:`RunState.value`, or call :meth:`RunState.blocks_current`).
        """
        cfg = self.config
        if self._fast_at is not None:
            budget = LAZY_SECONDS_PER_BLOCK * len(self.plan.blocks)
            while self.state.k < min(k_stop, self._fast_at):
                k_next = self.state.k + 1
                start = time.perf_counter()
                self._interpret_to(k_next, outputs and k_next == k_stop)
                self._lazy_spent += time.perf_counter() - start
                if self.state.t_stop is not None or self.state.stop_requested:
                    return
                if self._lazy_spent >= budget and self.state.k >= 2:
                    self._fast_at = self.state.k
            if self.state.k < self._fast_at or self.state.t_stop is not None \
                    or self.state.stop_requested:
                return
            self._build_fast(lazy=True)
            if self.state.k >= k_stop:
                return
        if self.fast_path is not None:
            self.fast_path.advance(k_stop, cfg.t0, cfg.dt, outputs)
            self.stats["ticks"] = self.state.k
            return
        self._interpret_to(k_stop, outputs)

    def _interpret_to(self, k_stop: int, outputs: bool) -> None:
        """:meth:`advance_to` on the interpreter."""
        try:
            self.interpreter.advance(k_stop)
        finally:
            self.stats["ticks"] = self.state.k
            self.stats.update(self.solver_stats)
        if outputs and self.state.t_stop is None:
            self.interpreter.outputs_only(self.state.k, False)

    def settle(self, k: int, last: int, stepped: int) -> None:
        """The fast path's function was called directly (:meth:`FastPath.bound
        <cosim.fastpath.runtime.FastPath.bound>`): the run is at tick ``k``, logged up to tick
        ``last``, ``stepped`` ticks were integrated."""
        self.fast_path.settle(k, last, stepped)
        self.stats["ticks"] = k

    def step(self) -> None:
        """Advance one base step: outputs, state update, commit and integration to the next tick."""
        if not self._initialized:
            raise SimulationError("step() before initialize(); call sim.initialize() first")
        self.advance_to(self.state.k + 1)
        self.state.blocks_current()

    def output_phase(self, log: bool = False) -> None:
        """Compute the outputs of the current tick only (no state update); the blocks then
        show them (see :meth:`compute_outputs`)."""
        self.compute_outputs(log)
        self.state.blocks_current()

    def compute_outputs(self, log: bool = False) -> None:
        """Compute the outputs of the current tick only (no state update).

        Used by an enclosing atomic subsystem or unit: outputs first, state later
        (:meth:`advance_to`). With ``log``, the outputs are logged as the tick's sample,
        replacing one logged before at the same tick (a co-simulation unit refreshing its
        outputs for new inputs at a macro point). Read them with :meth:`RunState.value`.
        """
        k = self.state.k
        if log and k == self.store.last:
            self.store.unlog(k, self.interpreter.active(k))
        self._outputs_only(k, log=log)

    def log_final_outputs(self) -> None:
        """Compute and log the outputs at the current tick unless it is logged already (the
        end time of a run is logged inclusively)."""
        self._outputs_only(self.state.k)

    def _outputs_only(self, k: int, log: bool = True) -> None:
        """Compute (and log) the outputs of tick ``k`` without updating state."""
        if log and k <= self.store.last:
            return
        if self.fast_path is not None:
            self.fast_path.outputs_only(k, log, self.config.t0, self.config.dt)
            if not (log and self.atomics):
                return
            # The atomic subsystems' inputs, from the fast path's values (pushed below).
            self.state.blocks_current()
        else:
            self.interpreter.outputs_only(k, log)
        if not log:
            return
        t = self.config.t0 + k * self.config.dt
        for _, blk in self.atomics:
            # The inner plan logs its ticks as it steps; its tick at the end time too.
            inner = blk.inner
            if same_time(inner.t, t, EXCHANGE_RTOL):
                # The tick's final inputs: plan order may have computed some of them after
                # the block's outputs (as its state update does, see AtomicSubsystem).
                blk.push_inputs()
                inner.log_final_outputs()

    def run(self, duration: float | None = None, *, t_end: float | None = None,
            reset: bool = False) -> Logs:
        """Initialize (if needed), run, finalize, and return the logs.

        The outputs at the end time itself are computed and logged (no state update there),
        so the logs cover the run inclusively. Calling ``run`` again continues the run.

        Parameters
        ----------
        duration : float, optional
            Run for this long from the current time.
        t_end : float, optional
            Run until this time; with neither given, until ``config.t_end``.
        reset : bool
            Start again from ``t0`` (re-initialize every block).
        """
        if reset or not self._initialized:
            self.initialize()
        k_end = pacing.end_tick(self, duration, t_end)
        self.state.stop_requested = False
        pacing.run_ticks(self, k_end)
        if not self.state.stop_requested:
            self._outputs_only(k_end)
        self.state.blocks_current()
        self.finalize()
        return self.logs

    # -- paced runs (run_streaming, run_realtime: pacing.PacedRuns) -------------------------

    def _pace_start(self, duration: float | None) -> int:
        if not self._initialized:
            self.initialize()
        self.state.stop_requested = False
        return pacing.end_tick(self, duration, None)

    def _pace_more(self, k_end: int) -> bool:
        return self.k < k_end

    def _pace_to(self, t_target: float, k_end: int) -> None:
        cfg = self.config
        self.advance_to(min(k_end, max(floor_ticks(t_target - cfg.t0, cfg.dt), self.k + 1)))

    def _pace_finish(self, complete: bool) -> None:
        if complete:
            self.log_final_outputs()
        self.state.blocks_current()

    def stop(self) -> None:
        """Ask the running loop to stop at the next tick (from a callback or another thread)."""
        self.state.stop_requested = True

    def finalize(self) -> None:
        """Call every block's ``finalize``."""
        for b in self.plan.blocks:
            try:
                b.finalize()
            except Exception as err:
                raise SimulationError(f"finalize failed: {err}", t=self.t,
                                      block=self.plan.path_of[id(b)]) from err

    # -- logs -------------------------------------------------------------------------------

    @property
    def logs(self) -> Logs:
        """The logs recorded so far (atomic subsystems' signals under their path)."""
        cfg = self.config
        values, times, base = self.store.values(cfg.t0, cfg.dt)
        for path, blk in self.atomics:
            inner = blk.inner.logs
            for key in inner:
                values[f"{path}/{key}"] = inner[key]
                times[f"{path}/{key}"] = inner.time_of(key)
        return Logs(values, times, base)

    def logs_since(self, marks: dict[str, int]) -> dict:
        """Samples logged after ``marks[key]`` samples, as ``{key: (time, values)}``.

        Updates ``marks`` to the new lengths. Atomic subsystems' signals are included under
        their path. This is how logs travel in batches instead of every step.
        """
        out = self.store.since(marks, self.config.t0, self.config.dt)
        for path, blk in self.atomics:
            sub_marks = marks.setdefault(f"{path}/", {})
            for key, tv in blk.inner.logs_since(sub_marks).items():
                out[f"{path}/{key}"] = tv
        return out

    # -- continuous state: the interface analysis and events build on -----------------------

    @property
    def solver_stats(self) -> dict:
        """Statistics of the continuous solver (empty without continuous state)."""
        return dict(self.solver.stats) if self.solver is not None else {}

    @property
    def n_states(self) -> int:
        """Length of the concatenated continuous state vector."""
        return self.state.X.size

    def state_slices(self) -> dict[str, slice]:
        """Block name -> its slice of the continuous state vector."""
        return {self.plan.path_of[id(b)]: sl for b, sl in self.interpreter.cslices}

    def get_state_vector(self) -> np.ndarray:
        """A copy of the continuous state vector, shape ``(n_states,)``."""
        return self.state.X.copy()

    def set_state_vector(self, x: np.ndarray) -> None:
        """Overwrite the continuous state vector; the solver restarts from it (outputs are
        recomputed at the next evaluation)."""
        self.state.X[:] = x
        if self.solver is not None:
            self.solver.reset(self.t, self.state.X.copy())

    def derivatives(self, t: float, x: np.ndarray) -> np.ndarray:
        """``dx/dt`` of the whole model at ``(t, x)``, discrete outputs held; shape ``(n,)``.

        Leaves every continuous block's outputs evaluated at ``(t, x)``.
        """
        self.state.blocks_current()
        return self.interpreter.rhs(t, x)

    def evaluate_outputs(self, t: float, x: np.ndarray | None = None) -> None:
        """Evaluate the outputs of every stage-evaluated block at ``(t, x)`` (x: current)."""
        self.state.blocks_current()
        self.interpreter.evaluate_outputs(t, x)

    def linearize(self, inputs, outputs, **kw):
        """(A, B, C, D) about the current operating point (:mod:`cosim.run.analysis`)."""
        from cosim.run.analysis import linearize
        return linearize(self, inputs, outputs, **kw)

    def steady_state(self, **kw) -> np.ndarray:
        """States with zero derivatives (:mod:`cosim.run.analysis`)."""
        from cosim.run.analysis import steady_state
        return steady_state(self, **kw)

    def periodic_steady_state(self, period: float, **kw) -> np.ndarray:
        """Initial state of the periodic steady state (:mod:`cosim.run.analysis`)."""
        from cosim.run.analysis import periodic_steady_state
        return periodic_steady_state(self, period, **kw)

    # -- checkpoints ------------------------------------------------------------------------

    def restart_logs(self, k0: int, last: int) -> None:
        """Start the logs afresh at tick ``k0`` (``last``: the tick logged before it), as a run
        resumed from a checkpoint does; the fast path is rebuilt on the new log store."""
        self._start(k0, last)

    def save_checkpoint(self, path) -> None:
        """Write the checkpoint file ``path.npz`` (state, model identity, logs so far; atomically:
        see :mod:`cosim.run.checkpoint`)."""
        from cosim.run import checkpoint
        checkpoint.save(self, path)

    def load_checkpoint(self, path) -> None:
        """Restore a checkpoint written by :meth:`save_checkpoint` for the same model."""
        from cosim.run import checkpoint
        checkpoint.load(self, path)

