"""Checkpoints and snapshots of a simulator.

A *snapshot* is the full state of a simulator as one nested dict of plain values and arrays:
every block's discrete ``state`` and held ``outputs``, the continuous state vector, the
solver's controller and caches, the clock, the event detector, the log positions, and the
same for every atomic subsystem inside. Restoring it and continuing is bit for bit the same as
never stopping. Snapshots are what units return for rollback (``UnitState.data``; they travel
over the wire as they are). A *checkpoint* writes a snapshot to ``path.json`` (structure,
scalars, versions — Python's float repr round-trips exactly) and ``path.npz`` (arrays).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from cosim.errors import ModelError

__all__ = ["flatten", "load", "paths", "restore_snapshot", "save", "snapshot", "unflatten"]

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


def flatten(tree: dict, prefix: str, arrays: dict, scalars: dict) -> None:
    """Split a nested dict into ``arrays`` (ndarrays) and ``scalars`` (JSON values), keyed by
    ``prefix/key/...`` (keys escaped, so they may contain '/')."""
    scalars[prefix] = {"__dict__": True}
    for key, v in tree.items():
        name = f"{prefix}/{_esc(key)}"
        if isinstance(v, dict):
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
    """Inverse of :func:`flatten`: the nested dict stored under ``prefix``."""
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
    return sim.snapshot()


def restore_snapshot(sim, tree: dict) -> None:
    """Roll ``sim`` back to a :func:`snapshot`; logs after it are discarded."""
    problems = sim.mismatch(tree)
    if problems:
        raise ModelError("state does not match this simulator: " + "; ".join(problems))
    sim.restore(tree, rollback=True)


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
    flatten(sim.snapshot(), "sim", arrays, scalars)
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
    tree = unflatten("sim", arrays, meta["scalars"])
    problems = sim.mismatch(tree)
    if problems:
        raise ModelError(f"checkpoint {jpath} does not match model {sim.plan.name!r}: "
                         + "; ".join(problems))
    sim.restore(tree, rollback=False)
