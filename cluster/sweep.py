"""Parameter studies: one model run many times with different parameters, gathered in one table.

Each run is a whole simulation (or co-simulation) of the model with parameter overrides
applied through the evaluation phase (:attr:`cosim.Model.parameters`), so a sweep needs no
change to the model. Runs go to Ray (the embedded local Ray, or ``address=``: a long-lived
task per CPU pulls chunks of runs from the driver, :mod:`cluster.sweep_ray`), a process pool,
or run serially (by default a process pool, and Ray when an address is given or Ray already
runs: :func:`choose_backend`); at most ``max_in_flight`` at once, each retried when its worker dies.
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

__all__ = ["BACKEND_RULE", "KINDS", "Reducer", "Run", "choose_backend", "final", "grid",
           "integral_abs_error", "lhs", "listed", "maximum", "mean", "minimum", "overshoot",
           "random_uniform", "ray_running", "rms", "settling_time", "sobol", "sweep"]

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

#: What a sweep runs on without a ``backend``: the rule, as ``cosim sweep --help`` states it.
BACKEND_RULE = ("default: ray when a Ray address is given or Ray is already running (in this "
                "process, RAY_ADDRESS, or a `ray start` cluster on this machine), otherwise "
                "process: local worker processes, one per core (Ray is never started for it)")


def ray_running() -> bool:
    """Whether Ray is already running for this process to use: initialised here, named by
    ``RAY_ADDRESS``, or a cluster that ``ray start`` left on this machine (its address file,
    ``$RAY_TMPDIR/ray/ray_current_cluster``, names a port that answers). Never imports or
    starts Ray."""
    import socket
    import tempfile
    ray = sys.modules.get("ray")
    if ray is not None and getattr(ray, "is_initialized", lambda: False)():
        return True
    if os.environ.get("RAY_ADDRESS"):
        return True
    tmp = os.environ.get("RAY_TMPDIR") or (os.environ.get("TMPDIR") if sys.platform.startswith(
        "linux") else None) or ("/tmp" if os.name == "posix" else tempfile.gettempdir())
    try:
        address = (Path(tmp) / "ray" / "ray_current_cluster").read_text().strip()
        host, _, port = address.rpartition(":")
        with socket.create_connection((host, int(port)), timeout=0.2):
            return True
    except (OSError, ValueError):
        return False


def choose_backend(backend: str | None, address: str | None) -> str:
    """The sweep backend: ``backend`` when given, else by :data:`BACKEND_RULE`."""
    if backend is not None:
        return backend
    return "ray" if address is not None or ray_running() else "process"


def sweep(model, config, design, reducers: Mapping[str, Callable] | None = None, *,
          out_dir=None, backend: str | None = None, max_in_flight: int | None = None,
          retries: int = 2, address: str | None = None, save_logs: bool = False,
          progress: bool | None = None, if_changed: str = "refuse",
          ensemble: int | None = None, reuse_units: bool = True,
          runtime_env: dict | None = None, ports: tuple[int, int] | None = None,
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
    backend : str, optional
        ``"ray"`` (tasks on the embedded local Ray or ``address``), ``"process"`` (a process
        pool of one worker per core) or ``"serial"``. None (default): ``"ray"`` when
        ``address`` is given or Ray is already running (:func:`ray_running`), else
        ``"process"`` (Ray is not started for a study on one machine).
    max_in_flight : int, optional
        Most runs at once (default: one per CPU of the pool or the Ray cluster; on Ray,
        the number of pullers). The pool has a worker's next chunk queued before the
        current one finishes (twice as many submitted as can run).
    retries : int
        Times a chunk of runs is run again when its worker process dies (Ray); then its
        runs are rows ``failed`` ("worker lost after N retries").
    address : str, optional
        Ray: the cluster to join (``"auto"`` or the head's ``host:port``); a Ray already
        started in this process on another cluster is an error naming both.
    save_logs : bool
        Keep each run's full logs (``out_dir/logs``; on Ray they come back to the driver,
        which writes them: no worker writes on its own disk).
    progress : bool, optional
        Show a progress bar with runs done, failed and the rate (default: on a terminal).
    if_changed : str
        ``out_dir`` holds the results of a sweep with another model, configuration, design
        or reducers (``sweep.json``): ``"refuse"`` (default, naming what changed) or
        ``"new"`` (write to the sibling directory ``<out_dir>-<digest>`` instead).
    ensemble : int, optional
        Simulate this many runs at once as one model (:mod:`cluster.ensemble`; a Ray task or
        pool process runs one ensemble): with a fixed-step explicit solver every run's
        results are bit for bit its own simulation's. Adaptive and implicit solvers,
        scheduled or stopping events, crossings of signals, algebraic loops and
        co-simulations are refused before the first run (mode switches, a Relay's, and zero
        crossings of continuous states are located per member).
        Each ensemble runs the generated code translated for arrays of N members where it
        can, else as N copies in one model; the result's ``ensembles`` say which, and which
        block forced the copies (also logged, and counted on the progress bar).
    reuse_units : bool
        Co-simulated runs of a chunk (a task) reload their units into the Ray actors or
        server processes of the run before instead of starting new ones
        (:mod:`cosim.master.hosts`; results bit for bit those of new units). False starts
        new ones for every run.
    runtime_env : dict, optional
        Ray: the pullers' runtime environment (code and packages shipped to the nodes). A
        model file's directory is shipped as their ``working_dir`` unless one is given
        (:func:`cluster.sweep_ray.ship`).
    ports : (int, int), optional
        Ray: bind the driver's socket (which the workers connect to) in ``[low, high]``.
    dashboard : bool, str or Dashboard, optional
        Show the sweep in the browser (:mod:`cosim.dashboard`): runs done, failed and
        pending per worker, and the results table filling in. True (localhost, a free port;
        the address is printed), ``"HOST:PORT"``, or a Dashboard of yours (left open).

    Returns
    -------
    Rows
        A list of dicts, one row per run, sorted by index (and :attr:`Rows.ensembles`): ``run_id``, ``index``, the parameters, ``status``
        (``ok`` / ``failed``), ``error``, ``wall_time`` (s), one column per reducer, and
        ``reducer_errors`` (each failed reducer: ``"name: Exception: message"``).

    Raises
    ------
    ModelError
        Before any run: the design sets a parameter the model does not have, a reducer reads
        a signal the model does not log (both named, with close matches), or a name clashes.
    """
    reducers = dict(reducers or {})
    backend = choose_backend(backend, address)
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
                          retries, address, runs, runtime_env, ports, out_dir)
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
    # Only a results directory needs the fingerprint (the model written as a model file: the
    # file writer's imports and the block registry's discovery cost a fresh process ~0.25 s).
    fp = fingerprint(model, config, [r.run_id for r in runs], reducers, built=built) \
        if out_dir is not None else None
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
    ensembles: list[dict] = []
    if backend == "ray" and todo:
        pullers.start()         # Ray first: its start-up notices come before the bar
    bar = _Progress.open(len(runs), len(runs) - len(todo), progress)
    if pullers is not None and bar is not None:
        pullers.notice = bar.waiting        # work that cannot start shows on the bar
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
        if ensemble is not None and done:
            _ensemble_ran(done, ensembles, bar)
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
    return Rows(rows, sorted(ensembles, key=lambda e: e["runs"][0]))


class Rows(list):
    """The results table, one row per run (a list of dicts), with what ran:

    Attributes
    ----------
    ensembles : list of dict
        With ``ensemble=N``, each ensemble simulated by this call (runs resumed from the
        results file are not): ``runs`` (their indices), ``path`` (``"translated"``: one
        vectorised run of the generated code; ``"copies"``: one model holding a copy per
        run; ``"one by one"``: each run alone, after the ensemble failed) and ``reason``
        (why not translated: the block and what it needs, or the error).
    """

    def __init__(self, rows, ensembles=()):
        super().__init__(rows)
        self.ensembles = list(ensembles)


def _ensemble_ran(done: list[tuple[dict, str]], ensembles: list, bar) -> None:
    """Take the ensemble's path out of its rows (:data:`cluster.ensemble.PATH_KEY`), keep it
    and say it: a warning for the first ensemble that did not translate, for each
    reason; the progress bar counts the translated ones."""
    from cluster.ensemble import PATH_KEY
    how = ""
    for row, _ in done:
        how = row.pop(PATH_KEY, how) or how
    path, _, reason = (how or "lost: its worker was lost").partition(": ")
    entry = {"runs": [row["index"] for row, _ in done], "path": path.split(" (")[0],
             "reason": reason}
    if entry["path"] != "translated" and not any(
            e["reason"] == reason and e["path"] == entry["path"] for e in ensembles):
        log.warning("ensemble of runs %d-%d ran %s: %s", entry["runs"][0], entry["runs"][-1],
                    "as copies" if entry["path"] == "copies" else entry["path"], reason)
    ensembles.append(entry)
    if bar is not None:
        bar.ensemble(entry["path"] == "translated")


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
        self.ensembles = [0, 0]         # translated, not
        self.note = ""
        bar.set_postfix_str("failed 0", refresh=False)

    def _postfix(self) -> str:
        text = f"failed {self.failed}"
        done = sum(self.ensembles)
        if done:
            text += f", ensembles translated {self.ensembles[0]}/{done}"
        if self.note:
            text += f"; {self.note}"
        return text

    def ensemble(self, translated: bool) -> None:
        self.ensembles[0 if translated else 1] += 1
        self.bar.set_postfix_str(self._postfix(), refresh=False)

    @classmethod
    def open(cls, total: int, initial: int, progress: bool | None):
        show = sys.stderr.isatty() if progress is None else progress
        if not show:
            return None
        from tqdm import tqdm
        return cls(tqdm(total=total, initial=initial, unit="run", desc="sweep"))

    def update(self, row: dict) -> None:
        if row["status"] != "ok" or self.note:
            self.failed += row["status"] != "ok"
            self.note = ""
            self.bar.set_postfix_str(self._postfix(), refresh=False)
        self.bar.update(1)

    def waiting(self, note: str) -> None:
        """Show what the runs wait for (until the next run is done)."""
        self.note = note
        self.bar.set_postfix_str(self._postfix())

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
    ap.add_argument("--backend", default=None, choices=("ray", "process", "serial"),
                    help=f"where the runs go ({BACKEND_RULE})")
    ap.add_argument("--workers", type=int, default=None, help="runs at once")
    ap.add_argument("--ensemble", type=int, default=None, metavar="N",
                    help="simulate N runs at once as one model (fixed-step explicit solvers)")
    ap.add_argument("--ray-address", metavar="ADDRESS",
                    help="Ray cluster to join ('auto' or the head's host:port); implies "
                         "--backend ray")
    ap.add_argument("--address", dest="deprecated_address", help=argparse.SUPPRESS)
    ap.add_argument("--runtime-env", metavar="FILE",
                    help="Ray runtime environment of the workers (YAML or JSON); the model's "
                         "directory is shipped as their working_dir unless it sets one")
    ap.add_argument("--ports", metavar="LOW-HIGH",
                    help="Ray: port range of the driver's socket the workers connect to")
    ap.add_argument("--save-logs", action="store_true", help="keep each run's logs (NPZ)")
    ap.add_argument("--if-changed", choices=("refuse", "new"), default="refuse",
                    help="DIR holds another sweep's results: refuse (default) or write to "
                         "a new DIR-<digest>")
    args = ap.parse_args(argv)
    if args.deprecated_address is not None:
        print("cosim sweep: --address is deprecated: use --ray-address", file=sys.stderr)
        args.ray_address = args.ray_address or args.deprecated_address
    from cosim.cli.common import Usage
    try:
        from cosim.cli.options import port_range, runtime_env_file
        runtime_env = runtime_env_file(args.runtime_env)
        ports = port_range(args.ports)
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
                     backend=args.backend, max_in_flight=args.workers,
                     address=args.ray_address, save_logs=args.save_logs,
                     if_changed=args.if_changed, ensemble=args.ensemble,
                     runtime_env=runtime_env, ports=ports)
    except (ValueError, ModelError, OSError, Usage) as err:
        print(f"cosim sweep: error: {err}", file=sys.stderr)
        return 2
    failed = sum(r["status"] != "ok" for r in rows)
    print(f"{len(rows)} runs ({failed} failed); results in {Path(args.out) / 'results.csv'}")
    if args.ensemble is not None:
        _print_ensembles(rows.ensembles)
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


def _print_ensembles(ensembles: list[dict]) -> None:
    """How the ensembles ran: how many were translated, and why the others were not."""
    paths = [e["path"] for e in ensembles]
    print(f"ensembles: {paths.count('translated')} translated, {paths.count('copies')} as "
          f"copies, {paths.count('one by one')} one by one")
    for reason in dict.fromkeys(e["reason"] for e in ensembles if e["path"] != "translated"):
        which = [e for e in ensembles if e["reason"] == reason]
        print(f"  {len(which)} {which[0]['path']}: {reason}")


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
