"""Parameter studies: one model run many times with different parameters, gathered in one table.

Each run is a whole simulation (or co-simulation) of the model with parameter overrides
applied through the evaluation phase (:attr:`cosim.Model.parameters`), so a sweep needs no
change to the model. Runs go to Ray (the embedded local Ray, or ``address=``: a long-lived
task per CPU pulls chunks of runs from the driver, :mod:`cluster.sweep_ray`), a process pool,
or run serially; at most ``max_in_flight`` at once, each retried when its worker dies.
Finished runs are appended to ``results.csv`` in synced batches, so a sweep that is killed and
started again with the same output directory skips the runs already written; the final table
is sorted by run index and equals an uninterrupted sweep's. ``sweep.json`` fingerprints the
sweep, so a directory is resumed only by the same sweep (see :mod:`cluster.sweep_results`).

Runs travel to workers in chunks (or ensembles, :mod:`cluster.ensemble`); a worker compiles the
generated code of a structure once and reuses it for its later runs, and the sweep warns
naming the parameters that change the structure (:mod:`cluster.sweep_worker`).

Before the first run the design's parameter names and the signals the reducers read are
checked against the model. A run that fails is a row with status ``failed``; a reducer that
fails is NaN in its own column, named in ``reducer_errors``, and the other metrics stay.

>>> rows = sweep(make_model, config, grid({"k": [1.0, 2.0], "tau": [0.1, 0.2]}),
...              {"y_end": final("plant.out")}, out_dir="study")
"""

from __future__ import annotations

import difflib
import logging
import math
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from cluster.sweep_design import Run, grid, lhs, listed, random_uniform, runs_of, sobol
from cluster.sweep_reducers import (KINDS, Reducer, check_signals, final, integral_abs_error,
                                    maximum, mean, minimum, overshoot, rms,
                                    settling_time)
from cluster.sweep_results import ResultsTable, fingerprint, results_dir, write_parquet
from cluster.sweep_worker import build, execute_many, structural_parameters
from cosim.errors import CompileError, ModelError

log = logging.getLogger("cosim.sweep")

__all__ = ["KINDS", "Reducer", "Run", "final", "grid", "integral_abs_error", "lhs", "listed",
           "maximum", "mean", "minimum", "overshoot", "random_uniform", "rms", "settling_time",
           "sobol", "sweep"]

#: Columns of every results table besides the parameters and the metrics.
RESERVED = ("run_id", "index", "status", "error", "wall_time", "reducer_errors")


def _lost(r: Run, reducers, why: str) -> dict:
    """The row of a run whose worker was lost."""
    return {"run_id": r.run_id, "index": r.index, **r.params, "status": "failed",
            "wall_time": math.nan, "error": f"run {r.run_id} {r.params}: {why}",
            "reducer_errors": "", **{k: math.nan for k in reducers}}


def _chunks(todo: list[Run], workers: int, ensemble: int | None) -> list[list[Run]]:
    """Runs in chunks, one process-pool task each (``workers`` 0: single runs): an
    ensemble's runs, or chunks that shrink as the runs left do (guided self-scheduling: each
    the runs left over the workers, at most 100, so a lost worker costs little, and at least
    4 until the last, as each task's arguments and rows cross a pipe). Ray's pullers cut
    their own (:func:`cluster.sweep_ray.chunks`)."""
    if ensemble:
        return [todo[i:i + ensemble] for i in range(0, len(todo), ensemble)]
    if workers <= 0:
        return [[r] for r in todo]
    out, i = [], 0
    while i < len(todo):
        size = max(4, min(100, math.ceil((len(todo) - i) / workers)))
        out.append(todo[i:i + size])
        i += size
    return out


# -- the results file -----------------------------------------------------------------------

def _parse(row: dict) -> dict:
    out = {}
    for k, v in row.items():
        if k in ("run_id", "status", "error", "reducer_errors"):
            out[k] = v
        elif k == "index":
            out[k] = int(v)
        else:
            try:
                out[k] = float(v)
            except (TypeError, ValueError):
                out[k] = v
    return out


# -- checks before the first run --------------------------------------------------------------

def _check_names(names: list[str], reducers: Mapping) -> None:
    clash = sorted((set(names) | set(reducers)) & set(RESERVED)) + \
        sorted(set(names) & set(reducers))
    if clash:
        raise ModelError(f"{', '.join(clash)}: a parameter or metric may not be named like "
                         f"another column (reserved: {', '.join(RESERVED)}); rename it")


def _check_model(built, config, runs: list[Run], reducers: Mapping) -> None:
    """The design's parameters and the reducers' signals against the model, before any run."""
    from cosim.model.evaluate import evaluate
    params = dict(getattr(built, "parameters", {}) or {})
    unknown = sorted({k for r in runs for k in r.params} - set(params))
    if unknown:
        hints = []
        for k in unknown:
            close = difflib.get_close_matches(k, list(params), n=3, cutoff=0.5)
            hints.append(f"{k!r}" + (f" (did you mean {', '.join(map(repr, close))}?)"
                                     if close else ""))
        raise ModelError(f"the design sets {', '.join(hints)}, not parameters of model "
                         f"{built.name!r} (its parameters: {', '.join(params) or 'none'})")
    try:
        evaluate(built, runs[0].params)
    except (CompileError, ModelError):
        return          # the runs report it, each with its own parameters
    check_signals(built, config if config is not None else getattr(built, "simulation", None),
                  reducers)


# -- the sweep ------------------------------------------------------------------------------

def sweep(model, config, design, reducers: Mapping[str, Callable] | None = None, *,
          out_dir=None, backend: str = "ray", max_in_flight: int | None = None,
          retries: int = 2, address: str | None = None, save_logs: bool = False,
          progress: bool | None = None, if_changed: str = "refuse",
          ensemble: int | None = None, reuse_units: bool = True,
          dashboard=None) -> list[dict]:
    """Run ``model`` once per point of ``design``; return the results table (a row per run).

    Parameters
    ----------
    model : callable or str
        A factory ``() -> Model`` or a YAML model file path.
    config : SimulationConfig or None
        The run configuration (None: the model file's ``simulation:``). With ``cosim`` set,
        every run is a co-simulation.
    design : list of dict
        Parameter points (:func:`grid`, :func:`listed`, :func:`random_uniform`, :func:`lhs`,
        :func:`sobol`, :func:`cluster.sensitivity.saltelli`, :func:`cluster.sensitivity.morris`).
    reducers : dict of str to callable
        Metric name -> :class:`Reducer` (:func:`final`, :func:`overshoot`, ...) or any
        ``f(logs) -> float`` (a module-level function for the process pool; give it a
        ``signals`` attribute to have its signals checked before the first run).
    out_dir : path, optional
        Where ``results.csv`` (and ``results.parquet`` when pyarrow is installed, with the
        fingerprint in its metadata, and ``logs/<run_id>.npz`` with ``save_logs``) go;
        running again resumes.
    backend : str
        ``"ray"`` (tasks on the embedded local Ray or ``address``), ``"process"`` (a process
        pool) or ``"serial"``.
    max_in_flight : int, optional
        Most runs at once (default: one per CPU of the pool or the Ray cluster; on Ray,
        the number of pullers). The pool has a worker's next chunk queued before the
        current one finishes (twice as many submitted as can run).
    retries : int
        Times a chunk of runs is run again when its worker process dies (Ray); then its
        runs are rows ``failed`` ("worker lost after N retries").
    save_logs : bool
        Keep each run's full logs.
    progress : bool, optional
        Show a progress bar with runs done, failed and the rate (default: on a terminal).
    if_changed : str
        ``out_dir`` holds the results of a sweep with another model, configuration, design
        or reducers (``sweep.json``): ``"refuse"`` (default, naming what changed) or
        ``"new"`` (write to the sibling directory ``<out_dir>-<digest>`` instead).
    ensemble : int, optional
        Simulate this many runs at once as one model (:mod:`cluster.ensemble`; a Ray task or
        pool process runs one ensemble): with a fixed-step explicit solver every run's
        results are bit for bit its own simulation's. Adaptive and implicit solvers, events,
        mode switches, algebraic loops and co-simulations are refused before the first run.
    reuse_units : bool
        Co-simulated runs of a chunk (a task) reload their units into the Ray actors or
        server processes of the run before instead of starting new ones
        (:mod:`cosim.master.hosts`; results bit for bit those of new units). False starts
        new ones for every run.
    dashboard : bool, str or Dashboard, optional
        Show the sweep in the browser (:mod:`cosim.dashboard`): runs done, failed and
        pending per worker, and the results table filling in. True (localhost, a free port;
        the address is printed), ``"HOST:PORT"``, or a Dashboard of yours (left open).

    Returns
    -------
    list of dict
        One row per run, sorted by index: ``run_id``, ``index``, the parameters, ``status``
        (``ok`` / ``failed``), ``error``, ``wall_time`` (s), one column per reducer, and
        ``reducer_errors`` (each failed reducer: ``"name: Exception: message"``).

    Raises
    ------
    ModelError
        Before any run: the design sets a parameter the model does not have, a reducer reads
        a signal the model does not log (both named, with close matches), or a name clashes.
    """
    reducers = dict(reducers or {})
    if backend not in ("ray", "process", "serial"):
        raise ModelError(f"unknown sweep backend {backend!r}; use ray, process or serial")
    runs = runs_of(design)
    if not runs:
        raise ModelError("the design has no points")
    pullers = None
    if backend == "ray":
        import ray

        from cluster.sweep_ray import Pullers
        pullers = Pullers(model, config, reducers, ensemble, reuse_units, max_in_flight,
                          retries, address, runs)
        if ray.is_initialized():
            pullers.start()         # Ray's task start-up overlaps the checks below
    try:
        return _sweep(model, config, runs, reducers, out_dir, backend, max_in_flight,
                      save_logs, progress, if_changed, ensemble, reuse_units, pullers,
                      dashboard)
    finally:
        if pullers is not None:
            pullers.close()


def _sweep(model, config, runs, reducers, out_dir, backend, max_in_flight, save_logs,
           progress, if_changed, ensemble, reuse_units, pullers, dashboard=None) -> list[dict]:
    """:func:`sweep` of ``runs`` (the design's) once its pullers (Ray) are started or made."""
    names = list(dict.fromkeys(k for r in runs for k in r.params))
    _check_names(names, reducers)
    columns = ["run_id", "index", *names, "status", "error", "wall_time", *reducers,
               "reducer_errors"]
    built = build(model)
    fp = fingerprint(model, config, [r.run_id for r in runs], reducers, built=built)
    _check_model(built, config, runs, reducers)
    if ensemble is not None:
        from cluster.ensemble import check_ensemble
        if not (isinstance(ensemble, int) and ensemble >= 1):
            raise ModelError(f"ensemble must be an int >= 1 (runs per simulation), got "
                             f"{ensemble!r}")
        check_ensemble(built, config if config is not None else built.simulation)
    out = Path(out_dir) if out_dir is not None else None
    logs_dir = None
    if out is not None:
        out = results_dir(out, fp, if_changed)
        if save_logs:
            logs_dir = out / "logs"
            logs_dir.mkdir(exist_ok=True)
        table = ResultsTable(out / "results.csv", columns)
    else:
        table = None
    done = set(table.done) if table is not None else set()
    todo = [r for r in runs if r.run_id not in done]
    results: dict[str, dict] = {}
    structures: dict[int, str] = {}
    if backend == "ray" and todo:
        pullers.start()         # Ray first: its start-up notices come before the bar
    bar = _Progress.open(len(runs), len(runs) - len(todo), progress)
    board = own_board = None
    if dashboard is not None and dashboard is not False:
        from cosim.dashboard import open_dashboard
        from cosim.dashboard.sweeps import SweepMonitor
        own_board, owned = open_dashboard(dashboard)
        board = SweepMonitor(own_board, len(runs), len(runs) - len(todo), columns,
                             getattr(built, "name", None) or "sweep")
        own_board = own_board if owned else None

    def finished(done: list[tuple[dict, str]]):
        workers = [row.pop("worker", None) for row, _ in done]    # not a results column
        if board is not None:
            board.rows([(row, w) for (row, _), w in zip(done, workers)])
        for row, structure in done:
            results[row["run_id"]] = row
            structures[row["index"]] = structure
            if table is not None:
                table.add(row)
            if bar is not None:
                bar.update(row)

    logs_arg = str(logs_dir) if logs_dir is not None else None
    try:
        if backend == "serial":
            # The units' hosts serve every run of the study (the chunks are single runs).
            from cosim.master.hosts import UnitHosts
            with UnitHosts() as hosts:
                for chunk in _chunks(todo, 0, ensemble or 1):
                    finished(execute_many(model, config, chunk, reducers, logs_arg,
                                          ensemble is not None, reuse_units, hosts))
        elif backend == "process":
            _run_pool(model, config, todo, reducers, logs_arg, max_in_flight, ensemble,
                      reuse_units, finished)
        else:
            pullers.run(todo, logs_arg, finished,
                        lambda chunk, err: [(_lost(r, reducers, f"worker lost after "
                                                   f"{pullers.retries} retries: "
                                                   f"{type(err).__name__}"), "")
                                            for r in chunk])
    except BaseException:
        if board is not None:
            board.finish("failed")
        raise
    else:
        if board is not None:
            board.finish("done")
    finally:
        if bar is not None:
            bar.close()
        if table is not None:
            table.close()
        if own_board is not None:
            own_board.close()
    if table is not None:
        rows = [_parse(row) for row in table.done.values()]
    else:
        rows = list(results.values())
    rows.sort(key=lambda row: row["index"])
    if out is not None:
        write_parquet(rows, out / "results.parquet", fp)
    _report_structures(runs, structures)
    return rows


def _report_structures(runs: list[Run], structures: dict[int, str]) -> None:
    """Warn when the runs compiled code of several structures, naming the parameters that
    change it: runs of another structure cannot reuse a worker's compiled code."""
    kinds = {s for s in structures.values() if s}
    if len(kinds) > 1:
        which = structural_parameters(runs, structures)
        log.warning("the runs compiled code of %d structures (each compiled again in every "
                    "worker: shapes, sample times, block forms or wires differ); %s",
                    len(kinds), f"parameter(s) {', '.join(which)} change it" if which else
                    "no single parameter explains it")


class _Progress:
    """A progress bar of runs: done (of all), failed, and the rate (runs/s)."""

    def __init__(self, bar):
        self.bar = bar
        self.failed = 0
        bar.set_postfix_str("failed 0", refresh=False)

    @classmethod
    def open(cls, total: int, initial: int, progress: bool | None):
        show = sys.stderr.isatty() if progress is None else progress
        if not show:
            return None
        from tqdm import tqdm
        return cls(tqdm(total=total, initial=initial, unit="run", desc="sweep"))

    def update(self, row: dict) -> None:
        if row["status"] != "ok":
            self.failed += 1
            self.bar.set_postfix_str(f"failed {self.failed}", refresh=False)
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()


def _run_pool(model, config, todo, reducers, logs_dir, max_in_flight, ensemble,
              reuse_units, finished) -> None:
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    workers = max_in_flight or os.cpu_count() or 1
    depth = 2 * workers      # the pool runs `workers` chunks at once; the rest wait queued
    with ProcessPoolExecutor(max_workers=workers) as pool:
        pending = set()
        queue = _chunks(todo, workers, ensemble)
        while queue or pending:
            while queue and len(pending) < depth:
                pending.add(pool.submit(execute_many, model, config, queue.pop(0), reducers,
                                        logs_dir, ensemble is not None, reuse_units))
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in done:
                finished(f.result())


# -- command line -----------------------------------------------------------------------------

def main(argv=None) -> int:
    """``cosim sweep MODEL --out DIR [design] [--metric NAME=KIND:SIGNAL[:A[:B]] ...]``.

    With ``--sensitivity sobol|morris N`` and ``--range``s, the design is the method's and
    its indices of every metric are printed and written to ``DIR/sensitivity_<metric>.csv``.
    """
    import argparse
    ap = argparse.ArgumentParser(prog="cosim sweep", description="Run a parameter study of a "
                                 "model file; results go to DIR/results.csv (resumable).")
    ap.add_argument("model", help="model file (.yaml) with a simulation: section")
    ap.add_argument("--out", required=True, metavar="DIR")
    ap.add_argument("--grid", action="append", default=[], metavar="NAME=V1,V2,...")
    ap.add_argument("--design", metavar="FILE", help="explicit points (CSV or YAML list)")
    ap.add_argument("--sample", nargs=2, metavar=("KIND", "N"),
                    help="random, lhs or sobol, with N points in the --range box")
    ap.add_argument("--sensitivity", nargs=2, metavar=("METHOD", "N"),
                    help="sobol (N base samples, a power of 2: N*(d+2) runs) or morris "
                         "(N trajectories: N*(d+1) runs) over the --range box; the indices "
                         "of every metric go to DIR/sensitivity_<metric>.csv (needs SALib)")
    ap.add_argument("--range", action="append", default=[], metavar="NAME=LOW:HIGH")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--metric", action="append", default=[],
                    metavar="NAME=KIND:SIGNAL[:A[:B]]",
                    help=f"a summary per run; KIND one of {', '.join(KINDS)}")
    ap.add_argument("--backend", default="ray", choices=("ray", "process", "serial"))
    ap.add_argument("--workers", type=int, default=None, help="runs at once")
    ap.add_argument("--ensemble", type=int, default=None, metavar="N",
                    help="simulate N runs at once as one model (fixed-step explicit solvers)")
    ap.add_argument("--address", help="Ray cluster to join")
    ap.add_argument("--save-logs", action="store_true", help="keep each run's logs (NPZ)")
    ap.add_argument("--if-changed", choices=("refuse", "new"), default="refuse",
                    help="DIR holds another sweep's results: refuse (default) or write to "
                         "a new DIR-<digest>")
    args = ap.parse_args(argv)
    try:
        bounds = {}
        for r in args.range:
            name, _, span = r.partition("=")
            lo, _, hi = span.partition(":")
            bounds[name] = (float(lo), float(hi))
        if args.sensitivity:
            from cluster import sensitivity
            method, n = args.sensitivity
            makers = {"sobol": sensitivity.saltelli, "morris": sensitivity.morris}
            if method not in makers or not bounds:
                raise ValueError("--sensitivity needs sobol|morris, N and at least one --range")
            if args.if_changed == "new":
                raise ValueError("--sensitivity writes its indices beside DIR's results: "
                                 "give a new DIR instead of --if-changed new")
            points = makers[method](bounds, int(n), args.seed)
        elif args.design:
            points = listed(args.design)
        elif args.sample:
            kind, n = args.sample
            makers = {"random": random_uniform, "lhs": lhs, "sobol": sobol}
            if kind not in makers or not bounds:
                raise ValueError("--sample needs random|lhs|sobol, N and at least one --range")
            points = makers[kind](bounds, int(n), args.seed)
        elif args.grid:
            axes = {}
            for g in args.grid:
                name, _, values = g.partition("=")
                axes[name] = [float(v) for v in values.split(",")]
            points = grid(axes)
        else:
            raise ValueError("give a design: --grid, --design, --sample or --sensitivity with "
                             "--range")
        reducers = {}
        for spec in args.metric:
            name, _, rest = spec.partition("=")
            kind, _, rest = rest.partition(":")
            key, *extra = rest.split(":")
            if kind not in KINDS or not key:
                raise ValueError(f"--metric {spec!r}: write NAME=KIND:SIGNAL[:A[:B]] with KIND "
                                 f"one of {', '.join(KINDS)}")
            reducers[name] = Reducer(kind, key, *[float(x) for x in extra])
        rows = sweep(args.model, None, points, reducers, out_dir=args.out,
                     backend=args.backend, max_in_flight=args.workers, address=args.address,
                     save_logs=args.save_logs, if_changed=args.if_changed,
                     ensemble=args.ensemble)
    except (ValueError, ModelError, OSError) as err:
        print(f"cosim sweep: error: {err}", file=sys.stderr)
        return 2
    failed = sum(r["status"] != "ok" for r in rows)
    print(f"{len(rows)} runs ({failed} failed); results in {Path(args.out) / 'results.csv'}")
    if args.sensitivity and not failed:
        for metric in reducers:
            try:
                table = points.analyze(rows, metric)
            except ModelError as err:
                print(f"cosim sweep: {metric}: no indices: {err}", file=sys.stderr)
                failed += 1
                continue
            _write_indices(table, Path(args.out) / f"sensitivity_{metric}.csv", metric)
    return 0 if not failed else 1


def _write_indices(table: list[dict], path: Path, metric: str) -> None:
    """Print a sensitivity table and write it as CSV."""
    import csv
    cols = list(table[0])
    print(f"sensitivity of {metric}:")
    print("  ".join(f"{c:>12}" for c in cols))
    for row in table:
        print("  ".join(f"{row[c]:>12}" if isinstance(row[c], str) else f"{row[c]:12.4f}"
                        for c in cols))
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=cols)
        writer.writeheader()
        writer.writerows({k: (repr(v) if isinstance(v, float) else v) for k, v in r.items()}
                         for r in table)
