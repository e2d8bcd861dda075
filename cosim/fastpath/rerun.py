"""Runs of one model with other parameter values that reuse a reference run's generated code.

Building a run (the model, its evaluation, the compiled plan, block initialization and the
fast path) costs more than a small model's stepping. A :class:`Rerun` builds one reference
run and keeps it unrun; each run then re-evaluates only the blocks built from parameter
expressions (:class:`~cosim.fastpath.ensemble_members.Members`), binds their kernels' values to
the generated step function's constants and steps it from the reference's initial values
with its own: bit for bit what ``Simulator(model with the parameters).run()`` logs.
"""

from __future__ import annotations

import types
from collections.abc import Mapping

import numpy as np

from cosim.fastpath import cache
from cosim.fastpath.chunked import own_globals
from cosim.fastpath.ensemble_members import Members, const_values
from cosim.fastpath.ensemble_run import reusable
from cosim.fastpath.runtime import warm

__all__ = ["Rerun"]


class Rerun:
    """A model's reference run, kept to run the model again with other parameter values.

    Parameters
    ----------
    model : Model
        Built, not evaluated (the reference's parameters are its own).
    config : SimulationConfig

    Raises
    ------
    Unsupported
        The model's runs cannot reuse the code (see
        :func:`~cosim.fastpath.ensemble_run.reusable`); run each on its own.
    """

    def __init__(self, model, config):
        from cosim import Simulator
        from cosim.model.diagram import Diagram, Reference
        from cosim.fastpath.runtime import Unsupported
        from cosim.run import pacing

        def references(d) -> bool:
            return any(isinstance(b, Reference) or (isinstance(b, Diagram) and references(b))
                       for b in d.blocks)
        if references(model):
            raise Unsupported("library references (resolved by parameter values)")
        self.model = model
        sim = self.sim = Simulator(model, config)
        sim.initialize()
        reusable(sim, model)
        fast = sim.fast_path
        self.code = fast.fn.__code__
        self.globals = fast.fn.__globals__
        entry = cache.by_source(fast.source)
        self.consts = entry.consts
        self.columns = entry.columns
        self.S0 = list(fast.flat.S)
        self.D0 = list(fast.flat.D)
        self.X0 = np.array(sim.state.X, dtype=np.float64)
        plan = sim.plan
        self.d_slot = {(id(b), n): j for j, (b, n) in enumerate(fast.flat.state_slots)}
        self.c_slice = {plan.index[plan.path_of[id(b)]]: sl for b, sl in sim.interpreter.cslices}
        self.k_end = pacing.end_tick(sim, None, None)
        self.members = Members(sim, model)

    def run(self, params: Mapping):
        """The logs of a run with ``params`` over the model's parameters.

        Raises
        ------
        Unsupported
            ``params`` change the model's structure (build the run on its own).
        """
        from cosim.run.logstore import LogStore
        sim = self.sim
        plan, cfg = sim.plan, sim.config
        differ = self.members.of([params])
        ns = dict(self.globals)
        const_values(self.consts, ns, self.members.ref_kernels, differ, 1)
        # A chunked step function's functions read the run's constants from their own globals.
        own_globals(ns)
        fn = types.FunctionType(self.code, ns, "advance")
        S, D, X = list(self.S0), list(self.D0), self.X0.copy()
        for i, (_, states, cstates) in differ.items():
            b = plan.blocks[i]
            for name, v in states[0].items():
                D[self.d_slot[(id(b), name)]] = v
            if cstates[0] is not None:
                X[self.c_slice[i]] = cstates[0]
        store = LogStore(plan, cfg.log)
        store.columns = [list(c) for c in self.columns]
        k_end = self.k_end
        # Ticks 0 .. k_end-1 stepped, and the outputs at k_end logged (as Simulator.run), by
        # a function specialized first (a rerun is one call).
        warm(fn, 0, 0, -1, S, D, X, store.rows, store.task_ticks, k_end, k_end + 1)
        _, store.last = fn(0, k_end + 1, -1, S, D, X, store.rows, store.task_ticks, k_end,
                           k_end + 1)
        return store.logs(cfg.t0, cfg.dt)
