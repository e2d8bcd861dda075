"""The compiled exchange: in-process units stepped by one generated macro loop.

When every unit of a co-simulation runs in this process on the scalar generated path, the
protocol round trips of a macro step (request and reply objects, dispatch, one-value numpy
arrays) cost several times the units' own ticks. :class:`CompiledExchange` writes the
master's plain macro step for such a run as Python source: per unit, its inputs extrapolated
and written into its Inports' live values, its generated step function called, its outputs
read; the macro point accepted; feedthrough units refreshed — every value a local float.

Every operation is the protocol path's, in its order (:meth:`PortHistory.extrapolate
<cosim.master.extrapolation.PortHistory.extrapolate>` and ``inputs``, :class:`Inport
<cosim.model.diagram.Inport>`'s live values, :meth:`LocalUnit.do_step
<cosim.master.local_unit.LocalUnit.do_step>` and ``refresh_outputs``), so results are bit-identical
to it (``tests/cosim/test_compiled_exchange.py`` compares them). The master keeps the protocol
path for everything else: co-initialization, algebraic couplings, adaptive or shortened macro
steps, checkpoints (a chunk stops at them), tracing. Logs are collected after a chunk (in
larger batches than ``log_every`` asks; the samples are the same).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from cosim.config import Scheme
from cosim.errors import SimulationError
from cosim.master import protocol as P
from cosim.master.calls import raise_error
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
    """

    starts: list
    T: float
    nq: int
    values: dict
    points: dict
    error: Exception | None = None
    stopped: dict | None = None
    events: dict | None = None


class CompiledExchange:
    """The generated macro loop of one co-simulation (see the module docstring).

    Parameters
    ----------
    master : Master
        Initialized, with no algebraic coupling to iterate; the exchange reads its graph
        (``inputs``), Gauss–Seidel ``order``, ``refresh_levels``, ``delayed``, ``history``
        (extrapolation order, held outputs), ``cfg`` and start time.
    units : dict of str to LocalUnit
        Unit name -> the in-process unit, in the master's order.
    outputs : dict of str to list of str
        Unit -> its outputs (the master's values and history hold each).
    quantum : Fraction
        The macro-step grid (:attr:`StepControl.quantum
        <cosim.master.stepsize.StepControl.quantum>`); ``H`` is ``nq_step`` quanta.
    nq_step : int

    Attributes
    ----------
    steps : int
        Macro steps taken through the generated loop so far.
    source : str or None
        The generated source (for inspection), once a chunk ran.
    """

    def __init__(self, master, units: dict, outputs: dict, quantum, nq_step: int):
        self.units = units
        self.names = list(units)
        self.graph = master.graph
        self.order = master.order if master.cfg.scheme is Scheme.GAUSS_SEIDEL else self.names
        self.refresh_levels = master.refresh_levels
        self.delayed = master.delayed
        self.history = master.history
        self.cfg = cfg = master.cfg
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
        cannot be compiled: a unit not in this process, algebraic couplings to iterate, an
        adaptive macro step, tracing, a linked String / Binary output (the exchange carries
        floats; unlinked ones stay out of it, logged by their units), or
        ``CosimConfig(compiled=False)``."""
        cfg, control = master.cfg, master.control
        if not cfg.compiled or cfg.adaptive or cfg.trace or master.couplings:
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
            None when no step could be taken here (a unit left the generated path, the
            history is too short to extrapolate at the configured order, or it does not fit
            ``values``): the master steps through the protocol.
        """
        directs = {u: unit.direct() for u, unit in self.units.items()}
        if any(d is None for d in directs.values()):
            return None
        start = self._history(values, points)
        if start is None:
            return None
        signature = tuple((tuple(d.outputs.items()), d.stops is None)
                          for d in directs.values())
        if signature != self.signature:
            self.fn = self._compile(directs)
            self.signature = signature
        ts, ys, ps, qs, nh = start
        ks = [d.k for d in directs.values()]
        lasts = [d.last for d in directs.values()]
        starts: list[float] = []
        out = self.fn(n, n_stop, T, nq, t_end - eps, t_end, *ts, ys, ps, qs, ks, lasts,
                      [d.bound for d in directs.values()],
                      [live for d in directs.values() for live in d.inputs.values()], starts,
                      [d.stops for d in directs.values()])
        err, cur, call, n1, T1, nq1, ta, tb, tc, ys, ps, qs, ks1, lasts1 = out
        for i, (u, unit) in enumerate(self.units.items()):
            k, stepped = ks1[i], ks1[i] - ks[i]
            if err is not None and i == cur and call == "DoStep":
                # Where the failing step got to, as FastPath.advance reports it.
                k = ks1[i] = min(getattr(err, "cosim_tick", k), k + round(self.H / directs[u].dt))
            unit.settle(k, lasts1[i], stepped, self.counts[u])
        steps = n1 - n
        self.steps += steps
        nh = min(3, nh + steps)
        hist = [(tc, qs), (tb, ps), (ta, ys)][3 - nh:]
        chunk_points, chunk_values = {}, {}
        for j, key in enumerate(self.keys):
            pts = [(t, np.array([vals[j]])) for t, vals in hist]
            chunk_points[key] = pts
            chunk_values[key] = pts[-1][1]
        stopped = {u: d.stops[0] for u, d in directs.items() if d.stops}
        chunk = Chunk(starts, T1, nq1, chunk_values, chunk_points, stopped=stopped or None)
        if err is not None:
            chunk.error = self._error(self.names[cur], call, err, directs[self.names[cur]],
                                      ks1[cur], T1)
        return chunk

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

    def _compile(self, directs: dict):
        """Generate and compile the macro loop for the units' current slots."""
        source = _Source(self, directs).text()
        namespace: dict = {}
        exec(compile(source, "<cosim compiled exchange>", "exec"), namespace)
        self.source = source
        return namespace["exchange"]


class _Source:
    """The source of ``exchange(...)`` for one :class:`CompiledExchange`.

    Locals: ``k<i>``, ``l<i>`` each unit's tick and last logged tick; ``f<i>, S<i>, D<i>,
    X<i>, R<i>, G<i>`` its bound step function and values; ``L<i>_<n>`` the live values of its
    input ``n``; ``y<j>, p<j>, q<j>`` output ``j`` at the latest three macro points ``ta, tb,
    tc``; ``o<j>`` its value at the end of the current step, ``r<j>`` after a refresh.
    """

    def __init__(self, ex: CompiledExchange, directs: dict):
        self.ex = ex
        self.directs = directs
        self.unit_index = {u: i for i, u in enumerate(ex.names)}
        self.live = {}
        self.zeroed: set[str] = set()     # live values whose derivatives are always zero
        for i, (u, d) in enumerate(directs.items()):
            for n, name in enumerate(d.inputs):
                self.live[(u, name)] = f"L{i}_{n}"

    def text(self) -> str:
        ex, d = self.ex, self.directs
        names, nk = ex.names, len(ex.keys)
        lives = list(self.live.values())
        lines = ["def exchange(n, n_stop, T, nq, t_lim, t_end, ta, tb, tc, Y, P, Q, K, LAST, "
                 "B, LIVE, starts, STOPS):",
                 "    err = None",
                 "    cur = -1",
                 "    call = 'DoStep'",
                 "    record = starts.append"]
        for i in range(len(names)):
            lines.append(f"    f{i}, S{i}, D{i}, X{i}, R{i}, G{i} = B[{i}]")
        lines += _unpack(lives, "LIVE") + _unpack([f"y{j}" for j in range(nk)], "Y")
        lines += _unpack([f"p{j}" for j in range(nk)], "P")
        lines += _unpack([f"q{j}" for j in range(nk)], "Q")
        lines += _unpack([f"k{i}" for i in range(len(names))], "K")
        lines += _unpack([f"l{i}" for i in range(len(names))], "LAST")
        H = ex.H
        body = []
        fresh: set[str] = set()
        for u in ex.order:
            body += self._step(u, fresh)
            if ex.cfg.scheme is Scheme.GAUSS_SEIDEL:
                fresh.add(u)
        body += ["record(T)", "n += 1", f"nq += {ex.nq_step}",
                 f"T = {ex.t0!r} + nq * {ex.quantum!r}", "tc = tb", "tb = ta", "ta = T"]
        body += [f"q{j} = p{j}; p{j} = y{j}; y{j} = o{j}" for j in range(nk)]
        stoppers = [i for i, u in enumerate(names) if d[u].stops is not None]
        if stoppers:
            # A unit stopped the run in this step: accepted, not refreshed (Master.step).
            lines += [f"    Z{i} = STOPS[{i}]" for i in stoppers]
            body.append(f"if {' or '.join(f'Z{i}' for i in stoppers)}: break")
        for level in ex.refresh_levels:
            body += self._refresh(level)
        lines += [f"    {L}[1] = {L}[2] = {L}[3] = 0.0" for L in sorted(self.zeroed)]
        lines += ["    try:", f"        while n < n_stop and T < t_lim and t_end - T >= {H!r}:"]
        lines += ["            " + s for s in body]
        back = ", ".join
        lines += ["    except Exception as e:", "        err = e",
                  f"    return (err, cur, call, n, T, nq, ta, tb, tc, [{back(f'y{j}' for j in range(nk))}], "
                  f"[{back(f'p{j}' for j in range(nk))}], [{back(f'q{j}' for j in range(nk))}], "
                  f"[{back(f'k{i}' for i in range(len(names)))}], "
                  f"[{back(f'l{i}' for i in range(len(names)))}])"]
        return "\n".join(lines) + "\n"

    def _time(self, u: str) -> str:
        d = self.directs[u]
        return f"tu = {float(d.t0)!r} + k{self.unit_index[u]} * {float(d.dt)!r}"

    def _step(self, u: str, fresh: set) -> list[str]:
        """Inputs over the macro step, the unit's ticks and its outputs at the step's end
        (``SetInputs``, ``DoStep``, ``GetOutputs``)."""
        ex, i, d = self.ex, self.unit_index[u], self.directs[u]
        hist, H, e = ex.history, ex.H, ex.cfg.extrapolation
        counts = ex.counts[u] = {}
        lines = [self._time(u)] if d.inputs else []
        for name, key in ex.graph.inputs[u]:
            L, j = self.live[(u, name)], ex.index[key]
            if key[0] in fresh:                 # PortHistory.interpolate
                order = 0 if hist.held(key, H) else e
                if order == 0:
                    vals = (f"y{j}", "0.0", "0.0", "0.0")
                elif order == 1:
                    vals = (f"y{j}", "1.0", f"(o{j} - y{j}) / {H!r}", "0.0")
                else:
                    lines += [f"f01 = (o{j} - y{j}) / {H!r}",
                              f"f012 = (f01 - (y{j} - p{j}) / (ta - tb)) / (ta + {H!r} - tb)"]
                    vals = (f"y{j}", "1.0", f"f01 - f012 * {H!r}", "2.0 * f012")
            else:
                order = 0 if hist.held(key, H) else e
                if order == 0:
                    vals = (f"y{j}", "0.0", "0.0", "0.0")
                elif order == 1:
                    vals = (f"y{j}", "1.0", f"(y{j} - p{j}) / (ta - tb)", "0.0")
                else:
                    lines += [f"f01 = (y{j} - p{j}) / (ta - tb)",
                              f"f012 = (f01 - (p{j} - q{j}) / (tb - tc)) / (ta - tc)"]
                    vals = (f"y{j}", "1.0", "f01 + f012 * (ta - tb)", "2.0 * f012")
            counts[name] = 0 if vals[1] == "0.0" else (2 if vals[3] != "0.0" else 1)
            if counts[name] == 0:
                # No derivatives: the flags and derivatives stay the zeros the chunk's
                # prologue wrote (a refresh writes zeros too).
                self.zeroed.add(L)
                lines += [f"{L}[0] = {vals[0]}", f"{L}[4] = tu"]
            else:
                lines.append(f"{L}[:] = ({', '.join(vals)}, tu)")
        m = round(H / d.dt)
        # Delayed feedthrough: the outputs at the step's end are logged as computed (the
        # protocol path's RefreshOutputs after DoStep, with the step's inputs).
        k_log = f"k{i} + {m + 1}" if ex.delayed else f"k{i} + {m}"
        lines += [f"cur = {i}",
                  f"_, l{i} = f{i}(k{i}, k{i} + {m + 1}, l{i}, S{i}, D{i}, X{i}, R{i}, G{i}, "
                  f"k{i} + {m}, {k_log})",
                  f"k{i} += {m}"]
        lines += [f"o{ex.index[(u, p)]} = S{i}[{slot}]" for p, slot in d.outputs.items()]
        return lines

    def _refresh(self, level: list[str]) -> list[str]:
        """One refresh level: every unit's inputs set to the values at the macro point first,
        then each unit's outputs recomputed and logged there (``RefreshOutputs``)."""
        ex = self.ex
        lines = []
        for u in level:
            if ex.graph.inputs[u]:
                lines.append(self._time(u))
            for name, key in ex.graph.inputs[u]:
                L = self.live[(u, name)]
                if L in self.zeroed:
                    lines += [f"{L}[0] = y{ex.index[key]}", f"{L}[4] = tu"]
                else:
                    lines.append(f"{L}[:] = (y{ex.index[key]}, 0.0, 0.0, 0.0, tu)")
        lines.append("call = 'RefreshOutputs'")
        outs = []
        for u in level:
            i, d = self.unit_index[u], self.directs[u]
            lines += [f"cur = {i}",
                      f"_, l{i} = f{i}(k{i}, k{i} + 1, l{i}, S{i}, D{i}, X{i}, R{i}, G{i}, "
                      f"k{i}, k{i} + 1)"]
            for p, slot in d.outputs.items():
                j = ex.index[(u, p)]
                lines.append(f"r{j} = S{i}[{slot}]")
                outs.append(f"y{j} = r{j}")
        return lines + outs + ["call = 'DoStep'"]


def _unpack(names: list[str], src: str) -> list[str]:
    """The prologue line unpacking ``src`` into ``names`` (none when empty)."""
    return [f"    {', '.join(names)}, = {src}"] if names else []
