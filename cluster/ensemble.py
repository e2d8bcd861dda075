"""Ensembles: many runs of a sweep simulated as one model.

An ensemble of N runs is one model holding N copies of the sweep's model, each a virtual
subsystem ``run<index>`` whose workspace is that run's parameters (the model's parameters
with the run's overrides, then the model's own context, as the evaluation phase scopes them).
The copies share nothing, so the engine computes each copy's values by the same operations
in the same order as a run of its own: with a fixed-step solver every member's logs are bit
for bit its own run's. The generated fast path runs copies whose blocks share a kernel
template as one numpy operation per group of blocks (blocks that spell different parameter
values into their kernels run one statement each).

A model whose generated code is the scalar strategy's runs faster than that: its step
function is translated for arrays of N members (:mod:`cosim.fastpath.ensemble_run`), so a
step costs a few numpy calls per block for all members together, and only the blocks built
from parameter expressions are re-evaluated per member. The copies above are the fallback
for what that translation does not take (the vector strategy, interpreter-only blocks).

Blocks that switch modes at located times (a Relay reading a continuous signal) are
translated too: the translated code holds each member's mode through its steps and, after
each step, compares each member's switching surfaces; a member whose surface changed sign has
that step run again on its own interpreter (the switch located on the solver's dense output,
exactly as its own run does), the others keep the vectorised step. Copies in one model
cannot do that (every member's step would be cut at any member's switch): such a model that
does not translate runs one run at a time, and says why.

Zero crossings of a continuous state (events that reset states or call back, without
stopping the run) are located the same way: a member whose watched state changes sign in a
step has that step run on its own interpreter, which locates and fires the event.

Scheduled events fire per member: at a tick, each member's resets are applied to its own
state before the tick's outputs (on its own interpreter where the event calls back or a
crossing is watched); inside a step, every member's step runs on its own interpreter. A
member whose event stops its run stops alone: its logs end with that tick.

What an ensemble cannot share is refused before it runs: an adaptive solver would choose one
step for all members (each member's step would depend on the others); crossings of signals
are not located per member; co-simulations run their own units.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from cluster.sweep_design import Run
from cluster.sweep_reducers import reduce_all
from cosim.errors import ModelError

__all__ = ["PATH_KEY", "check_ensemble", "ensemble_model", "member", "run_ensemble"]

#: Key of a row saying how its ensemble ran: ``"translated"``, ``"copies: <why>"`` (the
#: block that forced the copies) or ``"one by one: <why>"``; the sweep's driver takes it out
#: of the row (:attr:`cluster.sweep.Rows.ensembles`).
PATH_KEY = "_ensemble"


def _prefix(r: Run) -> str:
    return f"run{r.index}/"


def check_ensemble(model, config) -> None:
    """Refuse what an ensemble cannot simulate member by member, before any run.

    Parameters
    ----------
    model : Model
        The sweep's model (built).
    config : SimulationConfig

    Raises
    ------
    ModelError
        Naming the obstacle and the remedy (run without ``ensemble``).
    """
    from cosim.model.diagram import Diagram
    from cosim.solvers import get_solver
    problems = []
    if config is None:
        problems.append("it needs a SimulationConfig")
    else:
        if config.cosim is not None:
            problems.append("co-simulations run their own units (SimulationConfig.cosim is set)")
        solver = get_solver(config.solver)
        if solver.adaptive or solver.implicit:
            what = "adaptive: one step size would be chosen" if solver.adaptive else \
                "implicit: one Newton iteration would converge"
            problems.append(f"solver {config.solver!r} is {what} over all members, so no "
                            "member would compute as it does alone; use an explicit "
                            "fixed-step solver (RK4, SSPRK22, ...)")
    from cosim.compile.flatten import split_ref
    from cosim.model.events import ZeroCrossing
    # Zero crossings of a continuous state are located per member (the member's step run
    # on its own interpreter), scheduled events fired per member, stops per member; what an
    # ensemble cannot locate per member is refused.
    signals = [(e.name, e.watch) for e in getattr(model, "events", None) or []
               if isinstance(e, ZeroCrossing) and split_ref(e.watch) is not None]
    for name, watch in signals:
        problems.append(f"event {name!r} watches the signal {watch!r} of block "
                        f"{split_ref(watch)[0]}: an ensemble locates zero crossings of "
                        "continuous states per member, not of signals (watch the block's "
                        "state instead)")
    if config is not None and not problems:
        from cosim import compile_model
        try:
            plan = compile_model(model, config.dt, None, allow_loops=config.loop_solver)
        except ModelError:
            plan = None             # the runs report it
        if plan is not None and plan.loops:
            problems.append("the model has algebraic loops, iterated to a tolerance over "
                            "the whole ensemble")
    if problems:
        raise ModelError("sweep(ensemble=...) refused: " + "; ".join(problems) +
                         "; run the sweep without ensemble")


def ensemble_model(model_source, runs: Sequence[Run]):
    """One model holding a copy of the sweep's model per run (see the module docstring)."""
    from cluster.sweep_worker import build
    from cosim import Model, Subsystem
    first = build(model_source)
    whole = Model(f"{first.name}_ensemble")
    whole.simulation = first.simulation
    for i, r in enumerate(runs):
        m = first if i == 0 else build(model_source)
        unknown = sorted(set(r.params) - set(m.parameters))
        if unknown:
            raise ModelError(f"{', '.join(unknown)} not a parameter of model {m.name!r}")
        sub = Subsystem(_prefix(r)[:-1], context={**m.parameters, **r.params, **m.context})
        sub.blocks = m.blocks
        sub.connections = m.connections
        whole.add(sub)
    return whole


def member(logs, r: Run):
    """The logs of run ``r`` out of an ensemble's logs (its keys without ``run<i>/``)."""
    from cosim import Logs
    prefix = _prefix(r)
    keys = [k for k in logs if k.startswith(prefix)]
    return Logs({k[len(prefix):]: logs[k] for k in keys},
                {k[len(prefix):]: logs.time_of(k) for k in keys}, logs.time)


def run_ensemble(model_source, config, runs: Sequence[Run], reducers: Mapping,
                 logs_dir: str | None) -> list[tuple[dict, str]]:
    """Simulate ``runs`` as one ensemble and reduce each member's logs.

    Returns
    -------
    list of (dict, str)
        Each run's row and an empty structure digest (see
        :func:`cluster.sweep_worker.execute`); ``wall_time`` is the ensemble's share per run;
        :data:`PATH_KEY` says how the ensemble ran (translated, or copies and why).

    Raises
    ------
    Exception
        Whatever the ensemble's simulation raised, or Unsupported for a model with modes
        that does not translate (the caller runs the members one by one, to give each its
        own row, and says why).
    """
    start = time.perf_counter()
    from cluster.sweep_worker import keep_logs
    from cosim.fastpath.runtime import Unsupported
    try:
        members, structures = _translated(model_source, config, runs)
        how = "translated" + (f" ({structures} structures)" if structures > 1 else "")
    except Unsupported as err:
        # Not translatable: the copies, saying why. (A member that fails here fails there
        # too: the caller then runs the members one by one.) Copies of a block with modes
        # would cut every member's step at any member's switch (and a model's events are
        # not copied): the caller runs the members one by one instead, saying why.
        located = _located_in_time(model_source)
        if located:
            raise Unsupported(f"{err}; {located}, which copies in one model would locate "
                              "for all members together") from None
        members = _copies(model_source, config, runs)
        how = f"copies: {err}"
    share = (time.perf_counter() - start) / len(runs)
    out = []
    for r, mine in zip(runs, members):
        row = {"run_id": r.run_id, "index": r.index, **r.params, "status": "ok", "error": "",
               "wall_time": share, "reducer_errors": "", PATH_KEY: how}
        values, row["reducer_errors"] = reduce_all(mine, reducers)
        row.update(values)
        if logs_dir is not None:
            keep_logs(logs_dir, r.run_id, mine)
        out.append((row, ""))
    return out


def _translated(model_source, config, runs: Sequence[Run]) -> tuple[list, int]:
    """Each run's logs from the ensemble translation of the scalar fast path, and the
    number of structures they took: runs whose parameters change the structure (a table's
    length, a PID's ``kd = 0``) run as an ensemble of their own structure."""
    from cluster.sweep_worker import build
    from cosim import Simulator
    from cosim.fastpath.ensemble_run import run_members
    out: list = [None] * len(runs)
    todo = list(range(len(runs)))
    structures = 0
    while todo:
        model = build(model_source)
        unknown = sorted({k for r in runs for k in r.params} - set(model.parameters))
        if unknown:
            raise ModelError(f"{', '.join(unknown)} not a parameter of model {model.name!r}")
        model.parameters.update(runs[todo[0]].params)
        sim = Simulator(model, config if config is not None else model.simulation)
        sim.initialize()
        others: list[int] = []
        logs = run_members(sim, model, [runs[j].params for j in todo], others)
        for j, mine in zip(todo, logs):
            if mine is not None:
                out[j] = mine
        todo = [todo[j] for j in others]    # the first member (the reference) always ran
        structures += 1
    return out, structures


def _located_in_time(model_source) -> str | None:
    """What of the model is located in time per run (its events, the first block that
    switches modes), said, or None."""
    from cluster.sweep_worker import build
    from cosim.model.diagram import Diagram

    def find(d: Diagram, prefix: str) -> str | None:
        for b in d.blocks:
            if isinstance(b, Diagram):
                found = find(b, f"{prefix}{b.name}/")
                if found:
                    return found
            elif getattr(b, "has_modes", False):
                return f"block {prefix}{b.name} ({type(b).__name__}) switches modes"
        return None
    model = build(model_source)
    events = getattr(model, "events", None)
    if events:
        return f"its events ({', '.join(e.name for e in events)}) are located per run"
    return find(model, "")


def _copies(model_source, config, runs: Sequence[Run]) -> list:
    """Each run's logs from one model holding a copy of the model per run."""
    from cosim import Simulator
    whole = ensemble_model(model_source, runs)
    cfg = config if config is not None else whole.simulation
    if cfg.log is not None:
        from dataclasses import replace
        cfg = replace(cfg, log=tuple(f"{_prefix(r)}{k}" for r in runs for k in cfg.log))
    logs = Simulator(whole, cfg).run()
    return [member(logs, r) for r in runs]
