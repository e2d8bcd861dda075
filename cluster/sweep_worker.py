"""What a sweep's worker does: run a chunk of runs, each a row of the results table.

A worker (the driver itself, a pool process or a Ray task) gets runs in chunks, so a cluster
study pays one round trip per chunk instead of per run. Each run builds the model, applies
its parameters through the evaluation phase and simulates; failures are rows, not
exceptions. The generated code of a run takes its parameters as data and is compiled once per
process and structure (:mod:`cosim.fastpath.cache`), so a worker's runs after its first reuse
the compiled code; more than that, a worker keeps each model's first run built
(:class:`~cosim.fastpath.rerun.Rerun`) and runs the next ones on it with their parameter
values, without building a model or a simulator (a run whose parameters change the
structure, or that fails, is built on its own). A co-simulated run's units go into the Ray
actors or server processes of the chunk's run before (:class:`~cosim.master.hosts.UnitHosts`,
reloaded with the run's units: bit for bit fresh units) instead of new ones; a structure
change starts new ones (logged), a failed run's are stopped. Every run reports that structure as a short digest
(:func:`structure_of`): parameters that change it (a shape, a sample time, a block's form)
make runs that compile their own code, and the driver names them
(:func:`structural_parameters`).
"""

from __future__ import annotations

import hashlib
import math
import os
import socket
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path

from cluster.sweep_design import Run
from cluster.sweep_reducers import reduce_all

__all__ = ["build", "execute", "execute_many", "keep_logs", "structural_parameters",
           "structure_of"]


def build(model_source):
    """The model of a sweep's model source: a factory's model or a model file's."""
    from cosim import Model
    return Model.from_yaml(model_source) if isinstance(model_source, (str, Path)) \
        else model_source()


def keep_logs(logs_dir, run_id: str, logs) -> None:
    """Keep a run's full logs: as ``<logs_dir>/<run_id>.npz`` when ``logs_dir`` is a
    directory (a worker on the driver's machine), or in ``logs_dir[run_id]`` when it is a
    dict (a Ray puller: they travel to the driver with the chunk's rows, and no worker
    writes on its own disk)."""
    if isinstance(logs_dir, dict):
        logs_dir[run_id] = logs
    else:
        logs.to_npz(Path(logs_dir) / f"{run_id}.npz")


def structure_of(sim) -> str:
    """A digest of what a run's compiled code depends on besides parameter values.

    With the generated fast path, that is its source: parameters are data in it, so the
    source (and the compile cache's key, :mod:`cosim.fastpath.cache`) changes only when the
    structure does. On the interpreter, the plan: block types and order, ports, shapes,
    sample times and wires.

    Parameters
    ----------
    sim : Simulator or CoSimulation
        After its run (blocks initialized: port shapes known).

    Returns
    -------
    str
        Twelve hex digits; empty for a co-simulation (its units compile their own plans).
    """
    plan = getattr(sim, "plan", None)
    if plan is None:
        return ""
    fast = getattr(sim, "fast_path", None)
    if fast is not None:
        text = fast.source
    else:
        parts = [repr(plan.dt)]
        for name, b, task in zip(plan.names, plan.blocks, plan.task_of):
            shapes = [tuple(getattr(b.outputs.get(p), "shape", ())) for p in b.output_names]
            parts.append(f"{name}:{type(b).__qualname__}:{b.input_names}:{b.output_names}:"
                         f"{shapes}:{plan.tasks[task]}")
        text = "\n".join(parts + [repr(w) for w in plan.wires])
    return hashlib.blake2b(text.encode(), digest_size=6).hexdigest()


#: Per model source and config: its Rerun, or None when its runs cannot reuse one (at most
#: a few kept: each holds a built model).
_reruns: OrderedDict = OrderedDict()
RERUNS = 4


def _rerun_key(model_source, config):
    """A key naming the model source and config across tasks of one worker process (a
    module-level factory arrives as a new object in every Ray task; a model file is known by
    its path and modification, as a worker outlives a study)."""
    if isinstance(model_source, (str, Path)):
        st = os.stat(model_source)
        src = ("file", str(model_source), st.st_mtime_ns, st.st_size)
    else:
        name = getattr(model_source, "__qualname__", "<")
        src = ("fn", model_source.__module__, name) if "<" not in name else model_source
    return src, repr(config)


def _rerun_logs(model_source, config, run: Run):
    """The run's logs and structure digest through its model's Rerun, or None (build the
    run on its own)."""
    from cosim.fastpath.rerun import Rerun
    from cosim.fastpath.runtime import Unsupported
    try:
        key = _rerun_key(model_source, config)
    except OSError:
        return None                             # a missing model file: the build says so
    if key in _reruns:
        rerun, defaults = _reruns[key]
        _reruns.move_to_end(key)
    else:
        # The reference is this run: a study whose first run fails tries again with the next.
        rerun, defaults = None, {}
        try:
            model = build(model_source)
            cfg = config if config is not None else model.simulation
            if not _cosimulated(cfg):   # (a model file's own co-simulation: every run built)
                # A later run (of this study or the next one) sets what it does not name
                # back to the model's own values, not to the reference run's.
                defaults = dict(model.parameters)
                model.parameters.update(run.params)
                rerun = Rerun(model, cfg)
        except Unsupported:
            rerun = None
        except Exception:  # noqa: BLE001 - the run fails: built on its own, it says why
            return None
        _reruns[key] = rerun, defaults
        while len(_reruns) > RERUNS:
            _reruns.popitem(last=False)
    if rerun is None:
        return None
    try:
        logs = rerun.run({**defaults, **run.params})
    except Exception:  # noqa: BLE001 - Unsupported, or failing: the run on its own says why
        return None
    return logs, structure_of(rerun.sim)


def execute(model_source, config, run: Run, reducers: Mapping,
            logs_dir: str | dict | None, hosts=None) -> tuple[dict, str]:
    """Run and reduce one run: through its model's Rerun when it can, else built on its own
    (a co-simulation on ``hosts``, a :class:`~cosim.master.hosts.UnitHosts`, when given);
    its logs kept in ``logs_dir`` when given (:func:`keep_logs`).

    Returns
    -------
    row : dict
        The run's row of the results table (status ``failed`` and NaN metrics when the run
        failed; NaN in its own column for each reducer that failed).
    structure : str
        :func:`structure_of` the run's plan (empty when the run failed before compiling).
    """
    start = time.perf_counter()
    row = {"run_id": run.run_id, "index": run.index, **run.params, "status": "ok",
           "error": "", "wall_time": 0.0, "reducer_errors": ""}
    structure = ""
    try:
        done = (None if _cosimulated(config) else _rerun_logs(model_source, config, run)) \
            or _built(model_source, config, run, hosts)
        logs, structure = done
        if logs_dir is not None:
            keep_logs(logs_dir, run.run_id, logs)
    except Exception as err:  # noqa: BLE001 - a failed run is recorded, the sweep goes on
        row.update(status="failed", error=f"run {run.run_id} {run.params}: "
                                          f"{type(err).__name__}: {err}")
        row.update({name: math.nan for name in reducers})
    else:
        values, row["reducer_errors"] = reduce_all(logs, reducers)
        row.update(values)
    row["wall_time"] = time.perf_counter() - start
    return row, structure


def _cosimulated(config) -> bool:
    """The runs are co-simulations (a model file's own configuration is not known before
    the file is read: its first run finds out, and the answer is kept)."""
    return config is not None and config.cosim is not None


def _built(model_source, config, run: Run, hosts=None):
    """``(logs, structure digest)`` of a run built on its own (a co-simulation's units on
    ``hosts`` when given)."""
    from cosim import simulation
    model = build(model_source)
    model.parameters.update(run.params)
    cfg = config if config is not None else model.simulation
    if hosts is not None and cfg is not None and cfg.cosim is not None:
        from cosim.master.cosimulation import CoSimulation
        sim = CoSimulation(model, cfg, hosts=hosts)
    else:
        sim = simulation(model, cfg)
    ok = False
    try:
        logs = sim.run()
        ok = True
    finally:
        if hosts is not None and hasattr(sim, "hosts"):
            sim.close(keep=ok)          # a failed run's hosts are stopped, not handed on
        elif hasattr(sim, "close"):
            sim.close()
    return logs, structure_of(sim)


def execute_many(model_source, config, runs: Sequence[Run], reducers: Mapping,
                 logs_dir: str | None, ensemble: bool = False, reuse_units: bool = True,
                 hosts=None) -> list[tuple[dict, str]]:
    """:func:`execute` each run of a chunk, in order; with ``ensemble``, simulate the chunk
    as one ensemble (:mod:`cluster.ensemble`), and when that fails, each run on its own (so
    every run gets its own row and error). With ``reuse_units``, co-simulated runs share
    their units' hosts: ``hosts`` (a :class:`~cosim.master.hosts.UnitHosts` the caller
    closes), else the chunk's own (stopped when the chunk is done). Each row names the
    process that ran it under ``worker`` (``host:pid``)."""
    out = _execute_many(model_source, config, runs, reducers, logs_dir, ensemble,
                        reuse_units, hosts)
    worker = f"{socket.gethostname()}:{os.getpid()}"
    for row, _ in out:
        row["worker"] = worker      # for the dashboard; the sweep takes it off the row
    return out


def _execute_many(model_source, config, runs, reducers, logs_dir, ensemble, reuse_units,
                  hosts) -> list[tuple[dict, str]]:
    how = None
    if ensemble and runs:
        from cluster.ensemble import run_ensemble
        try:
            return run_ensemble(model_source, config, runs, reducers, logs_dir)
        except Exception as err:  # noqa: BLE001 - a member failed: find which, run by run
            how = f"one by one: {type(err).__name__}: {err}"[:300]
    if not reuse_units:
        done = [execute(model_source, config, r, reducers, logs_dir) for r in runs]
    elif hosts is not None:
        done = [execute(model_source, config, r, reducers, logs_dir, hosts) for r in runs]
    else:
        from cosim.master.hosts import UnitHosts
        with UnitHosts() as own:
            done = [execute(model_source, config, r, reducers, logs_dir, own) for r in runs]
    if how is not None:
        from cluster.ensemble import PATH_KEY
        for row, _ in done:
            row[PATH_KEY] = how
    return done


def structural_parameters(runs: Sequence[Run], structures: Mapping[int, str]) -> list[str]:
    """The parameters whose changes change the plan's structure.

    A parameter is named when two runs of different structure differ in it and no two runs
    of one structure do (runs compared in design order, each with the one before it).

    Parameters
    ----------
    runs : list of Run
    structures : dict of int to str
        Run index -> :func:`structure_of` its plan (runs that failed or were not run left out).
    """
    changed, free = set(), set()
    prev = None
    for r in runs:
        s = structures.get(r.index, "")
        if not s:
            continue
        if prev is not None:
            diff = {k for k in r.params if r.params[k] != prev[0].params.get(k)}
            (changed if s != prev[1] else free).update(diff)
        prev = (r, s)
    return sorted(changed - free)
