"""The simulator: runs one compiled plan (initialize -> step loop -> finalize).

Each tick ``k`` (time ``t = t0 + k*dt``, never accumulated) runs, for the tasks active at that
tick: (1) ``output_update`` of each block in topological order, its outputs propagated to
downstream inputs at once (algebraic loops solved by iteration); (2) ``state_update``;
(3) commit of ``next_state`` into ``state``; then (4) the continuous state is integrated to
the next tick by the configured solver, whose steps never cross a tick, a scheduled event or a
located zero crossing. Blocks of inactive tasks hold their outputs.

This module is the reference interpreter; the generated fast path (:mod:`cosim.fastpath.scalar`) runs
discrete plans bit for bit faster when every block provides a kernel.
"""

from __future__ import annotations

import math
import sys
import time as _time
from dataclasses import replace

import numpy as np

from cosim.model.block import Block
from cosim.compile.plan import Plan, compile_model
from cosim.compile.flatten import split_ref
from cosim.config import SimulationConfig
from cosim.errors import CosimError, ModelError, SimulationError
from cosim.model.events import Scheduled, ZeroCrossing
from cosim.run.logs import Logs, SampleList
from cosim.run.loops import AlgebraicLoop, LoopOptions

__all__ = ["Simulator"]


def _block_in_traceback(tb) -> Block | None:
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


class _Schedule:
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


class Simulator:
    """Run a model's compiled plan.

    Construction compiles the model (raising :class:`~cosim.errors.CompileError` with every
    problem). ``run()`` initializes, steps to ``t_end`` and finalizes; ``initialize()`` and
    ``step()`` allow manual stepping under an external clock.

    Parameters
    ----------
    model : Model
        The diagram (its ``events`` are watched).
    config : SimulationConfig
        Base step, end time, solver, loop solver, logging and fast-path options.

    Attributes
    ----------
    plan : Plan
        The compiled plan.
    k : int
        Current tick; ``t = t0 + k*dt``.
    stats : dict
        Counters: ``ticks``, ``loop_iterations`` and the solver's ``nfev``, ``naccept``,
        ``nreject``, ``nnewton``, ... (see :attr:`solver_stats`).
    event_log : list of (float, str)
        Events that fired, as ``(t, name)``.
    """

    def __new__(cls, model=None, config=None):
        # A co-simulation config gives the co-simulated run of the same model.
        if cls is Simulator and isinstance(config, SimulationConfig) and config.cosim:
            from cosim.master.cosimulation import CoSimulation
            return CoSimulation(model, config)
        return super().__new__(cls)

    def __init__(self, model, config: SimulationConfig):
        if not isinstance(config, SimulationConfig):
            raise ModelError(f"Simulator needs a SimulationConfig, got {type(config).__name__}")
        self.model = model
        self.config = config
        from cosim.run.atomic import AtomicSubsystem
        from cosim.model.evaluate import evaluate
        from cosim.model.diagram import Model
        if isinstance(model, Model):
            evaluate(model)        # a subsystem was evaluated with its parent's workspaces
        self.plan: Plan = compile_model(model, config.dt, config.log,
                                        allow_loops=config.loop_solver)
        self.atomics = [(n, b) for n, b in zip(self.plan.names, self.plan.blocks)
                        if isinstance(b, AtomicSubsystem)]
        for _, b in self.atomics:
            b.bind(config)
        self.events = list(getattr(model, "events", ()))
        self._check_events()
        self.k = 0
        self._t_cont = None        # set when an event stopped the run between ticks
        self.stats = {"ticks": 0, "loop_iterations": 0}
        self.event_log: list[tuple[float, str]] = []
        self.solver = None
        self._initialized = False
        self._stop = False
        self._fast = None
        self._schedules: dict[tuple[bool, ...], _Schedule] = {}

    # -- public API -----------------------------------------------------------------------

    @property
    def t(self) -> float:
        """Current simulation time (s): ``t0 + k*dt``, or the event time after a stop."""
        if self._t_cont is not None:
            return self._t_cont
        return self.config.t0 + self.k * self.config.dt

    def initialize(self, t0: float | None = None) -> None:
        """Initialize every block in execution order, propagating its outputs at once.

        Parameters
        ----------
        t0 : float, optional
            Start time; defaults to ``config.t0``.
        """
        if t0 is not None and t0 != self.config.t0:
            self.config = replace(self.config, t0=t0)
        t0 = self.config.t0
        plan = self.plan
        self._build_loops()
        for b in plan.blocks:
            b.outputs.clear()
            b.state.clear()
            b.next_state.clear()
            b.cstate = None
        done = set()
        for i, b in enumerate(plan.blocks):
            if id(b) in done:
                continue
            lp = self._loop_of.get(id(b))
            if lp is None:
                self._call_init(b, i, t0, compute_outputs=True)
                group = [b]
            else:
                # A loop's members are contiguous in the plan: initialize them all, then solve
                # the loop once from zero tear values (or what initialize set).
                group = [m for m, _, _ in lp.members]
                for m in group:
                    self._call_init(m, plan.index[plan.path_of[id(m)]], t0, compute_outputs=False)
                for m, p in lp.tears:
                    m.outputs.setdefault(p, np.zeros(self._tear_shape(m, p)))
                self._solve_init_loop(lp, t0)
            for m in group:
                done.add(id(m))
                j = plan.index[plan.path_of[id(m)]]
                self._check_outputs(m, t0)
                self._check_shapes(j)
                for w in self._fanout[j]:
                    w[0][w[1]] = w[2][w[3]]
        self._setup_continuous()
        self.k = 0
        self._t_cont = None
        self._stop = False
        self._last_logged = -1
        self._log_k0 = 0
        self.event_log.clear()
        self._start_logs()
        self._schedules.clear()
        self._g_prev = [None] * len(self.events)
        self._fast = self._make_fast() if self.config.fast else None
        self._initialized = True

    def step(self) -> None:
        """Advance one base step: outputs, state update, commit and integration to the next tick."""
        if not self._initialized:
            raise SimulationError("step() before initialize(); call sim.initialize() first")
        self._advance(self.k + 1)

    def output_phase(self, log: bool = False) -> None:
        """Compute the outputs of the current tick only (no state update).

        Used by an enclosing atomic subsystem or unit: outputs first, state later
        (:meth:`step`). With ``log``, the outputs are logged as the tick's sample, replacing
        one logged before at the same tick (a co-simulation unit refreshing its outputs for
        new inputs at a macro point).
        """
        if log and self.k == self._last_logged:
            self._unlog_last()
        self._outputs_only(self.k, log=log)

    def _unlog_last(self) -> None:
        """Drop the samples of the last logged tick (it is about to be logged again)."""
        k = self._last_logged
        if self._fast is not None:
            self._fast.flush_logs()
        active = self._active(k)
        plan = self.plan
        for i, p, key in self._log_refs:
            if active[plan.task_of[i]]:
                self._log_lists[key][0].pop_last()
        for n, on in enumerate(active):
            if on and self._task_ticks[n] and self._task_ticks[n][-1] == k:
                self._task_ticks[n].pop()
        self._last_logged = k - 1

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
        k_end = self._k_end(duration, t_end)
        self._stop = False
        bar = self._progress(k_end)
        if bar is None:
            self._advance(k_end)
        else:
            chunk = max(1, (k_end - self.k) // 200)
            while self.k < k_end and not self._stop:
                k0 = self.k
                self._advance(min(k_end, self.k + chunk))
                bar.update(self.k - k0)
            bar.close()
        if not self._stop:
            self._outputs_only(k_end)
        self.finalize()
        return self.logs

    def run_streaming(self, duration: float | None = None, tickrate: float = 10.0,
                      callback=None):
        """Run as fast as possible, yielding ``callback(sim)`` about ``tickrate`` times a second.

        Parameters
        ----------
        duration : float, optional
            Simulated time to run (default: up to ``config.t_end``).
        tickrate : float
            Yields per second of wall-clock time.
        callback : callable, optional
            ``callback(sim) -> value``; None yields the current time.
        """
        yield from self._paced(duration, tickrate, None, callback)

    def run_realtime(self, duration: float | None = None, speed: float = 1.0,
                     tickrate: float = 30.0, callback=None):
        """Run in step with the wall clock (scaled by ``speed``), yielding ``tickrate`` times
        a second (see :meth:`run_streaming`)."""
        if not speed > 0:
            raise ModelError(f"run_realtime: speed must be > 0, got {speed!r}")
        yield from self._paced(duration, tickrate, speed, callback)

    def stop(self) -> None:
        """Ask the running loop to stop at the next tick (from a callback or another thread)."""
        self._stop = True

    def finalize(self) -> None:
        """Call every block's ``finalize``."""
        for b in self.plan.blocks:
            try:
                b.finalize()
            except Exception as err:
                raise SimulationError(f"finalize failed: {err}", t=self.t,
                                      block=self.plan.path_of[id(b)]) from err

    @property
    def logs(self) -> Logs:
        """The logs recorded so far."""
        if self._fast is not None:
            self._fast.flush_logs()
        cfg = self.config
        values, times = {}, {}
        for key, (samples, ticks) in self._log_lists.items():
            n = min(samples.length(), len(ticks))
            try:
                values[key] = samples.array(0, n)
            except ValueError as err:
                raise SimulationError(f"signal {key} changed shape during the run ({err}); an "
                                      "output must keep the shape it had at initialize") from err
            times[key] = cfg.t0 + np.asarray(ticks[:n], dtype=np.float64) * cfg.dt
        base = cfg.t0 + np.arange(self._log_k0, self._last_logged + 1, dtype=np.float64) * cfg.dt
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
        if self._fast is not None:
            self._fast.flush_logs()
        cfg = self.config
        out = {}
        for key, (samples, ticks) in self._log_lists.items():
            n = min(samples.length(), len(ticks))
            start = marks.get(key, 0)
            vals = samples.array(start, n)
            out[key] = (cfg.t0 + np.asarray(ticks[start:n], dtype=np.float64) * cfg.dt, vals)
            marks[key] = n
        for path, blk in self.atomics:
            sub_marks = marks.setdefault(f"{path}/", {})
            for key, tv in blk.inner.logs_since(sub_marks).items():
                out[f"{path}/{key}"] = tv
        return out

    @property
    def solver_stats(self) -> dict:
        """Statistics of the continuous solver (empty without continuous state)."""
        return dict(self.solver.stats) if self.solver is not None else {}

    # -- continuous state: the interface analysis and events build on -----------------------

    @property
    def n_states(self) -> int:
        """Length of the concatenated continuous state vector."""
        return self._X.size

    def state_slices(self) -> dict[str, slice]:
        """Block name -> its slice of the continuous state vector."""
        return {self.plan.path_of[id(b)]: sl for b, sl in self._cblocks}

    def get_state_vector(self) -> np.ndarray:
        """A copy of the continuous state vector, shape ``(n_states,)``."""
        return self._X.copy()

    def set_state_vector(self, x: np.ndarray) -> None:
        """Overwrite the continuous state vector; the solver restarts from it (outputs are
        recomputed at the next evaluation)."""
        self._X[:] = x
        if self._fast is not None and len(self._fast.C):
            self._fast.C[:] = self._X
        if self.solver is not None:
            self.solver.reset(self.t, self._X.copy())

    @property
    def initialized(self) -> bool:
        """True once :meth:`initialize` (or ``run``) has run."""
        return self._initialized

    def linearize(self, inputs, outputs, **kw):
        """(A, B, C, D) about the current operating point; see :func:`cosim.run.analysis.linearize`."""
        from cosim.run.analysis import linearize
        return linearize(self, inputs, outputs, **kw)

    def steady_state(self, **kw) -> np.ndarray:
        """States with zero derivatives; see :func:`cosim.run.analysis.steady_state`."""
        from cosim.run.analysis import steady_state
        return steady_state(self, **kw)

    def periodic_steady_state(self, period: float, **kw) -> np.ndarray:
        """Initial state of the periodic steady state; see
        :func:`cosim.run.analysis.periodic_steady_state`."""
        from cosim.run.analysis import periodic_steady_state
        return periodic_steady_state(self, period, **kw)

    def derivatives(self, t: float, x: np.ndarray) -> np.ndarray:
        """``dx/dt`` of the whole model at ``(t, x)``, discrete outputs held; shape ``(n,)``.

        Leaves every continuous block's outputs evaluated at ``(t, x)``.
        """
        return self._rhs(t, x)

    def evaluate_outputs(self, t: float, x: np.ndarray | None = None) -> None:
        """Evaluate the outputs of every stage-evaluated block at ``(t, x)`` (x: current)."""
        if x is not None:
            self._X[:] = x
        for update, bdt, fan in self._minor:
            update(t, bdt)
            for dins, dport, souts, sport in fan:
                dins[dport] = souts[sport]

    # -- checkpoints ----------------------------------------------------------------------

    def save_checkpoint(self, path) -> None:
        """Write ``path.json`` (structure, time, versions) and ``path.npz`` (all numbers)."""
        from cosim.run import checkpoint
        checkpoint.save(self, path)

    def load_checkpoint(self, path) -> None:
        """Restore a checkpoint written by :meth:`save_checkpoint` for the same model."""
        from cosim.run import checkpoint
        checkpoint.load(self, path)

    # -- setup helpers --------------------------------------------------------------------

    def _call_init(self, b: Block, i: int, t0: float, compute_outputs: bool) -> None:
        try:
            b.initialize(t0)
            if compute_outputs and len(b.outputs) < len(b.output_names):
                b.output_update(t0, self.plan.sample_period[i])
        except CosimError as err:
            if isinstance(err, SimulationError) and err.block is not None:
                raise
            raise SimulationError(f"initialize failed: {err}", t=t0, block=self.plan.names[i]) from err
        except Exception as err:
            raise SimulationError(f"initialize failed: {type(err).__name__}: {err}",
                                  t=t0, block=self.plan.names[i]) from err

    def _tear_shape(self, blk: Block, port: str) -> tuple[int, ...]:
        """First guess of a tear signal's shape: what a reader expects, else a scalar."""
        i = self.plan.index[self.plan.path_of[id(blk)]]
        for w in self.plan.wires:
            if w.src == i and w.src_port == port:
                want = self.plan.blocks[w.dst].input_shapes.get(w.dst_port)
                if want is not None:
                    return tuple(want)
        return (1,)

    def _solve_init_loop(self, lp: AlgebraicLoop, t0: float) -> None:
        for m, _, fan in lp.members:
            for w in fan:
                if w[3] in m.outputs:
                    w[0][w[1]] = w[2][w[3]]
        try:
            lp(t0, 0.0)
        except CosimError:
            raise
        except Exception as err:
            blk = _block_in_traceback(sys.exc_info()[2])
            raise SimulationError(f"initialize failed in {lp.describe()}: {type(err).__name__}: "
                                  f"{err}", t=t0, block=self.plan.path_of.get(id(blk))) from err

    @property
    def _fanout(self):
        """Per block: [(dst_inputs, dst_port, src_outputs, src_port)] of its outgoing wires."""
        fan = getattr(self, "_fanout_cache", None)
        if fan is None:
            blocks = self.plan.blocks
            fan = [[] for _ in blocks]
            for w in self.plan.wires:
                fan[w.src].append((blocks[w.dst].inputs, w.dst_port,
                                   blocks[w.src].outputs, w.src_port))
            self._fanout_cache = fan
        return fan

    def _build_loops(self) -> None:
        """One AlgebraicLoop per strongly connected feedthrough component of the plan."""
        plan, cfg = self.plan, self.config
        opts = LoopOptions(cfg.tolerance_fpi, cfg.iterations_max, cfg.iterations_min, cfg.anderson)
        self._loops, self._loop_of = [], {}
        for members in plan.loops:
            pos = {i: n for n, i in enumerate(members)}
            tears = []
            for w in plan.wires:
                if w.src in pos and w.dst in pos and pos[w.dst] <= pos[w.src]:
                    key = (plan.blocks[w.src], w.src_port)
                    if key not in tears:
                        tears.append(key)
            lp = AlgebraicLoop([(plan.blocks[i], plan.sample_period[i], self._fanout[i])
                                for i in members], tears, opts, self.stats,
                               names=[plan.names[i] for i in members])
            self._loops.append(lp)
            for i in members:
                self._loop_of[id(plan.blocks[i])] = lp

    def _entries(self, include) -> list:
        """Output-phase entries for the blocks selected by ``include(i)``, loops as one entry."""
        plan = self.plan
        out, seen = [], set()
        for i, b in enumerate(plan.blocks):
            if not include(i):
                continue
            lp = self._loop_of.get(id(b))
            if lp is not None:
                if id(lp) not in seen:
                    seen.add(id(lp))
                    out.append((lp, plan.sample_period[i], []))
            elif b.output_names:
                out.append((b.output_update, plan.sample_period[i], self._fanout[i]))
        return out

    def _setup_continuous(self) -> None:
        """Concatenate the blocks' continuous states into one vector and make the solver."""
        plan, cfg = self.plan, self.config
        parts, self._cblocks, n = [], [], 0
        for b in plan.blocks:
            if not b.has_derivative:
                continue
            x = b.cstate
            if not isinstance(x, np.ndarray) or x.ndim != 1 or x.dtype != np.float64:
                raise SimulationError("a block with continuous state must set self.cstate to a "
                                      "1-D float64 array in initialize", t=cfg.t0,
                                      block=plan.path_of[id(b)])
            parts.append(x)
            self._cblocks.append((b, slice(n, n + x.size)))
            n += x.size
        self._X = np.concatenate(parts) if parts else np.zeros(0)
        for b, sl in self._cblocks:
            b.cstate = self._X[sl]
        self._derivs = [(b.derivative, sl, b) for b, sl in self._cblocks]
        self._minor = self._entries(lambda i: plan.continuous[i])
        self.solver = None
        if n:
            from cosim.solvers import SolverOptions, get_solver
            try:
                cls = get_solver(cfg.solver)
                opts = SolverOptions(rtol=cfg.rtol, atol=cfg.atol, dt_min=cfg.dt_min,
                                     dt_max=cfg.dt_max, h0=cfg.h0)
            except ValueError as err:
                raise ModelError(f"SimulationConfig: {err}") from None
            self.solver = cls(self._rhs, n, opts)
            self.solver.reset(cfg.t0, self._X.copy())

    def _rhs(self, t: float, x: np.ndarray) -> np.ndarray:
        """The model's right-hand side: stage outputs at ``(t, x)``, then the derivatives."""
        X = self._X
        X[:] = x
        for update, bdt, fan in self._minor:
            update(t, bdt)
            for dins, dport, souts, sport in fan:
                dins[dport] = souts[sport]
        dx = np.empty_like(X)
        for deriv, sl, _ in self._derivs:
            dx[sl] = deriv(t)
        return dx

    def _check_events(self) -> None:
        problems = []
        names = dict(zip(self.plan.names, self.plan.blocks))
        for ev in self.events:
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
            from cosim.errors import CompileError
            raise CompileError(problems, self.plan.name)

    def _check_outputs(self, b: Block, t0: float) -> None:
        path = self.plan.path_of[id(b)]
        for p in b.output_names:
            v = b.outputs.get(p)
            if not isinstance(v, np.ndarray) or v.dtype != np.float64:
                raise SimulationError(
                    f"output {path}.{p} must be a float64 numpy array after initialize, got "
                    f"{type(v).__name__ if not isinstance(v, np.ndarray) else v.dtype}; "
                    "set it with cosim.model.block.as_signal(value)", t=t0, block=path)

    def _check_shapes(self, i: int) -> None:
        """Check block ``i``'s outputs against the shapes its readers expect."""
        problems = []
        blocks = self.plan.blocks
        for w in self.plan.wires:
            if w.src != i:
                continue
            src, dst = blocks[w.src], blocks[w.dst]
            want = dst.input_shapes.get(w.dst_port)
            have = src.outputs[w.src_port].shape
            if want is not None and tuple(want) != have:
                problems.append(f"{self.plan.names[w.src]}.{w.src_port} (shape {have}) -> "
                                f"{self.plan.names[w.dst]}."
                                f"{w.dst_port} (expects shape {tuple(want)})")
        if problems:
            raise SimulationError("port shapes do not match: " + "; ".join(problems) +
                                  "; fix the block parameters or insert a Mux/Demux",
                                  t=self.config.t0)

    def _start_logs(self) -> None:
        """Choose the logged signals and give each a sample list and its task's tick list."""
        plan = self.plan
        wanted = self.config.log
        if wanted is None:
            refs = [(i, p) for i, b in enumerate(plan.blocks) for p in b.output_names]
            refs += [(i, p) for i, b in enumerate(plan.blocks)
                     if getattr(b, "records_inputs", False) for p in b.input_names]
        else:
            refs = [(plan.index[bn], p) for bn, p in map(split_ref, wanted)]
            refs += [(i, p) for i, b in enumerate(plan.blocks)
                     if getattr(b, "records_inputs", False) for p in b.input_names
                     if f"{plan.names[i]}.{p}" not in wanted]
        self._task_ticks = [[] for _ in plan.tasks]
        self._log_lists: dict[str, tuple[list, list]] = {}
        self._log_refs: list[tuple[int, str, str]] = []   # (block index, port, key)
        for i, p in refs:
            b = plan.blocks[i]
            key = f"{plan.names[i]}.{p}"
            src = b.outputs if p in b.output_names else b.inputs
            self._log_lists[key] = (SampleList(src[p].shape),
                                    self._task_ticks[plan.task_of[i]])
            self._log_refs.append((i, p, key))

    def _schedule(self, active: tuple[bool, ...]) -> _Schedule:
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
        for i, p, key in self._log_refs:
            if run[i]:
                b = plan.blocks[i]
                src = b.outputs if p in b.output_names else b.inputs
                logs.append((self._log_lists[key][0].append, src, p))
        ticks = [self._task_ticks[n].append for n, on in enumerate(active) if on]
        return _Schedule(outputs, states, commits, logs, ticks, discrete, cont_commits)

    def _active(self, k: int) -> tuple[bool, ...]:
        return tuple(k >= tk.offset and (k - tk.offset) % tk.period == 0
                     for tk in self.plan.tasks)

    def _make_fast(self):
        if self.plan.loops or self.events:
            return None
        from cosim.fastpath import scalar as codegen
        return codegen.build(self)

    def _k_end(self, duration, t_end) -> int:
        cfg = self.config
        if duration is not None and t_end is not None:
            raise ModelError("run: give duration or t_end, not both")
        if duration is not None:
            t_end = self.config.t0 + self.k * cfg.dt + duration
        elif t_end is None:
            t_end = cfg.t_end
        k_end = int(round((t_end - cfg.t0) / cfg.dt))
        if k_end < self.k:
            raise SimulationError(f"run: end time {t_end} is before the current time {self.t}")
        return k_end

    def _progress(self, k_end: int):
        show = self.config.progress
        if show is None:
            show = sys.stderr.isatty() and k_end - self.k > 20000
        if not show:
            return None
        from tqdm import tqdm
        return tqdm(total=k_end - self.k, unit="tick", desc=self.plan.name, leave=False)

    def _paced(self, duration, tickrate, speed, callback):
        if not self._initialized:
            self.initialize()
        k_end = self._k_end(duration, None)
        self._stop = False
        period = 1.0 / tickrate
        wall0, k0 = _time.perf_counter(), self.k
        chunk = 1
        while self.k < k_end and not self._stop:
            tick_start = _time.perf_counter()
            if speed is None:
                # As fast as possible: grow the chunk until one takes about one period.
                while _time.perf_counter() - tick_start < period and self.k < k_end \
                        and not self._stop:
                    k = self.k
                    self._advance(min(k_end, self.k + chunk))
                    if _time.perf_counter() - tick_start < period / 4:
                        chunk *= 2
                    if self.k == k:
                        break
            else:
                target = k0 + int((_time.perf_counter() - wall0 + period) * speed /
                                  self.config.dt)
                self._advance(min(k_end, max(target, self.k + 1)))
                lag = wall0 + (self.k - k0) * self.config.dt / speed - _time.perf_counter()
                if lag > 0:
                    _time.sleep(lag)
            yield callback(self) if callback is not None else self.t
        if not self._stop:
            self._outputs_only(k_end)

    # -- the hot loop ---------------------------------------------------------------------

    def _advance(self, k_stop: int) -> None:
        """Run ticks ``self.k .. k_stop-1`` (outputs, logs, state update, commit, integrate)."""
        if self._fast is not None:
            self._fast.advance(k_stop)
            self.stats["ticks"] = self.k
            return
        cfg = self.config
        t0, dt = cfg.t0, cfg.dt
        schedules = self._schedules
        has_x = self._X.size > 0
        events = self.events
        k = self.k
        t = t0 + k * dt
        try:
            while k < k_stop and not self._stop:
                t = t0 + k * dt
                if self._t_cont is not None:
                    break
                active = self._active(k)
                sch = schedules.get(active)
                if sch is None:
                    sch = schedules[active] = self._schedule(active)
                if events:
                    self._scheduled_at(t)
                for update, bdt, fan in sch.outputs:
                    update(t, bdt)
                    for dins, dport, souts, sport in fan:
                        dins[dport] = souts[sport]
                if events:
                    self._crossings_at_tick(t)
                if k > self._last_logged:
                    for append, src, port in sch.logs:
                        append(src[port])
                    for append in sch.ticks:
                        append(k)
                    self._last_logged = k
                if has_x:
                    x_before = self._X.copy()
                for update, bdt in sch.states:
                    update(t, bdt)
                if has_x:
                    # The solver restarts (drops FSAL/history) only where the right-hand side
                    # may jump: a discrete block ran, a stage block's state or x changed.
                    jump = sch.discrete or not all(_same(st, nx) for st, nx in sch.cont_commits)
                for state, nxt in sch.commits:
                    state.update(nxt)
                if has_x:
                    jump = jump or not np.array_equal(x_before, self._X)
                    if not self._integrate(t, t0 + (k + 1) * dt, jump):
                        break
                k += 1
                self.k = k
        except CosimError as err:
            if isinstance(err, SimulationError) and err.t is None:
                err.t = t
            raise
        except Exception as err:
            self._raise_from(err, t)
        finally:
            self.stats["ticks"] = self.k
            self.stats.update(self.solver_stats)

    def _integrate(self, t: float, t_next: float, jump: bool) -> bool:
        """Integrate the continuous state from tick time ``t`` to ``t_next``; False on stop."""
        solver, X = self.solver, self._X
        if jump:
            solver.reset(t, X.copy())
        sched = [ev for ev in self.events if isinstance(ev, Scheduled)]
        zcs = [(n, ev) for n, ev in enumerate(self.events) if isinstance(ev, ZeroCrossing)]
        if zcs:
            self._refresh_g(t)
        while t < t_next:
            bound = t_next
            for ev in sched:
                tt = ev.next_after(t, 1e-12 * max(1.0, abs(t)))
                if tt < bound - 1e-12 * max(1.0, abs(bound)):
                    bound = tt
            h = bound - t
            if solver.adaptive and solver.h_next is not None:
                h = min(h, solver.h_next)
            r = solver.step(t, X.copy(), h)
            t_new = bound if r.h == bound - t else t + r.h
            if zcs:
                fired = self._locate(t, t_new, r, zcs)
                if fired is not None:
                    t_e, evs = fired
                    X[:] = r.dense(t_e)
                    if self._fire(evs, t_e):
                        return False
                    t = t_e
                    solver.reset(t, X.copy())
                    self._refresh_g(t)
                    continue
            X[:] = r.x
            t = t_new
            if zcs:
                self._refresh_g(t)
            if sched and t == bound and bound < t_next:
                due = [ev for ev in sched if abs(ev.next_after(t - 1e-9 * max(1.0, abs(t)), 0)
                                                 - t) <= 1e-12 * max(1.0, abs(t))]
                if self._fire(due, t):
                    return False
                solver.reset(t, X.copy())
        return True

    # -- events ---------------------------------------------------------------------------

    def _g(self, ev: ZeroCrossing) -> float:
        parts = split_ref(ev.watch)
        if parts is None:
            sl = self.state_slices()[ev.watch]
            return float(self._X[sl][ev.index])
        return float(self.plan.blocks[self.plan.index[parts[0]]].outputs[parts[1]].ravel()[ev.index])

    def _refresh_g(self, t: float) -> None:
        """Evaluate every zero-crossing function at the current (t, X)."""
        self.evaluate_outputs(t)
        for n, ev in enumerate(self.events):
            if isinstance(ev, ZeroCrossing):
                self._g_prev[n] = self._g(ev)

    def _locate(self, t, t_new, r, zcs):
        """First crossing inside the step ``[t, t_new]`` on the dense output, or None."""
        self.evaluate_outputs(t_new, r.x)
        g_new = {n: self._g(ev) for n, ev in zcs}
        cands = [(n, ev) for n, ev in zcs if ev.fires(self._g_prev[n], g_new[n])]
        if not cands:
            return None
        first, firing = math.inf, []
        for n, ev in cands:
            a, b = t, t_new
            ga = self._g_prev[n]
            while b - a > ev.tol:
                # Illinois-free bisection-secant hybrid: robust and bounded (~45 iterations).
                mid = 0.5 * (a + b)
                self.evaluate_outputs(mid, r.dense(mid))
                gm = self._g(ev)
                if ev.fires(ga, gm):
                    b = mid
                else:
                    a, ga = mid, gm
            if b < first - 1e-15:
                first, firing = b, [ev]
            elif abs(b - first) <= 1e-15:
                firing.append(ev)
        return first, firing

    def _crossings_at_tick(self, t: float) -> None:
        """Crossings made by a jump at a tick (discrete signals) fire at the tick."""
        fired = []
        for n, ev in enumerate(self.events):
            if isinstance(ev, ZeroCrossing):
                g = self._g(ev)
                if self._g_prev[n] is not None and ev.fires(self._g_prev[n], g):
                    fired.append(ev)
                self._g_prev[n] = g
        if fired and self._fire(fired, t):
            self._t_cont = t

    def _scheduled_at(self, t: float) -> None:
        eps = 1e-12 * max(1.0, abs(t))
        due = [ev for ev in self.events if isinstance(ev, Scheduled)
               and abs(ev.next_after(t - 2 * eps, 0.0) - t) <= eps]
        if due and self._fire(due, t):
            self._t_cont = t

    def _fire(self, evs, t: float) -> bool:
        """Run the actions of ``evs`` at ``t``; True if one of them stops the run."""
        slices = self.state_slices()
        stop = False
        for ev in evs:
            self.event_log.append((t, ev.name))
            for bname, new in ev.reset.items():
                sl = slices[bname]
                val = new(self._X[sl].copy()) if callable(new) else new
                self._X[sl] = np.asarray(val, dtype=np.float64).reshape(-1)
            if ev.callback is not None:
                ev.callback(self, t)
            stop = stop or ev.stop
        if stop:
            self._stop = True
            self._t_cont = t
        return stop

    def _outputs_only(self, k: int, log: bool = True) -> None:
        """Compute (and log) the outputs of tick ``k`` without updating state."""
        if log and k <= self._last_logged:
            return
        if self._fast is not None:
            self._fast.outputs_only(k, log)
            return
        t = self.config.t0 + k * self.config.dt
        active = self._active(k)
        sch = self._schedules.get(active) or self._schedules.setdefault(
            active, self._schedule(active))
        try:
            for update, bdt, fan in sch.outputs:
                update(t, bdt)
                for dins, dport, souts, sport in fan:
                    dins[dport] = souts[sport]
        except CosimError:
            raise
        except Exception as err:
            self._raise_from(err, t)
        if not log:
            return
        for append, src, port in sch.logs:
            append(src[port])
        for append in sch.ticks:
            append(k)
        self._last_logged = k
        for _, blk in self.atomics:
            # The inner plan logs its ticks as it steps; its tick at the end time too.
            inner = blk.inner
            if abs(inner.t - t) <= 1e-9 * max(1.0, abs(t)):
                inner._outputs_only(inner.k)

    def _raise_from(self, err: Exception, t: float):
        blk = _block_in_traceback(sys.exc_info()[2])
        name = self.plan.path_of.get(id(blk)) if blk is not None else None
        raise SimulationError(f"{type(err).__name__}: {err}", t=t, block=name) from err
