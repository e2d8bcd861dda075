"""The co-simulation master: advances units macro step by macro step.

Per macro step ``[T, T+H]`` the master sets every unit's inputs (their value at ``T`` plus
derivatives from an extrapolation of past macro points, order 0/1/2, or — Gauss–Seidel — an
interpolation to values already computed for ``T+H``), steps the units (Jacobi: all at once;
Gauss–Seidel: in the order of the unit graph), and exchanges outputs. Units coupled through
direct feedthrough in a cycle (an *algebraic coupling*) are iterated to a fixed point, rolled
back with ``get_state`` / ``set_state`` between iterations (relaxation, Aitken, Anderson or
Newton). An adaptive macro step compares extrapolated with actual inputs, rejects and rolls
back steps over tolerance and grows calm ones. Logs are collected in batches, checkpoints
gathered centrally. The master sees units only through proxies speaking :mod:`cosim.master.protocol`.
"""

from __future__ import annotations

import json
import math
import time
import warnings
from fractions import Fraction
from pathlib import Path

import numpy as np

from cosim.master import protocol as P
from cosim.config import Acceleration, OnNonConvergence, Scheme
from cosim.errors import (ConvergenceError, ModelError, SimulationError, TransportError)
from cosim.numerics.fixedpoint import Aitken, Anderson, Relaxation
from cosim.run.logs import Logs

__all__ = ["Master"]

def _components(nodes, succ):
    """Strongly connected components (Tarjan), each a list in ``nodes`` order, in reverse
    topological order."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in succ[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp, key=nodes.index))

    for v in nodes:
        if v not in index:
            visit(v)
    return out


class Master:
    """Drive units through macro steps.

    Parameters
    ----------
    proxies : dict of str to proxy
        Unit name -> proxy with ``submit(requests) -> handle`` and ``result(handle) ->
        replies`` (a list, one reply per request); proxies of remote units overlap the calls
        of one Jacobi group. A proxy may also have ``flush()``, called once every request of
        a call is submitted (so that units of one server share a message).
    links : list of Link
        Unit-to-unit connections.
    config : SimulationConfig
        ``config.cosim`` holds the master's options; ``t0`` / ``t_end`` the interval.

    Attributes
    ----------
    step_log : list of dict
        One record per macro step attempt: ``t``, ``H``, ``iterations``, ``residual``,
        ``status`` (``accepted``, ``rejected``, ``continued`` — non-converged accepted on
        request —, ``uniterated`` — an algebraic coupling run without iteration —,
        ``recovered`` after a unit failure, ``stopped`` when a unit's stop event ended the
        run).
    trace : list of (str, str, float)
        ``(unit, call, t)`` of every request, when ``cosim.trace`` is on.
    """

    def __init__(self, proxies: dict, links, config):
        self.proxies = proxies
        self.names = list(proxies)
        self.links = list(links)
        self.config = config
        self.cfg = config.cosim
        self.trace: list[tuple[str, str, float]] = []
        self.step_log: list[dict] = []
        self.stats = {"macro_steps": 0, "rejected": 0, "iterations": 0, "recoveries": 0}
        self._checkpoint = None
        self.desc = {}
        self.T = config.t0
        self._logs: dict[str, tuple[list, list]] = {}
        self._initialized = False
        #: Proxies that queue submitted requests until flushed (several units per message).
        self._flush = {u: getattr(p, "flush", None) for u, p in proxies.items()}
        #: Each unit's next scheduled event, from its latest StepResult.
        self._next_event: dict[str, float] = {}
        #: Units that stopped at an event in the latest attempt -> the time they stopped.
        self._stopped: dict[str, float] = {}

    # -- calling units --------------------------------------------------------------------

    def _call(self, batch: dict[str, list], t: float) -> dict[str, list]:
        """Send each unit its requests (all units at once) and check every reply."""
        if self.cfg.trace:
            for u, reqs in batch.items():
                for r in reqs:
                    self.trace.append((u, type(r).__name__, t))
        handles = {u: self.proxies[u].submit(reqs) for u, reqs in batch.items()}
        for u in handles:
            flush = self._flush.get(u)
            if flush is not None:
                flush()             # all units' requests are queued: send (one per server)
        out = {}
        for u, h in handles.items():
            replies = self.proxies[u].result(h)
            for req, rep in zip(batch[u], replies):
                if isinstance(rep, P.ErrorReply):
                    self._raise(u, req, rep, t)
                elif type(rep) is P.StepResult:
                    self._next_event[u] = rep.next_event
                    # The latest step decides (a rolled-back one that stopped does not count).
                    if rep.event:
                        self._stopped[u] = rep.t_reached
                    else:
                        self._stopped.pop(u, None)
            out[u] = replies
        return out

    def _raise(self, unit, req, rep: P.ErrorReply, t):
        """Turn a unit's ErrorReply into the cosim error of its kind, naming unit and call."""
        call = type(req).__name__
        at = rep.t if rep.t is not None else t
        if rep.kind in (P.ErrorKind.CODEC, P.ErrorKind.INTERNAL):
            raise TransportError(unit, call, rep.message, t=at)
        if rep.kind in (P.ErrorKind.SIMULATION, P.ErrorKind.CONVERGENCE):
            raise SimulationError(f"unit {unit!r}, {call}: {rep.message}", t=at)
        raise ModelError(f"unit {unit!r}, {call} at t={at:.9g}: {rep.message}")

    # -- set-up ---------------------------------------------------------------------------

    def initialize(self) -> None:
        """Initialize every unit, check the links, and co-initialize the outputs at t0."""
        t0 = self.config.t0
        reps = self._call({u: [P.Initialize(t0), P.Describe()] for u in self.names}, t0)
        self.desc = {u: reps[u][1] for u in self.names}
        self._check_links()
        self._period = {(u, p.name): p.sample_time for u, d in self.desc.items()
                        for p in d.outputs}
        self._build_graph()
        self._quantum = self._common_step()
        self._quanta_cache: dict[float, int] = {}
        self._nq = 0          # quanta elapsed: T = t0 + nq * quantum, never accumulated
        H = self.cfg.H
        if not self._is_multiple(H):
            raise ModelError(f"macro step H={H} is not a common multiple of the units' steps "
                             f"({', '.join(f'{u}: {d.dt:g}' for u, d in self.desc.items())}); "
                             f"use a multiple of {float(self._quantum):g}")
        self.H = H
        self.T = t0
        self.n = 0
        reps = self._call({u: [P.GetOutputs()] for u in self.names}, t0)
        self.values = {(u, p): v for u in self.names for p, v in reps[u][0].values.items()}
        self._coinitialize()
        self.history = {key: [(t0, v)] for key, v in self.values.items()}
        self._initialized = True
        if self.cfg.checkpoint_every:
            self._checkpoint = self._capture()

    def _check_links(self) -> None:
        problems = []
        outs = {u: {p.name: p.shape for p in d.outputs} for u, d in self.desc.items()}
        ins = {u: {p.name: p.shape for p in d.inputs} for u, d in self.desc.items()}
        self.driver = {}
        for ln in self.links:
            if ln.src not in outs or ln.src_port not in outs[ln.src]:
                problems.append(f"link {ln}: unit {ln.src!r} has no output {ln.src_port!r}")
                continue
            if ln.dst not in ins or ln.dst_port not in ins[ln.dst]:
                problems.append(f"link {ln}: unit {ln.dst!r} has no input {ln.dst_port!r}")
                continue
            if outs[ln.src][ln.src_port] != ins[ln.dst][ln.dst_port]:
                problems.append(f"link {ln}: shapes differ ({outs[ln.src][ln.src_port]} vs "
                                f"{ins[ln.dst][ln.dst_port]})")
            if (ln.dst, ln.dst_port) in self.driver:
                problems.append(f"input {ln.dst}.{ln.dst_port} is driven twice")
            self.driver[(ln.dst, ln.dst_port)] = (ln.src, ln.src_port)
        for u, ports in ins.items():
            for p in ports:
                if (u, p) not in self.driver:
                    problems.append(f"input {u}.{p} is not linked to any unit output")
        if problems:
            from cosim.errors import CompileError
            raise CompileError(problems, "co-simulation")

    def _build_graph(self) -> None:
        """Unit graph, algebraic couplings and the Gauss–Seidel order."""
        succ = {u: set() for u in self.names}
        direct = {u: set() for u in self.names}
        feeds = {u: {q for _, deps in self.desc[u].feedthrough for q in deps}
                 for u in self.names}
        for (v, q), (u, _) in self.driver.items():
            succ[u].add(v)
            if q in feeds[v]:
                direct[u].add(v)
        self.groups = [c for c in _components(self.names, direct)
                       if len(c) > 1 or c[0] in direct[c[0]]]
        self.group_of = {u: g for g in self.groups for u in g}
        comps = _components(self.names, succ)[::-1]       # topological order
        self.order = [u for comp in comps for u in comp]
        # Units whose outputs depend directly on inputs, outside iterated couplings, are
        # refreshed at each macro point once their inputs are known: level by level of the
        # direct-feedthrough graph (one level's units are independent, refreshed together).
        level = {}
        for u in self.order:
            if feeds[u] and u not in self.group_of:
                level[u] = 1 + max((level.get(s, 0) for s in self.names if u in direct[s]
                                    and s in level), default=0)
        self.refresh_levels = [[u for u in self.order if level.get(u) == n]
                               for n in range(1, max(level.values(), default=0) + 1)]
        if self.groups and not self.cfg.iterate:
            warnings.warn("algebraic coupling(s) " + "; ".join(" <-> ".join(g) for g in
                          self.groups) + " run without iteration: the coupling error is "
                          "recorded per step in step_log ('uniterated')", stacklevel=3)

    def _common_step(self) -> Fraction:
        q = None
        for d in self.desc.values():
            f = Fraction(d.dt).limit_denominator(10**9)
            q = f if q is None else Fraction(math.lcm(q.numerator, f.numerator),
                                             math.gcd(q.denominator, f.denominator))
        return q

    def _quanta(self, H: float) -> int | None:
        """``H`` in quanta (the units' common step), or None if it is not a multiple."""
        n = self._quanta_cache.get(H)
        if n is None:
            f = Fraction(H).limit_denominator(10**9) / self._quantum
            n = self._quanta_cache[H] = f.numerator if f.denominator == 1 and f > 0 else 0
        return n or None

    def _is_multiple(self, H: float) -> bool:
        return self._quanta(H) is not None

    # -- inputs ---------------------------------------------------------------------------

    def _extrapolate(self, key, H):
        """Value at T, derivatives at T, and the prediction at T+H from past macro points.

        A discrete output whose period is at least H is held (it does not change within the
        step); others follow the configured order, lowered while history is short.
        """
        hist = self.history[key]
        y = hist[-1][1]
        order = min(self.cfg.extrapolation, len(hist) - 1)
        if self._period[key] >= H * (1 - 1e-9):
            order = 0
        if order == 0:
            return y, (), y
        (t1, y1), (t0, y0) = hist[-1], hist[-2]
        f01 = (y1 - y0) / (t1 - t0)
        if order == 1:
            return y, (f01,), y + f01 * H
        tm, ym = hist[-3]
        f12 = (y0 - ym) / (t0 - tm)
        f012 = (f01 - f12) / (t1 - tm)
        d1 = f01 + f012 * (t1 - t0)
        d2 = 2.0 * f012
        return y, (d1, d2), y + d1 * H + f012 * H * H

    def _inputs(self, v, H, fresh, cand) -> P.SetInputs:
        """Inputs of unit ``v`` over ``[T, T+H]``: to candidates (iteration), interpolated to
        fresh values (Gauss–Seidel), or extrapolated."""
        vals, ders = {}, {}
        for p in self.desc[v].inputs:
            key = self.driver[(v, p.name)]
            y = self.values[key]
            if key in cand:
                vals[p.name], ders[p.name] = y, ((cand[key] - y) / H,)
            elif key in fresh:
                if self.cfg.extrapolation == 0 or self._period[key] >= H * (1 - 1e-9):
                    vals[p.name] = fresh[key]
                else:
                    vals[p.name], ders[p.name] = y, ((fresh[key] - y) / H,)
            else:
                y, d, _ = self._extrapolate(key, H)
                vals[p.name] = y
                if d:
                    ders[p.name] = d
        return P.SetInputs(vals, ders)

    # -- co-initialization ----------------------------------------------------------------

    def _coinitialize(self) -> None:
        """Make outputs at t0 consistent with the inputs they imply (units in graph order;
        algebraic couplings iterated with the configured acceleration)."""
        t0 = self.config.t0
        done = set()
        for u in self.order:
            if u in done:
                continue
            g = self.group_of.get(u, [u])
            done.update(g)

            def refresh():
                batch = {v: [P.SetInputs({p.name: self.values[self.driver[(v, p.name)]]
                                          for p in self.desc[v].inputs}, {}),
                             P.DoStep(t0, 0.0), P.GetOutputs()] for v in g}
                reps = self._call(batch, t0)
                for v in g:
                    for p, val in reps[v][2].values.items():
                        self.values[(v, p)] = val

            if u not in self.group_of:
                refresh()
                continue
            keys = self._coupling_keys(g)
            accel = self._accelerator()
            c = np.concatenate([self.values[k].ravel() for k in keys])
            for it in range(1, self.cfg.max_iterations + 1):
                self._put(keys, c)
                refresh()
                G = np.concatenate([self.values[k].ravel() for k in keys])
                res = float(np.max(np.abs(G - c)))
                if res <= self.cfg.tolerance:
                    break
                c = accel.update(c, G) if accel is not None else G
            else:
                record = {"t": t0, "H": 0.0, "iterations": it, "residual": res,
                          "status": "accepted"}
                self._not_converged("co-initialization of", g, keys, it, res, t0, record)
                self.step_log.append(record)

    def _not_converged(self, what, g, keys, it, res, t, record) -> None:
        """Raise, or (on request) mark the record as continued without convergence."""
        if self.cfg.on_nonconvergence is OnNonConvergence.RAISE:
            raise ConvergenceError(
                f"{what} algebraic coupling {' <-> '.join(g)} (ports "
                f"{', '.join(f'{u}.{p}' for u, p in keys)})", it, res, t=t,
                remedy="reduce H, use acceleration='newton', raise max_iterations, or set "
                       "on_nonconvergence='continue' to accept (recorded in step_log)")
        record["status"] = "continued"

    def _coupling_keys(self, g) -> list:
        """The outputs inside coupling ``g`` that feed inputs inside it, in a stable order."""
        return sorted({self.driver[(v, p.name)] for v in g for p in self.desc[v].inputs
                       if self.driver[(v, p.name)][0] in g})

    def _put(self, keys, vec) -> None:
        i = 0
        for k in keys:
            n = self.values[k].size
            self.values[k] = vec[i:i + n].reshape(self.values[k].shape)
            i += n

    def _accelerator(self):
        cfg = self.cfg
        return {Acceleration.NONE: Relaxation(cfg.relaxation),
                Acceleration.AITKEN: Aitken(cfg.relaxation),
                Acceleration.ANDERSON: Anderson(4),
                Acceleration.NEWTON: None}[cfg.acceleration]

    # -- the macro step -------------------------------------------------------------------

    def step(self, H: float | None = None) -> float:
        """One accepted macro step from ``T`` (adaptive: retried until accepted); returns H."""
        H = self.H if H is None else H
        T = self.T
        while True:
            snaps = None
            if self.cfg.adaptive:
                reps = self._call({u: [P.GetState()] for u in self.names}, T)
                snaps = {u: reps[u][0] for u in self.names}
            outputs, record = self._attempt(T, H)
            if not self.cfg.adaptive:
                break
            err = self._coupling_error(outputs, H)
            record["error"] = err
            if err <= 1.0 or H <= self._min_H():
                break
            record["status"] = "rejected"
            self.step_log.append(record)
            self.stats["rejected"] += 1
            self._call({u: [P.SetState(snaps[u])] for u in self.names}, T)
            H = self._propose(H, err, shrink=True)
        self.step_log.append(record)
        self._accept(T, H, outputs)
        if self._stopped:
            return H                        # a unit stopped at an event: run() ends there
        self._refresh()
        if self.cfg.adaptive:
            self.H = self._propose(H, record["error"], shrink=False)
        return H

    def _attempt(self, T, H):
        record = {"t": T, "H": H, "iterations": 0, "residual": 0.0, "status": "accepted"}
        outputs: dict = {}
        if self.cfg.scheme is Scheme.JACOBI:
            plain = [u for u in self.names if u not in self.group_of]
            batch = {u: [self._inputs(u, H, {}, {}), P.DoStep(T, H), P.GetOutputs()]
                     for u in plain}
            reps = self._call(batch, T)
            self._gather(reps, outputs, 2)
            for g in self.groups:
                self._iterate(g, T, H, {}, outputs, record)
        else:
            done = set()
            for u in self.order:
                if u in done:
                    continue
                g = self.group_of.get(u)
                if g is None:
                    reps = self._call({u: [self._inputs(u, H, outputs, {}), P.DoStep(T, H),
                                           P.GetOutputs()]}, T)
                    self._gather(reps, outputs, 2)
                    done.add(u)
                else:
                    self._iterate(g, T, H, outputs, outputs, record)
                    done.update(g)
        return outputs, record

    def _gather(self, reps, outputs, index) -> None:
        for u, rs in reps.items():
            for p, v in rs[index].values.items():
                outputs[(u, p)] = v

    def _iterate(self, g, T, H, fresh, outputs, record) -> None:
        """Fixed-point iteration of an algebraic coupling ``g`` over ``[T, T+H]``."""
        cfg = self.cfg
        keys = self._coupling_keys(g)
        if not cfg.iterate:
            reps = self._call({v: [self._inputs(v, H, fresh, {}), P.DoStep(T, H),
                                   P.GetOutputs()] for v in g}, T)
            self._gather(reps, outputs, 2)
            used = {k: self._extrapolate(k, H)[2] for k in keys}
            res = max(float(np.max(np.abs(outputs[k] - used[k]))) for k in keys)
            record.update(status="uniterated", residual=max(record["residual"], res))
            return
        reps = self._call({v: [P.GetState()] for v in g}, T)
        snaps = {v: reps[v][0] for v in g}
        sizes = [self.values[k].size for k in keys]
        shapes = [self.values[k].shape for k in keys]

        def split(vec):
            out, i = {}, 0
            for k, n, s in zip(keys, sizes, shapes):
                out[k] = vec[i:i + n].reshape(s)
                i += n
            return out

        def run(c, rollback):
            cand = split(c)
            batch = {v: ([P.SetState(snaps[v])] if rollback else []) +
                     [self._inputs(v, H, fresh, cand), P.DoStep(T, H), P.GetOutputs()]
                     for v in g}
            reps = self._call(batch, T)
            self._gather(reps, outputs, len(batch[g[0]]) - 1)
            self.stats["iterations"] += 1
            return np.concatenate([outputs[k].ravel() for k in keys])

        c = np.concatenate([self._extrapolate(k, H)[2].ravel() for k in keys])
        accel = self._accelerator()
        G = run(c, False)
        res = float(np.max(np.abs(G - c)))
        it = 1
        while res > cfg.tolerance and it < cfg.max_iterations:
            if accel is None:
                c = self._newton_update(c, G, run)
                it += c.size
            else:
                c = accel.update(c, G)
            G = run(c, True)
            res = float(np.max(np.abs(G - c)))
            it += 1
        record["iterations"] = max(record["iterations"], it)
        record["residual"] = max(record["residual"], res)
        if res > cfg.tolerance:
            self._not_converged("macro step: the", g, keys, it, res, T, record)

    def _newton_update(self, c, G, run):
        """One Newton step on F(c) = G(c) - c with a forward-difference Jacobian."""
        F = G - c
        J = np.empty((c.size, c.size))
        for j in range(c.size):
            h = 1e-7 * max(1.0, abs(c[j]))
            cp = c.copy()
            cp[j] += h
            J[:, j] = ((run(cp, True) - cp) - F) / h
        return c - np.linalg.solve(J, F)

    def _refresh(self) -> None:
        """Make feedthrough outputs at the new macro point consistent with the exchanged
        inputs (they were computed with extrapolated ones)."""
        T = self.T
        for level in self.refresh_levels:
            batch = {u: [P.SetInputs({p.name: self.values[self.driver[(u, p.name)]]
                                      for p in self.desc[u].inputs}, {}),
                         P.DoStep(T, 0.0), P.GetOutputs()] for u in level}
            reps = self._call(batch, T)
            for u in level:
                for p, v in reps[u][2].values.items():
                    self.values[(u, p)] = v
                    self.history[(u, p)][-1] = (T, v)

    def _coupling_error(self, outputs, H) -> float:
        """Scaled max difference between extrapolated and actual inputs at T+H."""
        cfg = self.cfg
        err = 0.0
        for key in set(self.driver.values()):
            pred = self._extrapolate(key, H)[2]
            actual = outputs[key]
            scale = cfg.atol + cfg.rtol * np.abs(actual)
            if actual.size:
                err = max(err, float(np.max(np.abs(actual - pred) / scale)))
        return err

    def _min_H(self) -> float:
        return max(self.cfg.H_min, float(self._quantum))

    def _propose(self, H, err, shrink) -> float:
        p = self.cfg.extrapolation + 1
        factor = 0.9 * (err if err > 0 else 1e-10) ** (-1.0 / (p + 1))
        factor = min(max(factor, 0.2), 0.5) if shrink else min(max(factor, 1.0), 5.0)
        H_new = min(max(H * factor, self._min_H()), self.cfg.H_max)
        q = float(self._quantum)
        n = math.floor(H_new / q + 1e-9)
        if not shrink and factor > 1.2:
            n = max(n, round(H / q) + 1)    # growth is never lost to rounding down
        return max(q, min(n * q, self.cfg.H_max))

    def _accept(self, T, H, outputs) -> None:
        self.n += 1
        self._nq += self._quanta(H)
        self.T = self.config.t0 + self._nq * float(self._quantum)
        self.values.update(outputs)
        for key, v in outputs.items():
            hist = self.history.setdefault(key, [])
            hist.append((self.T, v))
            del hist[:-3]
        self.stats["macro_steps"] += 1
        if self.n % self.cfg.log_every == 0:
            self._collect()

    # -- run, logs ------------------------------------------------------------------------

    def run(self, t_end: float | None = None) -> Logs:
        """Initialize if needed and step to ``t_end``; returns the central logs."""
        if not self._initialized:
            self.initialize()
        t_end = self.config.t_end if t_end is None else t_end
        eps = 1e-9 * max(1.0, abs(t_end))
        while self.T < t_end - eps:
            H = min(self.H, t_end - self.T)
            if self.cfg.adaptive:
                # Never step over a unit's scheduled event: end the macro step there.
                t_ev = min(self._next_event.values(), default=math.inf)
                if self.T + eps < t_ev < self.T + H:
                    H = t_ev - self.T
            if not self._is_multiple(H):
                H = max(float(self._quantum),
                        math.floor(H / float(self._quantum) + 1e-9) * float(self._quantum))
            try:
                self.step(H if H != self.H else None)
            except TransportError as err:
                self._recover(err)
                continue
            if self._stopped:
                self._end_at_stop()
                return self.logs
            every = self.cfg.checkpoint_every
            if every and self.n % every == 0:
                self._checkpoint = self._capture()
        self._finish()
        return self.logs

    def _end_at_stop(self) -> None:
        """A unit stopped at an event (a ``stop`` action) at ``t_e`` inside the last macro
        step: the co-simulation ends at ``t_e``, as the monolithic run would. The other units
        ran on to the end of the macro step; their samples after ``t_e`` are dropped."""
        t_e = min(self._stopped.values())
        units = sorted(u for u, t in self._stopped.items() if t == t_e)
        self.T = t_e
        self.step_log.append({"t": t_e, "H": 0.0, "iterations": 0, "residual": 0.0,
                              "status": "stopped", "error": f"stop event in {', '.join(units)}"})
        self._collect()
        eps = 1e-9 * max(1.0, abs(t_e))
        for key, (ts, vs) in self._logs.items():
            if ts:
                t, v = np.concatenate(ts), np.concatenate(vs)
                keep = t <= t_e + eps
                self._logs[key] = ([t[keep]], [v[keep]])

    def _finish(self) -> None:
        """Log the final macro point with consistent inputs, then collect everything."""
        T = self.T
        batch = {u: [P.SetInputs({p.name: self.values[self.driver[(u, p.name)]]
                                  for p in self.desc[u].inputs}, {}), P.DoStep(T, 0.0)]
                 for u in self.names}
        self._call(batch, T)
        self._collect()

    def _collect(self) -> None:
        reps = self._call({u: [P.CollectLogs()] for u in self.names}, self.T)
        for u in self.names:
            for key, (t, v) in reps[u][0].signals.items():
                ts, vs = self._logs.setdefault(f"{u}/{key}", ([], []))
                ts.append(t)
                vs.append(v)

    @property
    def logs(self) -> Logs:
        """Central logs so far, keyed ``unit/block.port``, each with its own time vector."""
        values, times = {}, {}
        for key, (ts, vs) in self._logs.items():
            times[key] = np.concatenate(ts) if ts else np.zeros(0)
            values[key] = np.concatenate(vs) if vs else np.zeros((0, 1))
        base = max(times.values(), key=len) if times else np.zeros(0)
        return Logs(values, times, base)

    def step_log_arrays(self) -> dict[str, np.ndarray]:
        """The iteration / step-rejection log as arrays (saved beside the logs)."""
        statuses = ["accepted", "rejected", "continued", "uniterated", "recovered", "stopped"]
        rec = self.step_log
        return {"t": np.array([r["t"] for r in rec]), "H": np.array([r["H"] for r in rec]),
                "iterations": np.array([r["iterations"] for r in rec]),
                "residual": np.array([r["residual"] for r in rec]),
                "status": np.array([statuses.index(r["status"]) for r in rec]),
                "status_names": np.array(statuses)}

    def terminate(self) -> None:
        self._call({u: [P.Terminate()] for u in self.names}, self.T)

    # -- checkpoints and fault recovery -------------------------------------------------

    def _capture(self) -> dict:
        """Every unit's state and the master's own, as one nested dict of plain values.

        Logs are collected first, so everything before the capture is central and the units'
        log positions in their states match what the master holds.
        """
        self._collect()
        reps = self._call({u: [P.GetState()] for u in self.names}, self.T)
        keys = sorted(self.history)
        return {
            "units": {u: {"t": reps[u][0].t, "data": reps[u][0].data} for u in self.names},
            "master": {"T": self.T, "n": self.n, "nq": self._nq, "H": self.H,
                       "stats": dict(self.stats)},
            "ports": [[u, p] for u, p in keys],
            "values": {str(i): self.values[k] for i, k in enumerate(keys)},
            "history": {str(i): {"t": [t for t, _ in self.history[k]],
                                 "v": {str(j): v for j, (_, v) in enumerate(self.history[k])}}
                        for i, k in enumerate(keys)},
            "log_lengths": {k: len(ts) for k, (ts, _) in self._logs.items()},
        }

    def _restore(self, cp: dict, logs: str) -> None:
        """Put every unit and the master back to capture ``cp``.

        ``logs="truncate"`` cuts the central logs back to the capture (fault recovery: no
        gap, no duplicate); ``logs="restart"`` starts them afresh (a run resumed from file).
        """
        self._call({u: [P.SetState(P.UnitState(st["t"], st["data"]))]
                    for u, st in cp["units"].items()}, cp["master"]["T"])
        m = cp["master"]
        self.T, self.n, self._nq, self.H = m["T"], m["n"], m["nq"], m["H"]
        self.stats.update(m["stats"])
        keys = [tuple(k) for k in cp["ports"]]
        self.values = {k: np.asarray(cp["values"][str(i)]) for i, k in enumerate(keys)}
        self.history = {}
        for i, k in enumerate(keys):
            h = cp["history"][str(i)]
            self.history[k] = [(t, np.asarray(h["v"][str(j)])) for j, t in enumerate(h["t"])]
        if logs == "truncate":
            for key, (ts, vs) in self._logs.items():
                n = cp["log_lengths"].get(key, 0)
                del ts[n:], vs[n:]
        else:
            self._logs = {}
            # The units logged before the checkpoint too: drop that, logs restart here.
            self._call({u: [P.CollectLogs()] for u in self.names}, self.T)

    def save_checkpoint(self, path) -> None:
        """Gather every unit's state and the master's own into ``path.json`` + ``path.npz``."""
        self._write(self._capture(), path)

    def _write(self, capture: dict, path) -> None:
        from cosim.run.checkpoint import flatten, paths
        arrays, scalars = {}, {}
        flatten(capture, "cosim", arrays, scalars)
        meta = {"format": 2, "kind": "co-simulation", "units": self.names, "scalars": scalars}
        jpath, npath = paths(path)
        jpath.write_text(json.dumps(meta, indent=1))
        np.savez(npath, **arrays)

    def load_checkpoint(self, path) -> None:
        """Restore every unit and the master from :meth:`save_checkpoint`'s files."""
        from cosim.run.checkpoint import paths, unflatten
        jpath, npath = paths(path)
        try:
            meta = json.loads(Path(jpath).read_text())
        except (OSError, ValueError) as err:
            raise ModelError(f"cannot read checkpoint {jpath}: {err}") from err
        if meta.get("kind") != "co-simulation" or meta.get("units") != self.names:
            raise ModelError(f"checkpoint {jpath} is not of this co-simulation (units "
                             f"{meta.get('units')} vs {self.names})")
        with np.load(npath, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        if not self._initialized:
            self.initialize()
        self._restore(unflatten("cosim", arrays, meta["scalars"]), logs="restart")

    def _recover(self, err: TransportError) -> None:
        """A unit failed: recreate it, restore every unit from the last checkpoint, replay.

        When that is impossible (no checkpoint, restarts used up, the unit stays away), the
        last checkpoint is written to ``cosim.checkpoint_path`` (if set) and the error says
        how to resume from it.
        """
        try:
            self._recover_units(err)
        except TransportError as final:
            path = self.cfg.checkpoint_path
            if self._checkpoint is None or path is None:
                raise
            self._write(self._checkpoint, path)
            raise TransportError(final.unit, final.method,
                                 f"{final.message}; the last checkpoint (t="
                                 f"{self._checkpoint['master']['T']:g}) was saved to {path}: "
                                 f"resume with `cosim run MODEL --resume {path}`",
                                 t=final.t) from final

    def _recover_units(self, err: TransportError) -> None:
        if self._checkpoint is None or self.stats["recoveries"] >= self.cfg.max_restarts:
            raise err
        deadline = time.time() + self.cfg.timeout
        for u, proxy in self.proxies.items():
            recover = getattr(proxy, "recover", None)
            if recover is not None:
                recover(deadline)
        recoveries = self.stats["recoveries"] + 1
        self._restore(self._checkpoint, logs="truncate")
        self.stats["recoveries"] = recoveries
        self.step_log.append({"t": self.T, "H": 0.0, "iterations": 0, "residual": 0.0,
                              "status": "recovered", "error": str(err)})
