"""Parameter studies: one model run many times with different parameters, gathered in one table.

Each run is a whole simulation (or co-simulation) of the model with parameter overrides
applied through the evaluation phase (:attr:`cosim.Model.parameters`), so a sweep needs no
change to the model. Runs go to Ray tasks (the embedded local Ray, or ``address=``), a process
pool, or run serially; at most ``max_in_flight`` at once, each retried when its worker dies.
Every finished run is appended to ``results.csv`` at once (flushed and synced), so a sweep that
is killed and started again with the same output directory skips the runs already done and
loses nothing; the final table is sorted by run index and equals an uninterrupted sweep's.
``sweep.json`` fingerprints the sweep, so a directory is resumed only by the same sweep (see
:mod:`cluster.sweep_results`).

>>> rows = sweep(make_model, config, grid(k=[1.0, 2.0], tau=[0.1, 0.2]),
...              {"y_end": final("plant.out")}, out_dir="study")
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cluster.sweep_results import ResultsTable, fingerprint, results_dir
from cosim.errors import ModelError

__all__ = ["KINDS", "Reducer", "Run", "final", "grid", "integral_abs_error", "lhs", "listed", "maximum", "mean",
           "minimum", "overshoot", "random_uniform", "rms", "settling_time", "sobol", "sweep"]


# -- designs ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Run:
    """One run of a sweep: its index, a stable id, and its parameter values."""

    index: int
    run_id: str
    params: dict


def _runs(points: Sequence[Mapping]) -> list[Run]:
    runs = []
    for i, p in enumerate(points):
        params = {k: (float(v) if isinstance(v, (int, float, np.floating, np.integer))
                      and not isinstance(v, bool) else v) for k, v in p.items()}
        digest = hashlib.sha1(json.dumps(params, sort_keys=True, default=str).encode())
        runs.append(Run(i, f"{i:06d}-{digest.hexdigest()[:8]}", params))
    return runs


def grid(**axes: Sequence) -> list[dict]:
    """The full grid (Cartesian product) of the given values, last axis fastest."""
    names = list(axes)
    points = [{}]
    for name in names:
        points = [{**p, name: v} for p in points for v in axes[name]]
    return points


def listed(source) -> list[dict]:
    """Explicit points: a list of dicts, or a CSV file (header = names) or a YAML list."""
    if isinstance(source, (list, tuple)):
        return [dict(p) for p in source]
    path = Path(source)
    if path.suffix.lower() == ".csv":
        with path.open(newline="") as fh:
            return [{k: float(v) for k, v in row.items()} for row in csv.DictReader(fh)]
    import yaml
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, list) or not all(isinstance(p, dict) for p in data):
        raise ModelError(f"{path}: a design file is a list of parameter mappings")
    return data


def _scaled(unit: np.ndarray, bounds: Mapping[str, tuple[float, float]]) -> list[dict]:
    names = list(bounds)
    lo = np.array([bounds[n][0] for n in names], dtype=float)
    hi = np.array([bounds[n][1] for n in names], dtype=float)
    pts = lo + unit * (hi - lo)
    return [dict(zip(names, map(float, row))) for row in pts]


def random_uniform(bounds: Mapping[str, tuple[float, float]], n: int, seed: int = 0):
    """``n`` points uniform in the box ``bounds`` (name -> (low, high)), reproducible."""
    return _scaled(np.random.default_rng(seed).random((n, len(bounds))), bounds)


def lhs(bounds: Mapping[str, tuple[float, float]], n: int, seed: int = 0):
    """``n`` Latin-hypercube points in the box (``scipy.stats.qmc``), reproducible."""
    from scipy.stats import qmc
    return _scaled(qmc.LatinHypercube(d=len(bounds), seed=seed).random(n), bounds)


def sobol(bounds: Mapping[str, tuple[float, float]], n: int, seed: int = 0):
    """``n`` scrambled Sobol points in the box (``scipy.stats.qmc``; n a power of 2 is best)."""
    from scipy.stats import qmc
    return _scaled(qmc.Sobol(d=len(bounds), seed=seed).random(n), bounds)


# -- reducers: logs -> one number -----------------------------------------------------------

@dataclass(frozen=True)
class Reducer:
    """A named summary of one logged signal (picklable, so process pools can ship it).

    ``kind`` is one of :data:`KINDS`; ``key`` the signal (first component is used); ``a`` and
    ``b`` the kind's arguments (target/reference, band).
    """

    kind: str
    key: str
    a: float = 0.0
    b: float = 0.0

    def __call__(self, logs) -> float:
        t = logs.time_of(self.key)
        y = logs[self.key].reshape(len(t), -1)[:, 0]
        return float(KINDS[self.kind](t, y, self.a, self.b))


def _settling(t, y, target, band):
    outside = np.nonzero(np.abs(y - target) > band * abs(target))[0]
    if len(outside) == 0:
        return t[0]
    return t[outside[-1] + 1] if outside[-1] + 1 < len(t) else math.nan


#: Reducer kinds: (time, values, a, b) -> number.
KINDS = {
    "final": lambda t, y, a, b: y[-1],
    "max": lambda t, y, a, b: np.max(y),
    "min": lambda t, y, a, b: np.min(y),
    "mean": lambda t, y, a, b: np.mean(y),
    "rms": lambda t, y, a, b: np.sqrt(np.mean(y ** 2)),
    "overshoot": lambda t, y, a, b: max(0.0, (np.max(y) - a) / abs(a)),
    "settling_time": _settling,
    "iae": lambda t, y, a, b: np.trapezoid(np.abs(y - a), t),
}


def final(key: str) -> Reducer:
    """The last logged value of ``key``."""
    return Reducer("final", key)


def maximum(key: str) -> Reducer:
    return Reducer("max", key)


def minimum(key: str) -> Reducer:
    return Reducer("min", key)


def mean(key: str) -> Reducer:
    return Reducer("mean", key)


def rms(key: str) -> Reducer:
    return Reducer("rms", key)


def overshoot(key: str, target: float) -> Reducer:
    """Peak above ``target`` relative to it (0 when it never exceeds it)."""
    return Reducer("overshoot", key, float(target))


def settling_time(key: str, target: float, band: float = 0.02) -> Reducer:
    """First time after which ``key`` stays within ``band`` (relative) of ``target``."""
    return Reducer("settling_time", key, float(target), float(band))


def integral_abs_error(key: str, reference: float) -> Reducer:
    """``∫ |key - reference| dt`` by the trapezoidal rule over its own time vector."""
    return Reducer("iae", key, float(reference))


# -- one run ------------------------------------------------------------------------------

def _execute(model_source, config, run: Run, reducers: dict, logs_dir: str | None) -> dict:
    """Build, run and reduce one run; failures are results, not exceptions."""
    from cosim import Model, simulation
    start = time.perf_counter()
    row = {"run_id": run.run_id, "index": run.index, **run.params, "status": "ok",
           "error": "", "wall_time": 0.0}
    try:
        model = Model.from_yaml(model_source) if isinstance(model_source, (str, Path)) \
            else model_source()
        unknown = sorted(set(run.params) - set(model.parameters))
        if unknown:
            raise ModelError(f"{', '.join(unknown)} not a parameter of model "
                             f"{model.name!r} (parameters: {', '.join(model.parameters)})")
        model.parameters.update(run.params)
        cfg = config if config is not None else model.simulation
        sim = simulation(model, cfg)
        try:
            logs = sim.run()
        finally:
            if hasattr(sim, "close"):
                sim.close()
        for name, reduce in reducers.items():
            row[name] = float(reduce(logs))
        if logs_dir is not None:
            logs.to_npz(Path(logs_dir) / f"{run.run_id}.npz")
    except Exception as err:  # noqa: BLE001 - a failed run is recorded, the sweep goes on
        row.update(status="failed", error=f"run {run.run_id} {run.params}: "
                                          f"{type(err).__name__}: {err}")
        for name in reducers:
            row[name] = math.nan
    row["wall_time"] = time.perf_counter() - start
    return row


# -- the results file -----------------------------------------------------------------------

def _parse(row: dict) -> dict:
    out = {}
    for k, v in row.items():
        if k in ("run_id", "status", "error"):
            out[k] = v
        elif k in ("index", "attempts"):
            out[k] = int(v)
        else:
            try:
                out[k] = float(v)
            except (TypeError, ValueError):
                out[k] = v
    return out


# -- the sweep ------------------------------------------------------------------------------

def sweep(model, config, design, reducers: Mapping[str, Callable] | None = None, *,
          out_dir=None, backend: str = "ray", max_in_flight: int | None = None,
          retries: int = 2, address: str | None = None, save_logs: bool = False,
          progress: bool | None = None, if_changed: str = "refuse") -> list[dict]:
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
        :func:`sobol`).
    reducers : dict of str to callable
        Metric name -> :class:`Reducer` (:func:`final`, :func:`overshoot`, ...) or any
        ``f(logs) -> float`` (a module-level function for the process pool).
    out_dir : path, optional
        Where ``results.csv`` (and ``results.parquet`` when pyarrow is installed, and
        ``logs/<run_id>.npz`` with ``save_logs``) go; running again resumes.
    backend : str
        ``"ray"`` (tasks on the embedded local Ray or ``address``), ``"process"`` (a process
        pool) or ``"serial"``.
    max_in_flight : int, optional
        Most runs at once (default: one per CPU of the pool or the Ray cluster). By
        default a worker has its next run queued before the current one finishes (twice as
        many submitted as can run), which keeps 2 CPUs 1.85x faster than serial instead of
        1.6x here; an explicit bound is kept strictly.
    retries : int
        Times a run is retried when its worker process dies (Ray).
    save_logs : bool
        Keep each run's full logs.
    progress : bool, optional
        Show a progress bar (default: on a terminal only).
    if_changed : str
        ``out_dir`` holds the results of a sweep with another model, configuration, design
        or reducers (``sweep.json``): ``"refuse"`` (default, naming what changed) or
        ``"new"`` (write to the sibling directory ``<out_dir>-<digest>`` instead).

    Returns
    -------
    list of dict
        One row per run, sorted by index: ``run_id``, ``index``, the parameters, ``status``
        (``ok`` / ``failed``), ``error``, ``wall_time`` (s), and one column per reducer.
    """
    reducers = dict(reducers or {})
    runs = _runs(design)
    if not runs:
        raise ModelError("the design has no points")
    names = list(dict.fromkeys(k for r in runs for k in r.params))
    columns = ["run_id", "index", *names, "status", "error", "wall_time", *reducers]
    out = Path(out_dir) if out_dir is not None else None
    logs_dir = None
    if out is not None:
        out = results_dir(out, fingerprint(model, config, [r.run_id for r in runs], reducers),
                          if_changed)
        if save_logs:
            logs_dir = out / "logs"
            logs_dir.mkdir(exist_ok=True)
        table = ResultsTable(out / "results.csv", columns)
    else:
        table = None
    done = set(table.done) if table is not None else set()
    todo = [r for r in runs if r.run_id not in done]
    results: dict[str, dict] = {}
    if backend == "ray" and todo:
        # Ray first: its start-up notices are printed before the bar is drawn.
        from cluster.ray_backend import ensure_ray
        ensure_ray(address)
    bar = _bar(len(runs), len(runs) - len(todo), progress)

    def finished(row):
        results[row["run_id"]] = row
        if table is not None:
            table.add(row)
        if bar is not None:
            bar.update(1)

    logs_arg = str(logs_dir) if logs_dir is not None else None
    try:
        if backend == "serial":
            for r in todo:
                finished(_execute(model, config, r, reducers, logs_arg))
        elif backend == "process":
            _run_pool(model, config, todo, reducers, logs_arg, max_in_flight, finished)
        elif backend == "ray":
            _run_ray(model, config, todo, reducers, logs_arg, max_in_flight, retries, address,
                     finished)
        else:
            raise ModelError(f"unknown sweep backend {backend!r}; use ray, process or serial")
    finally:
        if bar is not None:
            bar.close()
        if table is not None:
            table.close()
    if table is not None:
        rows = [_parse(row) for row in table.done.values()]
    else:
        rows = list(results.values())
    rows.sort(key=lambda row: row["index"])
    if out is not None:
        _parquet(rows, out / "results.parquet")
    return rows


def _bar(total, initial, progress):
    show = sys.stderr.isatty() if progress is None else progress
    if not show:
        return None
    from tqdm import tqdm
    return tqdm(total=total, initial=initial, unit="run", desc="sweep")


def _run_pool(model, config, todo, reducers, logs_dir, max_in_flight, finished) -> None:
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    workers = max_in_flight or os.cpu_count() or 1
    depth = 2 * workers      # the pool runs `workers` at once; the rest wait queued
    with ProcessPoolExecutor(max_workers=workers) as pool:
        pending = set()
        queue = list(todo)
        while queue or pending:
            while queue and len(pending) < depth:
                pending.add(pool.submit(_execute, model, config, queue.pop(0), reducers,
                                        logs_dir))
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in done:
                finished(f.result())


def _run_ray(model, config, todo, reducers, logs_dir, max_in_flight, retries, address,
             finished) -> None:
    import ray

    from cluster.ray_backend import ensure_ray
    ensure_ray(address)
    task = ray.remote(num_cpus=1, max_retries=retries)(_execute)
    model_ref = ray.put(model) if callable(model) else model
    # Ray runs one task per CPU; by default twice that many are submitted so that no worker
    # waits for the driver between runs. An explicit bound is the number submitted.
    limit = max_in_flight or 2 * max(1, int(ray.cluster_resources().get("CPU", 1)))
    queue = list(todo)
    pending = {}
    while queue or pending:
        while queue and len(pending) < limit:
            r = queue.pop(0)
            pending[task.remote(model_ref, config, r, reducers, logs_dir)] = r
        ready, _ = ray.wait(list(pending), num_returns=1)
        for ref in ready:
            r = pending.pop(ref)
            try:
                finished(ray.get(ref))
            except ray.exceptions.RayError as err:
                finished({"run_id": r.run_id, "index": r.index, **r.params,
                          "status": "failed", "wall_time": math.nan,
                          "error": f"run {r.run_id} {r.params}: worker lost after "
                                   f"{retries} retries: {type(err).__name__}",
                          **{k: math.nan for k in reducers}})


def _parquet(rows: list[dict], path: Path) -> None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return
    pq.write_table(pa.Table.from_pylist(rows), path)



# -- command line -----------------------------------------------------------------------------

def main(argv=None) -> int:
    """``cosim sweep MODEL --out DIR [design] [--metric NAME=KIND:SIGNAL[:A[:B]] ...]``."""
    import argparse
    ap = argparse.ArgumentParser(prog="cosim sweep", description="Run a parameter study of a "
                                 "model file; results go to DIR/results.csv (resumable).")
    ap.add_argument("model", help="model file (.yaml) with a simulation: section")
    ap.add_argument("--out", required=True, metavar="DIR")
    ap.add_argument("--grid", action="append", default=[], metavar="NAME=V1,V2,...")
    ap.add_argument("--design", metavar="FILE", help="explicit points (CSV or YAML list)")
    ap.add_argument("--sample", nargs=2, metavar=("KIND", "N"),
                    help="random, lhs or sobol, with N points in the --range box")
    ap.add_argument("--range", action="append", default=[], metavar="NAME=LOW:HIGH")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--metric", action="append", default=[],
                    metavar="NAME=KIND:SIGNAL[:A[:B]]",
                    help=f"a summary per run; KIND one of {', '.join(KINDS)}")
    ap.add_argument("--backend", default="ray", choices=("ray", "process", "serial"))
    ap.add_argument("--workers", type=int, default=None, help="runs at once")
    ap.add_argument("--address", help="Ray cluster to join")
    ap.add_argument("--save-logs", action="store_true", help="keep each run's logs (NPZ)")
    ap.add_argument("--if-changed", choices=("refuse", "new"), default="refuse",
                    help="DIR holds another sweep's results: refuse (default) or write to "
                         "a new DIR-<digest>")
    args = ap.parse_args(argv)
    try:
        if args.design:
            points = listed(args.design)
        elif args.sample:
            kind, n = args.sample
            bounds = {}
            for r in args.range:
                name, _, span = r.partition("=")
                lo, _, hi = span.partition(":")
                bounds[name] = (float(lo), float(hi))
            makers = {"random": random_uniform, "lhs": lhs, "sobol": sobol}
            if kind not in makers or not bounds:
                raise ValueError("--sample needs random|lhs|sobol, N and at least one --range")
            points = makers[kind](bounds, int(n), args.seed)
        elif args.grid:
            axes = {}
            for g in args.grid:
                name, _, values = g.partition("=")
                axes[name] = [float(v) for v in values.split(",")]
            points = grid(**axes)
        else:
            raise ValueError("give a design: --grid, --design or --sample with --range")
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
                     save_logs=args.save_logs, if_changed=args.if_changed)
    except (ValueError, ModelError, OSError) as err:
        print(f"cosim sweep: error: {err}", file=sys.stderr)
        return 2
    failed = sum(r["status"] != "ok" for r in rows)
    print(f"{len(rows)} runs ({failed} failed); results in {Path(args.out) / 'results.csv'}")
    return 0 if not failed else 1
