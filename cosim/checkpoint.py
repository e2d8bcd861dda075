"""Checkpoints of a simulator: ``path.json`` (structure, time, versions) + ``path.npz`` (numbers).

Everything the continuation depends on is saved: every block's discrete ``state`` and held
``outputs``, the continuous state vector, the solver's controller and caches, the clock, the
event detector's last values. Loading into a simulator of the same model and continuing is bit
for bit the same as never stopping. Scalars travel in the JSON (Python's float repr
round-trips exactly); arrays in the NPZ. Blocks are matched by name and type, in plan order.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from cosim.errors import ModelError

__all__ = ["load", "save", "flatten", "unflatten"]

FORMAT = 1


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


def flatten(tree: dict, prefix: str, arrays: dict, scalars: dict) -> None:
    """Split a nested dict into ``arrays`` (ndarrays) and ``scalars`` (JSON values), keyed by
    ``prefix/key/...`` (keys escaped, so they may contain '/')."""
    for key, v in tree.items():
        name = f"{prefix}/{_esc(key)}"
        if isinstance(v, dict):
            scalars[name] = {"__dict__": True}
            flatten(v, name, arrays, scalars)
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


def unflatten(prefix: str, arrays, scalars: dict) -> dict:
    """Inverse of :func:`flatten` for the subtree ``prefix``."""
    out: dict = {}
    plen = len(prefix) + 1
    for name, v in scalars.items():
        if name.startswith(prefix + "/") and "/" not in name[plen:]:
            key = _unesc(name[plen:])
            if isinstance(v, dict) and v.get("__dict__"):
                out[key] = unflatten(name, arrays, scalars)
            elif isinstance(v, dict) and "__list__" in v:
                out[key] = v["__list__"]
            else:
                out[key] = v
    for name in arrays:
        if name.startswith(prefix + "/") and "/" not in name[plen:]:
            out[_unesc(name[plen:])] = np.array(arrays[name])
    return out


def _paths(path) -> tuple[Path, Path]:
    p = Path(path)
    base = p.with_suffix("") if p.suffix in (".json", ".npz") else p
    return base.with_name(base.name + ".json"), base.with_name(base.name + ".npz")


def _collect(sim, prefix: str, arrays: dict, scalars: dict) -> dict:
    """Gather ``sim``'s numbers under ``prefix`` (recursing into atomic subsystems)."""
    if sim._fast is not None:
        sim._fast.flush_logs()
    arrays[f"{prefix}X"] = sim._X.copy()
    for b, bpath in zip(sim.plan.blocks, sim.plan.names):
        flatten({"state": dict(b.state), "outputs": dict(b.outputs)},
                f"{prefix}b/{_esc(bpath)}", arrays, scalars)
    if sim.solver is not None:
        flatten(sim.solver.get_state(), f"{prefix}solver", arrays, scalars)
    return {
        "blocks": [[n, type(b).__name__] for b, n in zip(sim.plan.blocks, sim.plan.names)],
        "dt": sim.config.dt,
        "t0": sim.config.t0,
        "k": sim.k,
        "t": sim.t,
        "t_cont": sim._t_cont,
        "last_logged": sim._last_logged,
        "solver": sim.config.solver if sim.solver is not None else None,
        "events": [ev.name for ev in sim.events],
        "g_prev": sim._g_prev,
        "event_log": [list(e) for e in sim.event_log],
        "stats": dict(sim.stats),
        "log_lengths": {key: samples.length() for key, (samples, _) in
                        sim._log_lists.items()},
        "task_ticks": [len(ticks) for ticks in sim._task_ticks],
        "atomic": {path: _collect(blk.inner, f"{prefix}a/{_esc(path)}/", arrays, scalars)
                   for path, blk in sim.atomics},
    }


def save(sim, path) -> None:
    """Write the checkpoint of ``sim`` to ``path.json`` + ``path.npz``."""
    import cosim

    if not sim._initialized:
        raise ModelError("save_checkpoint before the simulator was initialized")
    arrays: dict[str, np.ndarray] = {}
    scalars: dict = {}
    meta = {"format": FORMAT, "cosim": cosim.__version__, "numpy": np.__version__,
            "model": sim.plan.name}
    meta.update(_collect(sim, "", arrays, scalars))
    meta["scalars"] = scalars
    jpath, npath = _paths(path)
    jpath.write_text(json.dumps(meta, indent=1))
    np.savez(npath, **arrays)


def _mismatch(sim, meta) -> list[str]:
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
        if path in meta["atomic"]:
            problems += [f"{path}: {p}" for p in _mismatch(blk.inner, meta["atomic"][path])]
    return problems


def _restore(sim, prefix: str, meta: dict, arrays, scalars, rollback: bool = False) -> None:
    """Put ``sim`` back to ``meta``/``arrays``; ``rollback`` keeps the logs, cut back to the
    snapshot (in-memory rollback), otherwise logs restart at the checkpoint (a new run)."""
    if not sim._initialized:
        sim.initialize()
    X = arrays[f"{prefix}X"]
    if X.shape != sim._X.shape:
        raise ModelError(f"checkpoint: continuous state has {X.size} entries, the model "
                         f"{sim._X.size}")
    sim._X[:] = X
    for b, bpath in zip(sim.plan.blocks, sim.plan.names):
        tree = unflatten(f"{prefix}b/{_esc(bpath)}", arrays, scalars)
        b.state.clear()
        b.state.update(tree.get("state", {}))
        b.next_state.clear()
        b.outputs.clear()
        b.outputs.update(tree.get("outputs", {}))
    fan = sim._fanout
    for i in range(len(sim.plan.blocks)):
        for dins, dport, souts, sport in fan[i]:
            dins[dport] = souts[sport]
    if sim.solver is not None:
        sim.solver.set_state(unflatten(f"{prefix}solver", arrays, scalars))
    sim.k = meta["k"]
    sim._t_cont = meta["t_cont"]
    sim._last_logged = meta["last_logged"]
    sim._g_prev = list(meta["g_prev"])
    sim.event_log[:] = [tuple(e) for e in meta["event_log"]]
    sim.stats.update(meta["stats"])
    for path, blk in sim.atomics:
        _restore(blk.inner, f"{prefix}a/{_esc(path)}/", meta["atomic"][path], arrays,
                 scalars, rollback)
    if rollback:
        if sim._fast is not None:
            sim._fast.flush_logs()
        for key, (samples, _) in sim._log_lists.items():
            samples.truncate(meta["log_lengths"][key])
        for ticks, n in zip(sim._task_ticks, meta["task_ticks"]):
            del ticks[n:]
    else:
        sim._log_k0 = meta["last_logged"] + 1
        sim._start_logs()
        sim._schedules.clear()
    sim._fast = sim._make_fast() if sim.config.fast else None


def snapshot(sim) -> dict:
    """The full state of an initialized simulator as one nested dict (for UnitState.data).

    Holds plain values and arrays only (it travels over the wire for remote units).
    """
    arrays: dict = {}
    scalars: dict = {}
    meta = _collect(sim, "", arrays, scalars)
    return {"meta": meta, "arrays": arrays, "scalars": scalars}


def restore_snapshot(sim, data: dict) -> None:
    """Roll ``sim`` back to a :func:`snapshot`; logs after it are discarded."""
    problems = _mismatch(sim, data["meta"])
    if problems:
        raise ModelError("state does not match this unit: " + "; ".join(problems))
    _restore(sim, "", data["meta"], data["arrays"], data["scalars"], rollback=True)


def load(sim, path) -> None:
    """Restore ``sim`` (same model) from a checkpoint written by :func:`save`."""
    jpath, npath = _paths(path)
    try:
        meta = json.loads(jpath.read_text())
    except (OSError, ValueError) as err:
        raise ModelError(f"cannot read checkpoint {jpath}: {err}") from err
    if meta.get("format") != FORMAT:
        raise ModelError(f"checkpoint {jpath} has format {meta.get('format')!r}; this cosim "
                         f"reads format {FORMAT}")
    problems = _mismatch(sim, meta)
    if problems:
        raise ModelError(f"checkpoint {jpath} does not match model {sim.plan.name!r}: "
                         + "; ".join(problems))
    with np.load(npath, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    if not sim._initialized:
        sim.initialize()
    _restore(sim, "", meta, arrays, meta["scalars"])
