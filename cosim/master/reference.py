"""The protocol path: a macro step as each unit's separate protocol requests, the reference
the macro-step engine (:mod:`cosim.master.engine`) is held to bit for bit.

Per attempt of ``[T, T+H]``: every unit's ``SetInputs`` (or, in another process, one fused
``Step``), ``DoStep``, ``GetOutputs`` — Jacobi all at once, Gauss–Seidel one unit (or
coupling) after the other; couplings iterated with ``GetState`` / ``SetState`` between
iterations (:func:`~cosim.master.coupling.iterate_step`); the state kept for a retried attempt
held by the master (``GetState`` before, ``SetState`` to roll back). Once the master has
accepted the step, feedthrough units are refreshed at the new macro point level by level,
couplings with outside inputs solved again there (:meth:`Reference.refresh`). Used when
``CosimConfig(engine=False)`` and for traced runs (every request recorded).
"""

from __future__ import annotations

from collections import ChainMap
from dataclasses import replace

import numpy as np

from cosim.config import Scheme
from cosim.master import coupling
from cosim.master import protocol as P
from cosim.master.fused import FusedStep
from cosim.master.records import StepRecord, StepStatus

__all__ = ["Reference"]


class Reference:
    """A master's macro steps as separate protocol requests (see the module notes).

    Parameters
    ----------
    master : Master
        Initialized up to its unit graph, history and order; read: ``names``, ``graph``,
        ``history``, ``values``, ``calls``, ``cfg``, ``desc``, ``proxies``, ``order``,
        ``couplings``, ``coupling_of``, ``delayed``, ``refresh_levels``, ``T``; updated:
        ``stats["iterations"]``.
    """

    def __init__(self, master):
        self.master = master
        names = master.names
        # Units in other processes that serve the fused Step get one message per macro step
        # (the codec packs it in one pass); traced runs keep the separate requests.
        self.fused = {u: FusedStep(u, master.graph.inputs[u], master.desc[u].outputs)
                      for u in names
                      if P.FUSED_STEP in master.desc[u].capabilities and not master.cfg.trace
                      and master.proxies[u].in_process() is None}
        self.plain = [u for u in names if u not in master.coupling_of]
        self.snaps: dict = {}           # every unit's state at T (kept for a retried attempt)

    def attempt(self, T: float, H: float, keep: bool, rollback: bool,
                predicted: dict | None = None) -> tuple[dict, StepRecord]:
        """One attempt of the macro step ``[T, T+H]``.

        Parameters
        ----------
        T, H : float
        keep : bool
            Every unit's state at ``T`` is kept first (the attempt may be rejected).
        rollback : bool
            Every unit first goes back to the state kept at ``T``.
        predicted : dict, optional
            Outputs at ``T+H`` a first pass predicted: inputs are interpolated to them where
            no output computed in this attempt is read (the started-up first step of an
            order-2 run, :meth:`Master.step <cosim.master.master.Master.step>`).

        Returns
        -------
        outputs : dict of (str, str) to ndarray
            Every output at ``T+H``.
        record : StepRecord
        """
        m = self.master
        call = m.calls.call
        if rollback:
            call({u: [P.SetState(self.snaps[u])] for u in m.names}, T)
        elif keep:
            reps = call({u: [P.GetState()] for u in m.names}, T)
            self.snaps = {u: reps[u][0] for u in m.names}
        predicted = predicted or {}
        record = StepRecord(T, H)
        outputs: dict = {}
        if m.cfg.scheme is Scheme.JACOBI:
            batch = {u: self._step_requests(u, T, H, predicted) for u in self.plain}
            self._gather(call(batch, T), outputs, -1)
            for g in m.couplings:
                record = self._iterate(g, T, H, predicted, outputs, record)
            return outputs, record
        done = set()
        fresh = ChainMap(outputs, predicted)     # this step's outputs first
        for u in m.order:
            if u in done:
                continue
            g = m.coupling_of.get(u)
            if g is None:
                self._gather(call({u: self._step_requests(u, T, H, fresh)}, T), outputs, -1)
                done.add(u)
            else:
                record = self._iterate(g, T, H, fresh, outputs, record)
                done.update(g)
        return outputs, record

    def refresh(self, record: StepRecord) -> StepRecord:
        """Make outputs at the new macro point (the master's ``T``, accepted) consistent
        with the exchanged inputs (they were computed with extrapolated ones), level by
        level: feedthrough units refreshed, couplings solved again by refreshes iterated
        to a fixed point (every action of a level reads the values before it); returns
        ``record`` with those iterations."""
        m = self.master
        T = m.T
        for level in m.refresh_levels:
            plain = [x for x in level if type(x) is str]
            groups = [x for x in level if type(x) is tuple]
            before = dict(m.values) if groups else m.values
            if plain:
                for u, outs in m.refresh_units(plain, T).items():
                    for p, v in outs.items():
                        m.values[(u, p)] = v
                        m.history.replace_last((u, p), T, v)
            for g in groups:
                record = self._resolve(g, T, before, record)
        return record

    def _resolve(self, g: tuple, T: float, before: dict, record: StepRecord) -> StepRecord:
        """Coupling ``g`` solved at the macro point ``T``: its units refreshed for
        candidates of its coupling outputs (first: as its step left them) and their other
        inputs' values in ``before``, iterated (:func:`~cosim.master.coupling.iterate`);
        the last refresh's outputs are the macro point's."""
        m = self.master
        graph, values = m.graph, m.values
        keys = graph.coupling_keys(list(g))
        shapes = [(k, before[k].size, before[k].shape) for k in keys]

        def run(c, rollback):
            cand = coupling.candidates(c, shapes)
            reps = m.calls.call({v: [P.SetInputs({name: cand[key] if key in cand else
                                                  before[key] for name, key in
                                                  graph.inputs[v]}, {}),
                                     P.RefreshOutputs(), P.GetOutputs()] for v in g}, T)
            for v in g:
                for p, y in reps[v][2].values.items():
                    values[(v, p)] = y
            m.stats["iterations"] += 1
            return np.concatenate([values[k].ravel() for k in keys])

        solve = coupling.iterate(np.concatenate([before[k].ravel() for k in keys]), run,
                                 m.cfg)
        for v in g:
            for p in m.desc[v].outputs:
                m.history.replace_last((v, p.name), T, values[(v, p.name)])
        return coupling.resolved(m.cfg, graph, g, solve, T, record)

    def _step_requests(self, u: str, T: float, H: float, fresh: dict) -> list:
        """Unit ``u``'s requests for the macro step ``[T, T+H]``, its outputs last. With
        delayed feedthrough the outputs at T+H are logged as computed by the step (a
        refresh with the step's inputs), which is what the other units receive."""
        m = self.master
        fused = self.fused.get(u)
        if fused is not None:
            return [fused.request(m.history, m.values, T, H, fresh, {},
                                  P.STEP_REFRESH if m.delayed else 0)]
        step = [self._inputs(u, H, fresh, {}), P.DoStep(T, H)]
        if m.delayed:
            step.append(P.RefreshOutputs())
        return step + [P.GetOutputs()]

    def _inputs(self, u, H, fresh, cand) -> P.SetInputs:
        m = self.master
        return m.history.inputs(m.graph.inputs[u], m.values, H, fresh, cand)

    def _gather(self, reps, outputs, index) -> None:
        for u, rs in reps.items():
            rep = rs[index]
            if type(rep) is P.Stepped:
                self.fused[u].outputs(rep.outputs, outputs)
                continue
            for p, v in rep.values.items():
                outputs[(u, p)] = v

    def _iterate(self, g, T, H, fresh, outputs, record: StepRecord) -> StepRecord:
        """Fixed-point iteration of an algebraic coupling ``g`` over ``[T, T+H]``; returns
        ``record`` updated with its iterations, residual and status."""
        m = self.master
        cfg, history, graph = m.cfg, m.history, m.graph
        keys = graph.coupling_keys(g)
        if not cfg.iterate:
            reps = m.calls.call({v: [self._inputs(v, H, fresh, {}), P.DoStep(T, H),
                                     P.GetOutputs()] for v in g}, T)
            self._gather(reps, outputs, 2)
            used = {k: history.extrapolate(k, H)[2] for k in keys}
            res = max(float(np.max(np.abs(outputs[k] - used[k]))) for k in keys)
            return replace(record, status=StepStatus.UNITERATED,
                           residual=max(record.residual, res))
        start = {k: history.extrapolate(k, H)[2] for k in keys}
        solve = coupling.iterate_step(
            g, keys, start, T, H, lambda v, cand: self._inputs(v, H, fresh, cand),
            m.calls.call, outputs, m.stats, cfg,
            lambda v, cand: history.held_at_end(graph.inputs[v], H, cand))
        record = replace(record, iterations=max(record.iterations, solve.iterations),
                         residual=max(record.residual, solve.residual))
        if not solve.converged:
            coupling.not_converged(cfg, "macro step: the", graph, g, solve, T)
            record = replace(record, status=StepStatus.CONTINUED)
        return record
