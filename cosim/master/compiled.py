"""The compiled exchange: a co-simulation whose units all run in this process, its macro
steps written as one generated Python loop from the macro-step :mod:`~cosim.master.program`.

The program fixes what every action of a macro step reads (Gauss–Seidel fresh outputs,
refresh levels and the values each refresh reads, the relog level, iterated couplings);
the engine (:mod:`cosim.master.engine`) runs it through :meth:`Unit.fused
<cosim.master.units.Unit.fused>` calls with a dict and an array per value. Here the same
program is written as Python source over local floats: per unit step, its inputs
extrapolated (or interpolated, or ramping to coupling candidates) and written into its
Inports' live values, its generated step function called, its outputs read from their
slots; per refresh, its inputs set to the values the program names and its outputs computed
and logged again; per coupling, a generated evaluation handed to
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

import gc
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
        signature = (timed,) + tuple((tuple(d.outputs.items()), d.stops is None)
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
        # Specialized before the chunk (a run's macro steps take one call or a few), and run
        # without the cyclic collector, as the units' own long calls (cosim.fastpath.runtime).
        warm(self.fn, n, n, *rest)
        collecting = gc.isenabled()
        if collecting:
            gc.disable()
        try:
            out = self.fn(n, n_stop, *rest)
        finally:
            if collecting:
                gc.enable()
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

        def failed(g, solve, T):
            coupling.not_converged(cfg, "macro step: the", graph, list(g), solve, T)

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
        source = _Source(self, directs, timed).text()
        namespace: dict = {}
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


class _Source:
    """The source of ``exchange(...)`` for one :class:`CompiledExchange`.

    Locals: ``k<i>``, ``l<i>`` each unit's tick and last logged tick; ``f<i>, S<i>, D<i>,
    X<i>, R<i>, G<i>`` its bound step function and values; ``L<i>_<n>`` the live values of its
    input ``n``; ``y<j>, p<j>, q<j>`` output ``j`` at the latest three macro points ``ta, tb,
    tc``; ``o<j>`` its value as the step computed it for T+H, ``r<j>`` as refreshed there;
    ``cur`` the unit being called (``i``: its step, ``n_units + i``: a refresh, -1: none).
    Live-value writes are kept as ``("live", L, values)`` until every write is known: a live
    value whose derivatives are zero in all of them is zeroed once, and written value and
    time only.
    """

    def __init__(self, ex: CompiledExchange, directs: dict, timed: bool):
        self.ex = ex
        self.directs = directs
        self.timed = timed
        self.unit_index = {u: i for i, u in enumerate(ex.names)}
        self.live = {}
        self.orders: dict[str, set] = {}      # live value -> derivative counts written
        for i, (u, d) in enumerate(directs.items()):
            ex.counts[u] = {}
            for n, name in enumerate(d.inputs):
                self.live[(u, name)] = f"L{i}_{n}"
        self.refreshed: set[int] = set()      # outputs refreshed at T+H (y from r)
        self.stoppers = [i for i, u in enumerate(ex.names) if directs[u].stops is not None]

    def text(self) -> str:
        ex = self.ex
        nk, nu = len(ex.keys), len(ex.names)
        H = ex.H
        head = ["def exchange(n, n_stop, n_mark, T, nq, t_lim, t_end, ta, tb, tc, Y, P, Q, K, LAST, "
                "B, LIVE, starts, STOPS, KEEPS, records, counter, WALLS, HELP):",
                "    err = None",
                "    cur = -1",
                "    record = starts.append",
                "    UNLOG, ITERATE, FAILED, ARRAY, RECORD, STATUS, clock = HELP"]
        for i in range(nu):
            head.append(f"    f{i}, S{i}, D{i}, X{i}, R{i}, G{i} = B[{i}]")
            head.append(f"    U{i} = UNLOG[{i}]")
            if self.timed:
                head.append(f"    V{i} = WALLS[{i}][0].append; W{i} = WALLS[{i}][1].append")
        head += _unpack(list(self.live.values()), "LIVE")
        for v in "ypq":
            head += _unpack([f"{v}{j}" for j in range(nk)], v.upper())
        head += _unpack([f"k{i}" for i in range(nu)], "K")
        head += _unpack([f"l{i}" for i in range(nu)], "LAST")
        head += [f"    o{j} = r{j} = y{j}" for j in range(nk)]
        if self.stoppers:
            head += [f"    Z{i} = STOPS[{i}]" for i in self.stoppers]
        body = []
        if ex.coupled:
            body += ["its = 0", "res = 0.0", "status = ACCEPTED"]
            head.append("    ACCEPTED, CONTINUED, UNITERATED = STATUS.ACCEPTED, "
                        "STATUS.CONTINUED, STATUS.UNITERATED")
        if self.stoppers:
            body.append("stop = False")
        closures = []
        for c, stage in enumerate(ex.program.stages):
            if stage.coupling:
                body += self._coupling(c, stage, closures)
            else:
                body += self._round(stage)
        body += ["record(T)"]
        if ex.coupled:
            body += [f"records.append(RECORD(T, {H!r}, its, res, status))"]
        body += ["n += 1", f"nq += {ex.nq_step}", f"T = {ex.t0!r} + nq * {ex.quantum!r}",
                 "tc = tb", "tb = ta", "ta = T"]
        body += [f"q{j} = p{j}; p{j} = y{j}; y{j} = o{j}" for j in range(nk)]
        if self.stoppers:
            # A unit stopped the run in this step: accepted, not refreshed (Master.step).
            body.append("if stop: break")
        body += [f"y{j} = r{j}" for j in sorted(self.refreshed)]
        # At a step count where log_every has the master collect the logs: a chunk that
        # would end before the next one ends here, so that its last macro point is collected
        # (or not) as between protocol steps (Master.finish refreshes the last one again).
        every, nq_step = ex.cfg.log_every, ex.nq_step
        body += ["if n == n_mark:", f"    n_mark += {every}",
                 f"    T_ = {ex.t0!r} + (nq + {(every - 1) * nq_step}) * {ex.quantum!r}",
                 f"    if not (T_ < t_lim and t_end - T_ >= {H!r}): break"]
        for pre, fn in closures:
            head += pre + self._render(fn, 8)
        lines = head + [f"    {L}[1] = {L}[2] = {L}[3] = 0.0" for L in sorted(self.zeroed())]
        lines += ["    try:", f"        while n < n_stop and T < t_lim and t_end - T >= {H!r}:"]
        lines += self._render(body, 12)
        back = ", ".join
        lines += ["    except Exception as e:", "        err = e",
                  f"    return (err, cur, n, T, nq, ta, tb, tc, "
                  f"[{back(f'y{j}' for j in range(nk))}], "
                  f"[{back(f'p{j}' for j in range(nk))}], [{back(f'q{j}' for j in range(nk))}], "
                  f"[{back(f'k{i}' for i in range(nu))}], "
                  f"[{back(f'l{i}' for i in range(nu))}])"]
        return "\n".join(lines) + "\n"

    # -- live values --------------------------------------------------------------------

    def zeroed(self) -> set:
        """Live values whose derivatives every write leaves zero."""
        return {L for L, orders in self.orders.items() if orders == {0}}

    def _render(self, body: list, indent: int) -> list[str]:
        """``body``'s lines indented, its live-value writes written out."""
        pad = " " * indent
        zeroed = self.zeroed()
        out = []
        for ln in body:
            if type(ln) is str:
                out.append(pad + ln)
                continue
            _, L, vals, extra = ln
            ind = pad + " " * extra
            if L in zeroed:
                out += [f"{ind}{L}[0] = {vals[0]}", f"{ind}{L}[4] = tu"]
            else:
                out.append(f"{ind}{L}[:] = ({', '.join(vals)}, tu)")
        return out

    def _write(self, u: str, name: str, vals: tuple, step: bool = False) -> tuple:
        """A write of unit ``u``'s input ``name`` into its live values ``vals`` (value, has
        derivatives, d1, d2); ``step``: the step's, whose derivative count the unit takes
        back when it settles (a refresh's have none)."""
        L = self.live[(u, name)]
        n = 0 if vals[1] == "0.0" else (2 if vals[3] != "0.0" else 1)
        self.orders.setdefault(L, set()).add(n)
        if step:
            self.ex.counts[u][name] = n
        return ("live", L, vals, 0)

    # -- actions ------------------------------------------------------------------------

    def _time(self, u: str) -> str:
        d = self.directs[u]
        return f"tu = {float(d.t0)!r} + k{self.unit_index[u]} * {float(d.dt)!r}"

    def _order(self, key) -> int:
        """The degree of output ``key``'s polynomial over the step: 0 when it is held."""
        ex = self.ex
        return 0 if ex.history.held(key, ex.H) else min(ex.cfg.extrapolation, 2)

    @staticmethod
    def _slopes(j: int, order: int) -> tuple[list[str], str, str]:
        """Lines and the derivatives at T (``d1``, ``d2``) of output ``j``'s polynomial of
        degree ``order`` (1, 2) through its past macro points (:meth:`PortHistory.extrapolate
        <cosim.master.extrapolation.PortHistory.extrapolate>`)."""
        lines = [f"f01 = (y{j} - p{j}) / (ta - tb)"]
        if order == 1:
            return lines, "f01", "0.0"
        lines.append(f"f012 = (f01 - (p{j} - q{j}) / (tb - tc)) / (ta - tc)")
        return lines, "f01 + f012 * (ta - tb)", "2.0 * f012"

    def _predict(self, j: int, key) -> tuple[list[str], str]:
        """Lines and expression of output ``j``'s extrapolation to T+H (``extrapolate``'s
        prediction)."""
        H, order = self.ex.H, self._order(key)
        if order == 0:
            return [], f"y{j}"
        lines, d1, _ = self._slopes(j, order)
        if order == 1:
            return lines, f"y{j} + f01 * {H!r}"
        return lines + [f"d1 = {d1}"], f"y{j} + d1 * {H!r} + f012 * {H!r} * {H!r}"

    def _inputs(self, u: str, fresh: set, cand: dict) -> list:
        """Unit ``u``'s inputs over the step (:meth:`PortHistory.inputs`): ramping to
        coupling candidates ``cand`` (key -> local), interpolated to outputs ``fresh``
        computed for T+H, else extrapolated."""
        ex = self.ex
        H = ex.H
        lines = [self._time(u)] if ex.graph.inputs[u] else []
        for name, key in ex.graph.inputs[u]:
            j = ex.index[key]
            order = self._order(key)
            if key in cand:                    # a ramp whatever the order, unless held
                vals = (f"y{j}", "0.0", "0.0", "0.0") if ex.history.held(key, H) else \
                    (f"y{j}", "1.0", f"({cand[key]} - y{j}) / {H!r}", "0.0")
            elif order == 0:
                vals = (f"y{j}", "0.0", "0.0", "0.0")
            elif key in fresh:                 # PortHistory.interpolate
                if order == 1:
                    vals = (f"y{j}", "1.0", f"(o{j} - y{j}) / {H!r}", "0.0")
                else:
                    lines += [f"f01 = (o{j} - y{j}) / {H!r}",
                              f"f012 = (f01 - (y{j} - p{j}) / (ta - tb)) / (ta + {H!r} - tb)"]
                    vals = (f"y{j}", "1.0", f"f01 - f012 * {H!r}", "2.0 * f012")
            else:                              # PortHistory.extrapolate
                more, d1, d2 = self._slopes(j, order)
                lines += more
                vals = (f"y{j}", "1.0", d1, d2)
            lines.append(self._write(u, name, vals, step=True))
        return lines

    def _call(self, u: str, lines: list, refresh: bool) -> list:
        """``lines`` (a call of unit ``u``'s step function) with ``cur`` set, timed when an
        observer watches the run."""
        i = self.unit_index[u]
        head = [f"cur = {len(self.ex.names) + i if refresh else i}"]
        if not self.timed or refresh:
            return head + lines
        return head + ["w_ = clock()"] + lines + [f"W{i}(clock() - w_); V{i}(T)"]

    def _step(self, u: str, fresh: set, cand: dict | None = None) -> list:
        """Unit ``u``'s step over the macro step (``SetInputs``, ``DoStep``, the outputs at
        its end into ``o``)."""
        ex, i, d = self.ex, self.unit_index[u], self.directs[u]
        lines = self._inputs(u, fresh, cand or {})
        m = round(ex.H / d.dt)
        # Delayed feedthrough: the outputs at the step's end are logged as computed (the
        # protocol path's RefreshOutputs after DoStep, with the step's inputs).
        k_log = f"k{i} + {m + 1}" if ex.delayed else f"k{i} + {m}"
        lines += self._call(u, [f"_, l{i} = f{i}(k{i}, k{i} + {m + 1}, l{i}, S{i}, D{i}, X{i}, "
                                f"R{i}, G{i}, k{i} + {m}, {k_log})", f"k{i} += {m}"], False)
        lines += [f"o{ex.index[(u, p)]} = S{i}[{slot}]" for p, slot in d.outputs.items()]
        return lines

    def _refresh(self, u: str, values: list, into: str) -> list:
        """Unit ``u``'s refresh at T+H (``RefreshOutputs``): ``values`` ``(input, local)``
        set (values only), its outputs computed and logged (replacing a sample logged at
        that tick), read into ``into`` (``"r"`` or ``"o"``)."""
        ex, i, d = self.ex, self.unit_index[u], self.directs[u]
        lines = [self._time(u)] if values else []
        lines += [self._write(u, name, (v, "0.0", "0.0", "0.0")) for name, v in values]
        call = []
        if d.generated:
            call += [f"if l{i} >= k{i}:", f"    U{i}(k{i})", f"    l{i} = k{i} - 1"]
        call.append(f"_, l{i} = f{i}(k{i}, k{i} + 1, l{i}, S{i}, D{i}, X{i}, R{i}, G{i}, "
                    f"k{i}, k{i} + 1)")
        lines += self._call(u, call, True)
        for p, slot in d.outputs.items():
            j = ex.index[(u, p)]
            lines.append(f"{into}{j} = S{i}[{slot}]")
            if into == "r":
                self.refreshed.add(j)
        return lines

    def _round(self, stage) -> list:
        """A round of the program: each unit's step and/or refresh, in order; what a refresh
        reads is what was known when the round began (as the engine sends it)."""
        ex = self.ex
        lines = []
        if self.stoppers:
            lines.append("halt = stop")     # (a refresh alone is not sent once one stopped)
        written: set[str] = set()
        early: dict[str, str] = {}
        body = []
        for s in stage.sends:
            u, i = s.unit, self.unit_index[s.unit]
            if s.step:
                body += self._step(u, set(s.fresh))
                written |= {f"o{ex.index[(u, p)]}" for p in self.directs[u].outputs}
                if i in self.stoppers:
                    body.append(f"if Z{i}: stop = True")
            if not s.reset:
                continue
            values = []
            for name, key, post in s.sources:
                v = f"{'r' if post else 'o'}{ex.index[key]}"
                if v in written:                # changed earlier in this round: its value
                    v = early.setdefault(v, f"e{len(early)}")   # at the round's start
                values.append((name, v))
            refresh = self._refresh(u, values, "r")
            written |= {f"r{ex.index[(u, p)]}" for p in self.directs[u].outputs}
            if s.step and i in self.stoppers:
                body += [f"if not Z{i}:", *_indent(refresh)]
            elif not s.step and self.stoppers:
                body += ["if not halt:", *_indent(refresh)]
            else:
                body += refresh
        return lines + [f"{e} = {v}" for v, e in early.items()] + body

    def _coupling(self, c: int, stage, closures: list) -> list:
        """An algebraic coupling of the program iterated to a fixed point over the macro
        step (:func:`cosim.master.coupling.iterate` with a generated evaluation, the units
        keeping and restoring their state on their side), or stepped once
        (``iterate=False``: its residual recorded)."""
        ex = self.ex
        g = list(stage.coupling)
        keys = ex.graph.coupling_keys(g)
        fresh = set(stage.fresh)
        idx = [ex.index[k] for k in keys]
        lines = []
        preds = []
        for j, key in zip(idx, keys):
            pre, expr = self._predict(j, key)
            lines += pre
            lines.append(f"x{j} = {expr}")
            preds.append(f"x{j}")
        if not ex.cfg.iterate:
            for u in g:
                lines += self._step(u, fresh)
            lines.append("res = max(res, " + (f"max({', '.join(f'abs(o{j} - x{j})' for j in idx)})"
                                              if len(idx) > 1 else f"abs(o{idx[0]} - x{idx[0]})")
                         + ")")
            lines.append("status = UNITERATED")
            return lines
        cand = {key: f"c{m}" for m, key in enumerate(keys)}
        mine = [self.unit_index[u] for u in g]
        state = [f"k{i}" for i in mine] + [f"l{i}" for i in mine] + \
            [f"o{ex.index[(u, p)]}" for u in g for p in self.directs[u].outputs]
        kept = [f"K{c}_{i}" for i in mine] + [f"J{c}_{i}" for i in mine]
        fn = [f"def ev{c}(c, rollback):",
              f"    nonlocal cur, {', '.join(state + kept + [f'RS{c}_{i}' for i in mine])}"]
        ev = ["if rollback:"]
        ev += [f"    RS{c}_{i}(); k{i} = K{c}_{i}; l{i} = J{c}_{i}" for i in mine]
        ev += ["else:"]
        ev += [f"    RS{c}_{i} = KEEPS[{i}](); K{c}_{i} = k{i}; J{c}_{i} = l{i}" for i in mine]
        ev.append(f"{', '.join(cand.values())}, = c.tolist()")
        period = ex.history.held
        for u in g:
            ev += self._step(u, fresh, cand)
            # An input from a held coupling output takes its candidate at T+H only: the
            # unit is refreshed there for it (PortHistory.held_at_end).
            end = [(name, cand[key]) for name, key in ex.graph.inputs[u]
                   if key in cand and period(key, ex.H)]
            if end:
                ev += self._refresh(u, end, "o")
        ev += ["counter[0] += 1", f"return ARRAY([{', '.join(f'o{j}' for j in idx)}])"]
        # (Rendered last: a live value's writes are all known then.) The closure's names
        # exist before it is defined.
        closures.append(([f"    {v} = None" for v in kept + [f"RS{c}_{i}" for i in mine]]
                         + [f"    {fn[0]}", f"    {fn[1]}"], ev))
        lines += [f"sv = ITERATE(ARRAY([{', '.join(preds)}]), ev{c})",
                  "its = max(its, sv.iterations)", "res = max(res, sv.residual)",
                  "if not sv.converged:",
                  "    cur = -1",
                  f"    FAILED({tuple(g)!r}, sv, T)",
                  "    status = CONTINUED"]
        return lines


def _indent(lines: list) -> list:
    """``lines`` one level deeper (a live-value write carries its extra indent)."""
    return [("    " + ln) if type(ln) is str else ln[:3] + (ln[3] + 4,) for ln in lines]


def _unpack(names: list[str], src: str) -> list[str]:
    """The prologue line unpacking ``src`` into ``names`` (none when empty)."""
    return [f"    {', '.join(names)}, = {src}"] if names else []
