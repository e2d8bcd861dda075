"""The simulator: runs one compiled plan (initialize -> step loop -> finalize).

Each tick ``k`` (time ``t = t0 + k*dt``, never accumulated) runs, for the tasks active at that
tick: (1) ``output_update`` of each block in topological order, its outputs propagated to
downstream inputs at once; (2) ``state_update``; (3) commit of ``next_state`` into ``state``.
Blocks of inactive tasks hold their outputs. This module is the reference interpreter; the
generated fast path (:mod:`cosim.codegen`) runs the same plan bit for bit faster when every
block provides a kernel.
"""

from __future__ import annotations

import sys

import numpy as np

from cosim.block import Block
from cosim.compile import Plan, compile_model, split_ref
from cosim.config import SimulationConfig
from cosim.errors import CosimError, ModelError, SimulationError
from cosim.logs import Logs

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


class _Schedule:
    """What one activation pattern (set of active tasks) executes, precomputed."""

    __slots__ = ("outputs", "states", "commits", "logs", "ticks")

    def __init__(self, outputs, states, commits, logs, ticks):
        self.outputs = outputs    # [(bound output_update, dt, [(dst_inputs, dport, src_outputs, sport)])]
        self.states = states      # [(bound state_update, dt)]
        self.commits = commits    # [(state dict, next_state dict)]
        self.logs = logs          # [(list.append, outputs dict, port)]
        self.ticks = ticks        # [list.append of the active tasks' tick lists]


class Simulator:
    """Run a model's compiled plan.

    Construction compiles the model (raising :class:`~cosim.errors.CompileError` with every
    problem). ``run()`` initializes, steps to ``t_end`` and finalizes; ``initialize()`` and
    ``step()`` allow manual stepping under an external clock.

    Parameters
    ----------
    model : Model
        The diagram.
    config : SimulationConfig
        Base step, end time, logging and fast-path options.

    Attributes
    ----------
    plan : Plan
        The compiled plan.
    k : int
        Current tick; ``t = t0 + k*dt``.
    """

    def __init__(self, model, config: SimulationConfig):
        if not isinstance(config, SimulationConfig):
            raise ModelError(f"Simulator needs a SimulationConfig, got {type(config).__name__}")
        self.model = model
        self.config = config
        self.plan: Plan = compile_model(model, config.dt, config.log)
        self.k = 0
        self._initialized = False
        self._fast = None
        self._schedules: dict[tuple[bool, ...], _Schedule] = {}

    # -- public API -----------------------------------------------------------------------

    @property
    def t(self) -> float:
        """Current simulation time ``t0 + k*dt`` (s)."""
        return self.config.t0 + self.k * self.config.dt

    def initialize(self, t0: float | None = None) -> None:
        """Initialize every block in execution order, propagating its outputs at once.

        Parameters
        ----------
        t0 : float, optional
            Start time; defaults to ``config.t0``.
        """
        if t0 is not None and t0 != self.config.t0:
            from dataclasses import replace
            self.config = replace(self.config, t0=t0)
        t0 = self.config.t0
        plan = self.plan
        for i, b in enumerate(plan.blocks):
            b.outputs.clear()
            b.state.clear()
            b.next_state.clear()
            try:
                b.initialize(t0)
                if len(b.outputs) < len(b.output_names):
                    b.output_update(t0, plan.sample_period[i])
            except CosimError as err:
                if isinstance(err, SimulationError) and err.block is not None:
                    raise
                raise SimulationError(f"initialize failed: {err}", t=t0, block=b.name) from err
            except Exception as err:
                raise SimulationError(f"initialize failed: {type(err).__name__}: {err}",
                                      t=t0, block=b.name) from err
            self._check_outputs(b, t0)
            self._check_shapes(i)
            for w in self._fanout[i]:
                w[0][w[1]] = w[2][w[3]]
        self.k = 0
        self._last_logged = -1
        self._start_logs()
        self._schedules.clear()
        self._fast = self._make_fast() if self.config.fast else None
        self._initialized = True

    def step(self) -> None:
        """Advance one base step: outputs, state update and commit at the current tick."""
        if not self._initialized:
            raise SimulationError("step() before initialize(); call sim.initialize() first")
        self._advance(self.k + 1)

    def run(self, t_end: float | None = None) -> Logs:
        """Initialize (if needed), step to ``t_end`` and finalize; return the logs.

        The outputs at ``t_end`` itself are computed and logged (no state update there), so
        the logs cover ``t0 .. t_end`` inclusive. Calling ``run`` again with a later
        ``t_end`` continues the same run.

        Parameters
        ----------
        t_end : float, optional
            End time; defaults to ``config.t_end``.
        """
        if not self._initialized:
            self.initialize()
        t_end = self.config.t_end if t_end is None else t_end
        k_end = int(round((t_end - self.config.t0) / self.config.dt))
        if k_end < self.k:
            raise SimulationError(f"run(t_end={t_end}) is before the current time {self.t}")
        self._advance(k_end)
        self._outputs_only(k_end)
        self.finalize()
        return self.logs

    def finalize(self) -> None:
        """Call every block's ``finalize``."""
        for b in self.plan.blocks:
            try:
                b.finalize()
            except Exception as err:
                raise SimulationError(f"finalize failed: {err}", t=self.t, block=b.name) from err

    @property
    def logs(self) -> Logs:
        """The logs recorded so far."""
        if self._fast is not None:
            self._fast.flush_logs()
        cfg = self.config
        values, times = {}, {}
        for key, (samples, ticks) in self._log_lists.items():
            n = min(len(samples), len(ticks))
            try:
                values[key] = np.array(samples[:n], dtype=np.float64) if n else \
                    np.zeros((0,) + self._log_shape[key])
            except ValueError as err:
                raise SimulationError(f"signal {key} changed shape during the run ({err}); an "
                                      "output must keep the shape it had at initialize") from err
            times[key] = cfg.t0 + np.asarray(ticks[:n], dtype=np.float64) * cfg.dt
        base = cfg.t0 + np.arange(self._last_logged + 1, dtype=np.float64) * cfg.dt
        return Logs(values, times, base)

    # -- setup helpers --------------------------------------------------------------------

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

    def _check_outputs(self, b: Block, t0: float) -> None:
        for p in b.output_names:
            v = b.outputs.get(p)
            if not isinstance(v, np.ndarray) or v.dtype != np.float64:
                raise SimulationError(
                    f"output {b.name}.{p} must be a float64 numpy array after initialize, got "
                    f"{type(v).__name__ if not isinstance(v, np.ndarray) else v.dtype}; "
                    "set it with cosim.block.as_signal(value)", t=t0, block=b.name)

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
                problems.append(f"{src.name}.{w.src_port} (shape {have}) -> {dst.name}."
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
                     if f"{b.name}.{p}" not in wanted]
        self._task_ticks = [[] for _ in plan.tasks]
        self._log_lists: dict[str, tuple[list, list]] = {}
        self._log_refs: list[tuple[int, str, str]] = []   # (block index, port, key)
        self._log_shape: dict[str, tuple[int, ...]] = {}
        for i, p in refs:
            b = plan.blocks[i]
            key = f"{b.name}.{p}"
            src = b.outputs if p in b.output_names else b.inputs
            self._log_lists[key] = ([], self._task_ticks[plan.task_of[i]])
            self._log_refs.append((i, p, key))
            self._log_shape[key] = src[p].shape

    def _schedule(self, active: tuple[bool, ...]) -> _Schedule:
        """Build (once per activation pattern) the flat lists the hot loop walks."""
        plan = self.plan
        fan = self._fanout
        run = [active[plan.task_of[i]] for i in range(len(plan.blocks))]
        outputs, states, commits = [], [], []
        for i, b in enumerate(plan.blocks):
            if not run[i]:
                continue
            dt_i = plan.sample_period[i]
            if b.output_names:
                outputs.append((b.output_update, dt_i, fan[i]))
            if b.has_state_update:
                states.append((b.state_update, dt_i))
                commits.append((b.state, b.next_state))
        logs = []
        for i, p, key in self._log_refs:
            if run[i]:
                b = plan.blocks[i]
                src = b.outputs if p in b.output_names else b.inputs
                logs.append((self._log_lists[key][0].append, src, p))
        ticks = [self._task_ticks[n].append for n, on in enumerate(active) if on]
        return _Schedule(outputs, states, commits, logs, ticks)

    def _active(self, k: int) -> tuple[bool, ...]:
        return tuple(k >= tk.offset and (k - tk.offset) % tk.period == 0
                     for tk in self.plan.tasks)

    def _make_fast(self):
        from cosim import codegen
        return codegen.build(self)

    # -- the hot loop ---------------------------------------------------------------------

    def _advance(self, k_stop: int) -> None:
        """Run ticks ``self.k .. k_stop-1`` (outputs, logs, state update, commit)."""
        if self._fast is not None:
            self._fast.advance(k_stop)
            return
        cfg = self.config
        t0, dt = cfg.t0, cfg.dt
        schedules = self._schedules
        k = self.k
        try:
            while k < k_stop:
                t = t0 + k * dt
                active = self._active(k)
                sch = schedules.get(active)
                if sch is None:
                    sch = schedules[active] = self._schedule(active)
                for update, bdt, fan in sch.outputs:
                    update(t, bdt)
                    for dins, dport, souts, sport in fan:
                        dins[dport] = souts[sport]
                if k > self._last_logged:
                    for append, src, port in sch.logs:
                        append(src[port])
                    for append in sch.ticks:
                        append(k)
                    self._last_logged = k
                for update, bdt in sch.states:
                    update(t, bdt)
                for state, nxt in sch.commits:
                    state.update(nxt)
                k += 1
                self.k = k
        except CosimError:
            raise
        except Exception as err:
            self._raise_from(err, t0 + k * dt)

    def _outputs_only(self, k: int) -> None:
        """Compute and log the outputs of tick ``k`` without updating state (end of a run)."""
        if k <= self._last_logged:
            return
        if self._fast is not None:
            self._fast.outputs_only(k)
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
        for append, src, port in sch.logs:
            append(src[port])
        for append in sch.ticks:
            append(k)
        self._last_logged = k

    def _raise_from(self, err: Exception, t: float):
        blk = _block_in_traceback(sys.exc_info()[2])
        name = blk.name if blk is not None else None
        raise SimulationError(f"{type(err).__name__}: {err}", t=t, block=name) from err
