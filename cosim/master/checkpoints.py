"""Central checkpoints of a co-simulation: every unit's state and the master's own as one
nested dict of plain values and arrays, and its file (``path.npz``: one file written
atomically, with the model's identity and the logs so far; see :mod:`cosim.run.checkpoint`)."""

from __future__ import annotations

import numpy as np

from cosim.errors import ModelError
from cosim.master import protocol as P
from cosim.run.checkpoint import (FORMAT, check_identity, checkpoint_file, inexact_solvers,
                                  join_tree, read_file, split_tree, warn_inexact, write_file)

__all__ = ["pack", "ports", "read", "unit_states", "write"]


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


def write(capture: dict, path, units: list[str], logs: dict | None = None,
          identity: dict | None = None) -> None:
    """Write ``capture`` of the co-simulation of ``units`` to the one file ``path.npz``,
    with the central ``logs`` up to it (``{key: (t, values)}``, :meth:`CentralLogs.snapshot
    <cosim.master.central_logs.CentralLogs.snapshot>``), so a run resumed from the file has
    its logs from t0, and the model's ``identity`` (:func:`cosim.run.checkpoint.identity`).
    The file is written beside and renamed into place: a checkpoint on disk is always whole.

    Raises
    ------
    ModelError
        It cannot be written (the previous checkpoint there is unchanged).
    """
    arrays, scalars = {}, {}
    target = checkpoint_file(path)
    # Units that are simulators (not FMUs) say whether their solvers resume exactly.
    warn_inexact([where for u, st in capture["units"].items()
                  if isinstance(st["data"], dict) and "atomic" in st["data"]
                  for where in inexact_solvers(st["data"], u)], target)
    split_tree(capture, "cosim", arrays, scalars)
    keys = sorted(logs or {})
    for i, key in enumerate(keys):
        arrays[f"log_t{i}"], arrays[f"log_v{i}"] = logs[key]
    meta = {"format": FORMAT, "kind": "co-simulation", "units": units, "scalars": scalars,
            "logs": keys if logs is not None else None, "identity": identity}
    write_file(target, meta, arrays)


def read(path, units: list[str], identity: dict | None = None) -> tuple[dict, dict | None]:
    """The capture :func:`write` wrote to ``path``, and the logs up to it (None for a file
    written without them).

    Raises
    ------
    ModelError
        The file cannot be read or is damaged, or holds another co-simulation's checkpoint
        (other units; with ``identity``, another structure or other parameter values).
    """
    target = checkpoint_file(path)
    meta, arrays = read_file(target, "co-simulation")
    if meta.get("units") != units:
        raise ModelError(f"checkpoint {target} is not of this co-simulation (units "
                         f"{meta.get('units')} vs {units})")
    if identity is not None:
        check_identity(meta.get("identity"), identity, target)
    try:
        logs = None
        if meta.get("logs") is not None:
            logs = {key: (arrays.pop(f"log_t{i}"), arrays.pop(f"log_v{i}"))
                    for i, key in enumerate(meta["logs"])}
        return join_tree("cosim", arrays, meta["scalars"]), logs
    except (KeyError, TypeError, ValueError) as err:
        raise ModelError(f"checkpoint {target} is damaged ({type(err).__name__}: {err})") \
            from None
