"""Central checkpoints of a co-simulation: every unit's state and the master's own as one
nested dict of plain values and arrays, and its files (``path.json`` + ``path.npz``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from cosim.errors import ModelError
from cosim.master import protocol as P
from cosim.run.checkpoint import inexact_solvers, join_tree, paths, split_tree, warn_inexact

__all__ = ["pack", "ports", "read", "unit_states", "write"]

#: Checkpoint file format written by :func:`write`.
FORMAT = 2


def pack(units: dict, master: dict, values: dict, points: dict,
         log_lengths: dict) -> dict:
    """A central checkpoint as one nested dict of plain values and arrays (str keys).

    Parameters
    ----------
    units : dict of str to UnitState
        Every unit's state.
    master : dict
        The master's own scalars: ``T`` (s), ``n`` (accepted macro steps), ``nq`` (quanta
        elapsed), ``H`` (the next macro step, s: with an adaptive macro step, the
        controller's proposal, its whole state) and ``stats``.
    values : dict of (str, str) to ndarray
        Every output's value.
    points : dict of (str, str) to list of (float, ndarray)
        ``PortHistory.points``.
    log_lengths : dict of str to int
        ``CentralLogs.lengths()``.
    """
    keys = sorted(points)
    return {
        "units": {u: {"t": st.t, "data": st.data} for u, st in units.items()},
        "master": master,
        "ports": [[u, p] for u, p in keys],
        "values": {str(i): values[k] for i, k in enumerate(keys)},
        "history": {str(i): {"t": [t for t, _ in points[k]],
                             "v": {str(j): v for j, (_, v) in enumerate(points[k])}}
                    for i, k in enumerate(keys)},
        "log_lengths": log_lengths,
    }


def unit_states(cp: dict) -> dict:
    """Every unit's state in checkpoint ``cp``, as ``UnitState``."""
    return {u: P.UnitState(st["t"], st["data"]) for u, st in cp["units"].items()}


def ports(cp: dict) -> tuple[dict, dict]:
    """The ``(values, points)`` that :func:`pack` packed into ``cp``."""
    keys = [tuple(k) for k in cp["ports"]]
    values = {k: np.asarray(cp["values"][str(i)]) for i, k in enumerate(keys)}
    points = {}
    for i, k in enumerate(keys):
        h = cp["history"][str(i)]
        points[k] = [(t, np.asarray(h["v"][str(j)])) for j, t in enumerate(h["t"])]
    return values, points


def write(capture: dict, path, units: list[str], logs: dict | None = None) -> None:
    """Write ``capture`` of the co-simulation of ``units`` to ``path.json`` + ``path.npz``,
    with the central ``logs`` up to it (``{key: (t, values)}``, :meth:`CentralLogs.snapshot
    <cosim.master.central_logs.CentralLogs.snapshot>``), so a run resumed from the files has
    its logs from t0. Both files are written beside and then moved into place, so a
    checkpoint on disk is always whole."""
    arrays, scalars = {}, {}
    # Units that are simulators (not FMUs) say whether their solvers resume exactly.
    warn_inexact([where for u, st in capture["units"].items()
                  if isinstance(st["data"], dict) and "atomic" in st["data"]
                  for where in inexact_solvers(st["data"], u)], paths(path)[0])
    split_tree(capture, "cosim", arrays, scalars)
    keys = sorted(logs or {})
    for i, key in enumerate(keys):
        arrays[f"log_t{i}"], arrays[f"log_v{i}"] = logs[key]
    meta = {"format": FORMAT, "kind": "co-simulation", "units": units, "scalars": scalars,
            "logs": keys}
    jpath, npath = paths(path)
    tmp_j, tmp_n = jpath.with_name(jpath.name + ".tmp"), npath.with_name(npath.name + ".tmp")
    tmp_j.write_text(json.dumps(meta, indent=1))
    with open(tmp_n, "wb") as fh:
        np.savez(fh, **arrays)
    os.replace(tmp_n, npath)          # the arrays first: the JSON names what they hold
    os.replace(tmp_j, jpath)


def read(path, units: list[str]) -> tuple[dict, dict | None]:
    """The capture :func:`write` wrote to ``path``, and the logs up to it (None for a file
    written without them).

    Raises
    ------
    ModelError
        The files cannot be read, or hold another co-simulation's checkpoint (other units).
    """
    jpath, npath = paths(path)
    try:
        meta = json.loads(Path(jpath).read_text())
    except (OSError, ValueError) as err:
        raise ModelError(f"cannot read checkpoint {jpath}: {err}") from err
    if meta.get("kind") != "co-simulation" or meta.get("units") != units:
        raise ModelError(f"checkpoint {jpath} is not of this co-simulation (units "
                         f"{meta.get('units')} vs {units})")
    with np.load(npath, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    logs = None
    if "logs" in meta:
        logs = {key: (arrays.pop(f"log_t{i}"), arrays.pop(f"log_v{i}"))
                for i, key in enumerate(meta["logs"])}
    return join_tree("cosim", arrays, meta["scalars"]), logs
