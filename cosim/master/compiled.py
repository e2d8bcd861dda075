"""The compiled exchange: a co-simulation whose units all run in this process, its macro
steps written as one generated Python loop from the macro-step :mod:`~cosim.master.program`
(the source: :mod:`~cosim.master.exchange_source`).

The program fixes what every action of a macro step reads (Gauss–Seidel fresh outputs,
refresh levels and the values each refresh reads, the relog level, iterated couplings);
the engine (:mod:`cosim.master.engine`) runs it through :meth:`Unit.fused
<cosim.master.units.Unit.fused>` calls with a dict and an array per value. Here the same
program is written as Python source over local floats: per unit step, its inputs
extrapolated (or interpolated, or ramping to coupling candidates) and written into its
Inports' live values, its generated step function called (a small one's statements
inlined into the loop, :mod:`~cosim.master.inlined`), its outputs read from their slots;
per refresh, its inputs set to the values the program names and its outputs computed and
logged again; per coupling, a generated evaluation handed to
:func:`cosim.master.coupling.iterate`, the units rolled back on their own side
(:attr:`DirectStep.keep <cosim.master.units.DirectStep>`). Whole chunks of macro steps run in
one call.

Every operation is the protocol path's, in its order (:meth:`PortHistory.extrapolate
<cosim.master.extrapolation.PortHistory.extrapolate>`, ``interpolate`` and ``inputs``,
:class:`Inport <cosim.model.diagram.Inport>`'s live values, :meth:`LocalUnit.do_step
<cosim.master.local_unit.LocalUnit.do_step>` and ``refresh_outputs``), so results are
bit-identical to it (``tests/cosim/test_compiled_exchange.py`` compares them). The master
keeps the engine for co-initialization, adaptive or shortened macro steps, the started-up
first step of an order-2 run, checkpoints (a chunk stops at them) and tracing. A chunk
that would end short of the next step count at which ``log_every`` has the master collect
the logs ends at the one before, so they are collected as between protocol steps. Each
unit's wall time per step goes to :attr:`UnitCalls.step_times
<cosim.master.calls.UnitCalls>` when an observer watches the run (two clock reads per step).
"""

from __future__ import annotations

import math
import time
from array import array
from dataclasses import dataclass

import numpy as np

from cosim.errors import SimulationError
from cosim.fastpath import cache
from cosim.fastpath.runtime import warm
from cosim.master import coupling
from cosim.master import protocol as P
from cosim.master.calls import raise_error
from cosim.master.exchange_source import ExchangeSource
from cosim.master.program import compile_program
from cosim.master.records import StepRecord, StepStatus
from cosim.master.units import error_reply

__all__ = ["Chunk", "CompiledExchange"]


@dataclass
class Chunk:
    """What a run of compiled macro steps did, for the master to take over.

    Attributes
    ----------
    starts : list of float
        Start time of each accepted macro step, s.
    T : float
        The master's time after them, s (``t0 + nq * quantum``).
    nq : int
        Quanta elapsed.
    values : dict of (str, str) to ndarray
        Every unit output at ``T``, shape ``(1,)``.
    points : dict of (str, str) to list of (float, ndarray)
        The extrapolation history (:attr:`PortHistory.points
        <cosim.master.extrapolation.PortHistory.points>`).
    error : Exception or None
        Why the chunk ended early (raised by the master once it took the state over).
    stopped : dict of str to float
        Units that stopped the run in the last macro step -> the time they stopped.
    events : dict of str to float, optional
        Unit -> its next scheduled event from its last step (None: no unit has one).
    records : list of StepRecord, optional
        One per accepted step when they say more than ``StepRecord(t, H)`` (couplings:
        iterations, residual, status); None: those.
    iterations : int
        Coupling evaluations (``Master.stats["iterations"]``).
    """

    starts: list
    T: float
    nq: int
    values: dict
    points: dict
    error: Exception | None = None
    stopped: dict | None = None
    events: dict | None = None
    records: list | None = None
    iterations: int = 0


class CompiledExchange:
    """The generated macro loop of one co-simulation (see the module docstring).

    Parameters
    ----------
    master : Master
        Initialized; the exchange reads its graph (``inputs``, ``coupling_keys``),
        Gauss–Seidel ``order``, ``refresh_levels``, ``delayed``, ``history`` (extrapolation
        order, held outputs), ``cfg``, ``calls``, ``observer`` and start time.
    units : dict of str to Unit
        Unit name -> the in-process unit, in the master's order.
    outputs : dict of str to list of str
        Unit -> its outputs (the master's values and history hold each).
    quantum : Fraction
        The macro-step grid (:attr:`StepControl.quantum
        <cosim.master.stepsize.StepControl.quantum>`); ``H`` is ``nq_step`` quanta.
    nq_step : int

    Attributes
    ----------
    program : Program
        The macro-step program the loop is written from.
    steps : int
        Macro steps taken through the generated loop so far.
    source : str or None
        The generated source (for inspection), once a chunk ran.
    """

    def __init__(self, master, units: dict, outputs: dict, quantum, nq_step: int):
        self.master = master
        self.units = units
        self.names = list(units)
        self.graph = master.graph
        self.history = master.history
        self.cfg = cfg = master.cfg
        self.delayed = master.delayed
        self.program = compile_program(master.graph, cfg.scheme, master.order, master.delayed,
                                       set(units), set(), master.refresh_levels)
        self.coupled = {u for s in self.program.stages for u in s.coupling}
        # Units the loop refreshes at T+H (or logs there as the step left them: delayed
        # feedthrough), which must then take direct refreshes (DirectStep.refreshes).
        self.refreshed = set(units) if master.delayed else \
            {x.unit for s in self.program.stages for x in s.sends if x.reset} | \
            {v for s in self.program.stages for v, _ in s.resolve} | \
            {u for u in self.coupled if any(master.history.held(key, float(cfg.H))
                                            for _, key in master.graph.inputs[u]
                                            if key[0] in self.coupled)}
        self.unkept = False
        self.H = float(cfg.H)        # literals in the source: repr of a plain float
        self.t0 = float(master.config.t0)
        self.quantum = float(quantum)
        self.nq_step = nq_step
        self.keys = [(u, p) for u in self.names for p in outputs[u]]
        self.index = {key: j for j, key in enumerate(self.keys)}
        self.signature = None
        self.fn = None
        self.steps = 0
        self.source: str | None = None
        self.counts: dict[str, dict[str, int]] = {}

    @classmethod
    def build(cls, master, outputs: dict):
        """The compiled exchange of an initialized master, or None when its macro step
        cannot be compiled: a unit not in this process, an adaptive macro step, tracing,
        a linked String / Binary output (the exchange carries floats; unlinked ones stay out
        of it, logged by their units), or ``CosimConfig(compiled=False)``."""
        cfg, control = master.cfg, master.control
        if not cfg.compiled or cfg.adaptive or cfg.trace:
            return None
        text = {(u, p) for u, ps in outputs.items() for p in ps
                if master.values[(u, p)].dtype == object}
        if text:
            if any(key in text for key in master.graph.driver.values()):
                return None
            outputs = {u: [p for p in ps if (u, p) not in text] for u, ps in outputs.items()}
        units = {u: p.in_process() for u, p in master.proxies.items()}
        if any(unit is None for unit in units.values()):
            return None
        nq_step = control.quanta(cfg.H)
        if not nq_step or control.on_grid(cfg.H) != cfg.H:
            return None
        return cls(master, units, outputs, control.quantum, nq_step)

    # -- running ----------------------------------------------------------------------------

    def run(self, T: float, nq: int, n: int, n_stop: int, t_end: float, eps: float,
            values: dict, points: dict) -> Chunk | None:
        """Whole macro steps of ``H`` from ``T`` while ``T + H <= t_end`` and ``n <
        n_stop``.

        Parameters
        ----------
        T, nq, n : float, int, int
            The master's time, quanta elapsed and accepted macro steps.
        n_stop : int
            The step count at which the master must checkpoint.
        t_end, eps : float
            End of the run and the time tolerance of the master's loop, s.
        values, points : dict
            The master's outputs at ``T`` and its extrapolation history.

        Returns
        -------
        Chunk or None
            None when no step could be taken here (a unit left the generated path, a unit
            of a coupling cannot roll back on its side, a unit to refresh cannot be refreshed
            by a direct call, the history is too short to
            extrapolate at the configured order, or it does not fit ``values``): the master
            steps through the engine.
        """
        if self.unkept:
            return None
        directs = {u: unit.direct() for u, unit in self.units.items()}
        if any(d is None for d in directs.values()):
            return None
        if (self.cfg.iterate and any(directs[u].keep is None for u in self.coupled)) or \
                any(not directs[u].refreshes for u in self.refreshed):
            self.unkept = True          # (a property of the units: not asked again)
            return None
        start = self._history(values, points)
        if start is None:
            return None
        timed = self.master.observer is not None
        # (A unit's step function itself: an inlined one's statements and constants are its.)
        signature = (timed,) + tuple((tuple(d.outputs.items()), d.stops is None, d.bound[0])
                                     for d in directs.values())
        if signature != self.signature:
            self.fn = self._compile(directs, timed)
            self.signature = signature
        ts, ys, ps, qs, nh = start
        every = self.cfg.log_every
        ks = [d.k for d in directs.values()]
        lasts = [d.last for d in directs.values()]
        starts: list[float] = []
        records: list | None = [] if self.coupled else None
        counter = [0]
        walls: list = [([], []) for _ in self.names] if timed else []
        rest = (n - n % every + every, T, nq, t_end - eps, t_end, *ts, ys, ps, qs, ks, lasts,
                [d.bound for d in directs.values()],
                [live for d in directs.values() for live in d.inputs.values()], starts,
                [d.stops for d in directs.values()], [d.keep for d in directs.values()],
                records, counter, walls, self._helpers(directs))
        # Specialized before the chunk: a run's macro steps take one call or a few.
        warm(self.fn, n, n, *rest)
        out = self.fn(n, n_stop, *rest)
        err, cur, n1, T1, nq1, ta, tb, tc, ys, ps, qs, ks1, lasts1 = out
        nu = len(self.names)
        call = "DoStep" if cur < nu else "RefreshOutputs"
        cur = cur if cur < nu else cur - nu
        for i, (u, unit) in enumerate(self.units.items()):
            k, stepped = ks1[i], ks1[i] - ks[i]
            if err is not None and i == cur and call == "DoStep":
                # Where the failing step got to, as FastPath.advance reports it.
                k = ks1[i] = min(getattr(err, "cosim_tick", k), k + round(self.H / directs[u].dt))
            unit.settle(k, lasts1[i], stepped, self.counts[u])
        steps = n1 - n
        self.steps += steps
        self._account(walls)
        nh = min(3, nh + steps)
        hist = [(tc, qs), (tb, ps), (ta, ys)][3 - nh:]
        chunk_points, chunk_values = {}, {}
        for j, key in enumerate(self.keys):
            pts = [(t, np.array([vals[j]])) for t, vals in hist]
            chunk_points[key] = pts
            chunk_values[key] = pts[-1][1]
        stopped = {u: d.stops[0] for u, d in directs.items() if d.stops}
        chunk = Chunk(starts, T1, nq1, chunk_values, chunk_points, stopped=stopped or None,
                      records=records, iterations=counter[0])
        if err is not None:
            chunk.error = err if cur < 0 else self._error(
                self.names[cur], call, err, directs[self.names[cur]], ks1[cur], T1)
        return chunk

    def _account(self, walls: list) -> None:
        """Each unit's wall time per step call (a coupling's iterations each) into
        ``calls.step_times``, as the engine's rounds note them."""
        times = self.master.calls.step_times
        for u, (ts, secs) in zip(self.names, walls):
            if secs:
                mine = times.get(u)
                if mine is None:
                    mine = times[u] = (array("d"), array("d"))
                mine[0].extend(ts)
                mine[1].extend(secs)

    def _helpers(self, directs: dict) -> tuple:
        """What the loop calls besides the units: per unit the dropping of a sample logged
        at its tick (a second refresh there), the iteration, its failure, a record, the
        clock."""
        unlogs = [(lambda k, R=d.bound[4], G=d.bound[5],
                   W=[self.units[u].sim.store.width(n) for n in range(len(d.bound[5]))]:
                   _unlog(R, G, W, k)) if d.generated else None
                  for u, d in directs.items()]
        cfg, graph = self.cfg, self.graph

        def failed(g, solve, T, again=False):
            coupling.not_converged(cfg, coupling.AGAIN if again else "macro step: the",
                                   graph, list(g), solve, T)

        return (unlogs, lambda c, run: coupling.iterate(c, run, cfg), failed, np.array,
                StepRecord, StepStatus, time.perf_counter)

    def _history(self, values: dict, points: dict):
        """``(times, latest, previous, before, length)`` of the history as floats, or None
        when the master's history cannot start a chunk (see :meth:`run`)."""
        hists = [points[key] for key in self.keys]
        nh = len(hists[0]) if hists else 3
        if nh < min(self.cfg.extrapolation, 2) + 1:
            return None
        times = [t for t, _ in hists[0]] if hists else []
        cols: list[list[float]] = [[], [], []]
        for key, hist in zip(self.keys, hists):
            if len(hist) != nh or [t for t, _ in hist] != times:
                return None
            y = float(values[key][0])
            if y != float(hist[-1][1][0]):
                return None
            back = [float(v[0]) for _, v in hist][::-1] + [0.0, 0.0]
            for c in range(3):
                cols[c].append(back[c])
        pad = times[::-1] + [math.nan, math.nan, math.nan]
        return pad[:3], cols[0], cols[1], cols[2], nh

    def _error(self, unit: str, call: str, err: Exception, direct, k: int, T: float):
        """The error the protocol path raises for ``err`` in ``unit``'s ``call``."""
        t = direct.t0 + k * direct.dt
        hint = (" (in the generated fast path; rerun with SimulationConfig(fast=False) to "
                "find the block)") if direct.generated else ""
        inner = SimulationError(f"{type(err).__name__}: {err}{hint}", t=t)
        req = P.DoStep(T, self.cfg.H) if call == "DoStep" else P.RefreshOutputs()
        try:
            raise_error(unit, req, error_reply(inner, t), T)
        except Exception as wrapped:  # noqa: BLE001 - handed to the master to raise
            wrapped.__cause__ = err
            return wrapped

    # -- writing the loop -------------------------------------------------------------------

    def _compile(self, directs: dict, timed: bool):
        """Generate the macro loop for the units' current slots; its code comes from the
        cache of generated code when the same source was compiled before (a sweep's or a
        re-run's co-simulation of the same structure)."""
        writer = ExchangeSource(self, directs, timed)
        source = writer.text()
        namespace: dict = dict(writer.namespace)
        (code,) = cache.code_for([source], "<cosim compiled exchange>")
        exec(code, namespace)
        self.source = source
        return namespace["exchange"]


def _unlog(rows: list, ticks: list, widths: list, k: int) -> None:
    """Drop the samples a unit's generated function logged at tick ``k`` (its last), as
    :meth:`LogStore.unlog <cosim.run.logstore.LogStore.unlog>` does: a refresh at a macro
    point refreshed already in this macro step replaces its sample (the relog level, the
    refresh of a coupling at a held output's sample hit). They are rows not flushed yet (the
    first refresh ran in this very call), ``widths[task]`` values each."""
    for task_rows, task_ticks, width in zip(rows, ticks, widths):
        if task_ticks and task_ticks[-1] == k:
            task_ticks.pop()
            del task_rows[len(task_rows) - width:]
