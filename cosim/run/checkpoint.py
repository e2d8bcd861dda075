"""Checkpoints and snapshots of a simulator.

A *snapshot* is the full state of a simulator as one nested dict of plain values and arrays:
every block's discrete ``state`` and held ``outputs``, the continuous state vector, the
solver's controller and caches, the clock, the event detector, the log positions, and the
same for every atomic subsystem inside. Restoring it and continuing is bit for bit the same as
never stopping, with every solver of :data:`cosim.solvers.SOLVERS` (the scipy ones included:
their step history is part of the solver's state). A solver of your own that declares
``checkpoint_exact = False`` is named in a warning when a checkpoint is saved (the resumed run
continues, but not bit for bit). Snapshots are what units return for rollback (``UnitState.data``; they travel
over the wire as they are). A *checkpoint* writes a snapshot to ``path.json`` (structure,
scalars, versions — Python's float repr round-trips exactly) and ``path.npz`` (arrays).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np

from cosim.errors import ModelError

__all__ = ["inexact_solvers", "join_tree", "load", "mismatch", "paths", "restore_snapshot",
           "save", "snapshot", "split_tree", "warn_inexact"]

FORMAT = 2


# -- nested dicts <-> (arrays, JSON scalars) -------------------------------------------------

def _esc(key: str) -> str:
    """A key as one path segment ('/' and '%' escaped)."""
    return str(key).replace("%", "%25").replace("/", "%2F")


def _unesc(seg: str) -> str:
    return seg.replace("%2F", "/").replace("%25", "%")


def _jsonable(v) -> bool:
    if v is None or isinstance(v, (bool, int, float, str)):
        return True
    if isinstance(v, (list, tuple)):
        return all(_jsonable(e) for e in v)
    return False


def split_tree(tree: dict, prefix: str, arrays: dict, scalars: dict) -> None:
    """Split a nested dict into ``arrays`` (ndarrays) and ``scalars`` (JSON values), keyed by
    ``prefix/key/...`` (keys escaped, so they may contain '/')."""
    scalars[prefix] = {"__dict__": True}
    for key, v in tree.items():
        name = f"{prefix}/{_esc(key)}"
        if isinstance(v, dict):
            split_tree(v, name, arrays, scalars)
        elif isinstance(v, np.ndarray):
            arrays[name] = v
        elif isinstance(v, (np.floating, np.integer, np.bool_)):
            scalars[name] = v.item()
        elif v is None or isinstance(v, (bool, int, float, str)):
            scalars[name] = v
        elif isinstance(v, (list, tuple)) and _jsonable(v):
            scalars[name] = {"__list__": list(v)}
        else:
            raise ModelError(f"checkpoint: cannot save {name} of type {type(v).__name__}; "
                             "block state must be float64 arrays or plain numbers")


def join_tree(prefix: str, arrays, scalars: dict) -> dict:
    """Inverse of :func:`split_tree`: the nested dict stored under ``prefix``."""
    root: dict = {}
    plen = len(prefix) + 1

    def put(name, value):
        node = root
        segs = [_unesc(s) for s in name[plen:].split("/")]
        for seg in segs[:-1]:
            node = node.setdefault(seg, {})
        if isinstance(value, dict):
            node.setdefault(segs[-1], {})      # an empty dict marker, never a clobber
        else:
            node[segs[-1]] = value

    for name, v in scalars.items():
        if name.startswith(prefix + "/"):
            if isinstance(v, dict) and v.get("__dict__"):
                put(name, {})
            else:
                put(name, v["__list__"] if isinstance(v, dict) and "__list__" in v else v)
    for name, a in arrays.items():
        if name.startswith(prefix + "/"):
            put(name, np.array(a))
    return root


# -- snapshots -------------------------------------------------------------------------------

def snapshot(sim) -> dict:
    """The full state of an initialized simulator as one nested dict (see module doc)."""
    if not sim.initialized:
        raise ModelError("snapshot of a simulator that was not initialized")
    pos = sim.store.position()
    solver = sim.solver.get_state() if sim.solver is not None else None
    values = sim.state.snapshot()
    monitor = sim.monitor
    plan = sim.plan
    return {
        "meta": {
            "blocks": [[n, type(b).__name__] for b, n in zip(plan.blocks, plan.names)],
            "dt": sim.config.dt, "t0": sim.config.t0, "k": values["k"], "t": sim.t,
            "t_cont": values["t_stop"], "last_logged": pos["last_logged"],
            "events": [ev.name for ev in sim.events],
            "g_prev": list(monitor.g_prev) if monitor is not None else [],
            # The run's own (an atomic subsystem's travel in its own snapshot).
            "event_log": [list(e) for e in (monitor.log if monitor is not None else [])],
            "stats": values["stats"],
            "log_lengths": pos["log_lengths"], "task_ticks": pos["task_ticks"],
            "solver_exact": sim.solver is None or bool(type(sim.solver).checkpoint_exact),
        },
        "X": values["X"],
        "blocks": values["blocks"],
        "solver": {} if solver is None else solver,
        "atomic": {path: snapshot(blk.inner) for path, blk in sim.atomics},
    }


def inexact_solvers(tree: dict, path: str = "") -> list[str]:
    """``"path: solver"`` of every plan in snapshot ``tree`` (atomic subsystems included)
    whose solver does not continue bit for bit from a restored state."""
    found = [] if tree["meta"].get("solver_exact", True) else \
        [f"{path or 'the model'}: {tree['solver']['solver']}"]
    for sub, inner in tree["atomic"].items():
        found += inexact_solvers(inner, f"{path}/{sub}" if path else sub)
    return found


def warn_inexact(found: list[str], where) -> None:
    """Warn that the checkpoint ``where`` resumes inexactly because of solvers ``found``."""
    if found:
        warnings.warn(f"checkpoint {where}: solver(s) declaring checkpoint_exact=False "
                      f"({'; '.join(found)}) cannot export their step history, so a run "
                      f"resumed from it continues to the solvers' tolerances, not bit for bit; "
                      f"use a solver of cosim.solvers.SOLVERS for an exact resume",
                      RuntimeWarning, stacklevel=3)


def mismatch(sim, tree: dict) -> list[str]:
    """Why snapshot ``tree`` does not fit simulator ``sim`` (empty if it does)."""
    meta = tree["meta"]
    mine = [[n, type(b).__name__] for b, n in zip(sim.plan.blocks, sim.plan.names)]
    problems = []
    if meta["blocks"] != mine:
        have = {tuple(x) for x in meta["blocks"]}
        want = {tuple(x) for x in mine}
        problems.append(f"blocks differ: only in checkpoint {sorted(have - want)}, only in "
                        f"model {sorted(want - have)}" if have != want else
                        "blocks are in a different order")
    if meta["dt"] != sim.config.dt or meta["t0"] != sim.config.t0:
        problems.append(f"dt/t0 differ: checkpoint {meta['dt']}/{meta['t0']}, config "
                        f"{sim.config.dt}/{sim.config.t0}")
    if meta["events"] != [ev.name for ev in sim.events]:
        problems.append(f"events differ: {meta['events']} vs {[ev.name for ev in sim.events]}")
    for path, blk in sim.atomics:
        if path in tree["atomic"]:
            problems += [f"{path}: {p}" for p in mismatch(blk.inner, tree["atomic"][path])]
    return problems


def _apply(sim, tree: dict, rollback: bool) -> None:
    """Put ``sim`` in the state of ``tree``; ``rollback`` keeps the logs, cut back to the
    snapshot (in-memory rollback), otherwise logs restart there (a run resumed from a file)."""
    if not sim.initialized:
        sim.initialize()
    meta = tree["meta"]
    X = np.asarray(tree["X"], dtype=np.float64)
    if X.shape != sim.state.X.shape:
        raise ModelError(f"checkpoint: continuous state has {X.size} entries, the model "
                         f"{sim.state.X.size}")
    sim.state.restore({"X": X, "blocks": tree["blocks"], "k": meta["k"],
                       "t_stop": meta["t_cont"], "stats": meta["stats"]})
    if sim.solver is not None:
        sim.solver.set_state(tree["solver"])
    for path, blk in sim.atomics:
        _apply(blk.inner, tree["atomic"][path], rollback)
    if rollback:
        sim.store.cut({"log_lengths": meta["log_lengths"], "task_ticks": meta["task_ticks"],
                       "last_logged": meta["last_logged"]})
    else:
        sim.restart_logs(meta["last_logged"] + 1, meta["last_logged"])
    if sim.monitor is not None:
        sim.monitor.g_prev[:] = meta["g_prev"]
        sim.monitor.log[:] = [tuple(e) for e in meta["event_log"]]


def restore_snapshot(sim, tree: dict) -> None:
    """Roll ``sim`` back to a :func:`snapshot`; logs after it are discarded."""
    problems = mismatch(sim, tree)
    if problems:
        raise ModelError("state does not match this simulator: " + "; ".join(problems))
    _apply(sim, tree, rollback=True)


# -- checkpoint files ------------------------------------------------------------------------

def paths(path) -> tuple[Path, Path]:
    """The ``(json, npz)`` file paths of checkpoint ``path`` (with or without a suffix)."""
    p = Path(path)
    base = p.with_suffix("") if p.suffix in (".json", ".npz") else p
    return base.with_name(base.name + ".json"), base.with_name(base.name + ".npz")


def save(sim, path) -> None:
    """Write the checkpoint of ``sim`` to ``path.json`` + ``path.npz``."""
    import cosim

    arrays: dict[str, np.ndarray] = {}
    scalars: dict = {}
    tree = snapshot(sim)
    warn_inexact(inexact_solvers(tree), paths(path)[0])
    split_tree(tree, "sim", arrays, scalars)
    meta = {"format": FORMAT, "cosim": cosim.__version__, "numpy": np.__version__,
            "model": sim.plan.name, "scalars": scalars}
    jpath, npath = paths(path)
    jpath.write_text(json.dumps(meta, indent=1))
    np.savez(npath, **arrays)


def load(sim, path) -> None:
    """Restore ``sim`` (same model) from a checkpoint written by :func:`save`."""
    jpath, npath = paths(path)
    try:
        meta = json.loads(jpath.read_text())
    except (OSError, ValueError) as err:
        raise ModelError(f"cannot read checkpoint {jpath}: {err}") from err
    if meta.get("format") != FORMAT:
        raise ModelError(f"checkpoint {jpath} has format {meta.get('format')!r}; this cosim "
                         f"reads format {FORMAT}")
    with np.load(npath, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    tree = join_tree("sim", arrays, meta["scalars"])
    problems = mismatch(sim, tree)
    if problems:
        raise ModelError(f"checkpoint {jpath} does not match model {sim.plan.name!r}: "
                         + "; ".join(problems))
    _apply(sim, tree, rollback=False)
