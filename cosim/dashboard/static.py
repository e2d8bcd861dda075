"""The dashboard's state without a live run: of a finished run (``cosim report``, from the
results file) and of a model that has not run (``cosim view``). Same shape as the live
board's (:mod:`cosim.dashboard.board`), so the same page draws it; long series are reduced
to at most :data:`POINTS` samples (the minimum and maximum of each time slice)."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np

from cosim.dashboard.board import Board
from cosim.dashboard.decimate import jsonable, minmax
from cosim.dashboard.diagram import model_diagram, unit_facts
from cosim.dashboard.monitor import unit_placement
from cosim.master.overview import unit_solver

__all__ = ["POINTS", "dumps", "report_state", "run_facts", "view_state"]

#: Most samples of a series in a static page.
POINTS = 4000
#: Most signals whose samples a static page carries (all are listed).
MAX_SIGNALS = 64


def _binned(t: np.ndarray, columns: dict, how: dict, bins: int = POINTS // 2):
    """``columns`` (name -> values at times ``t``) reduced to ``bins`` time slices by
    ``how[name]`` (``"mean"``, ``"max"``, ``"sum"``); the slices' end times."""
    if len(t) <= bins:
        return t.tolist(), {k: jsonable(np.asarray(v, float)) for k, v in columns.items()}
    edges = np.linspace(t[0], t[-1], bins + 1)
    where = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, bins - 1)
    count = np.bincount(where, minlength=bins)
    used = count > 0
    out = {}
    for k, v in columns.items():
        v = np.asarray(v, float)
        if how[k] == "max":
            red = np.full(bins, -np.inf)
            np.maximum.at(red, where, v)
        else:
            red = np.bincount(where, weights=v, minlength=bins)
            if how[k] == "mean":
                red = red / np.maximum(count, 1)
        out[k] = jsonable(red[used])
    return edges[1:][used].tolist(), out


def run_facts(sim) -> dict:
    """What a results file keeps for the page of co-simulation ``sim``: its diagram, where
    its units ran (with their descriptions' facts) and its algebraic couplings."""
    facts = {"diagram": model_diagram(sim.model), "units": {}, "couplings": []}
    if sim.master.initialized:
        master_facts = unit_facts(sim.master)
        units = unit_placement(sim)
        for u, f in master_facts["units"].items():
            units.setdefault(u, {})["feedthrough"] = f["feedthrough"]
        facts["units"] = units
        facts["couplings"] = master_facts["couplings"]
    return facts


def report_state(record, signals=None, title: str | None = None) -> str:
    """The page's state (JSON text) for a finished run read by
    :func:`cosim.run.report.read_run`; ``signals`` the names or globs to plot first."""
    from cosim.run.plotting import select_signals
    board = Board(title or record.placement.get("model") or "cosim run", "static")
    facts = record.dashboard or {}
    units = facts.get("units") or {
        u: {"backend": d.get("backend"), "kind": "in process" if d.get("backend") == "local"
            else d.get("backend"), "label": d.get("backend"), "dt": d.get("dt"),
            "solver": d.get("solver")}
        for u, d in record.placement.get("units", {}).items()}
    logs = record.logs
    # Signals: every logged one listed; the chosen ones (default: the first few) carried.
    keys, data = [], {}
    chosen = select_signals(logs, signals or [])
    for k in logs:
        v = np.asarray(logs[k], float).reshape(len(logs.time_of(k)), -1)
        names = [k] if v.shape[1] == 1 else [f"{k}[{i}]" for i in range(min(v.shape[1], 16))]
        keys += names
        if k in chosen and len(data) < MAX_SIGNALS:
            t = np.asarray(logs.time_of(k), float)
            for i, name in enumerate(names):
                ts, vs = minmax(t, v[:, i], POINTS)
                data[name] = [ts.tolist(), jsonable(vs)]
    selected = [k for k in data][: (len(data) if signals else 4)]
    steps = record.steps
    delta: dict = {"set": {"title": board.state["title"], "mode": "static",
                           "diagram": facts.get("diagram"), "units": units,
                           "couplings": facts.get("couplings", []), "signal_keys": keys,
                           "selected": selected}, "signals": data}
    t_all = logs.time
    progress = {"t0": float(t_all[0]) if len(t_all) else 0.0,
                "t": float(t_all[-1]) if len(t_all) else 0.0, "status": "finished"}
    progress["t_end"] = progress["t"]
    if steps and len(steps.get("t", ())):
        names = [str(n) for n in steps["status_names"]]
        status = np.array([names[int(c)] for c in steps["status"]])
        progress["steps"] = int((status == "accepted").sum())
        progress["stats"] = {"macro_steps": int(np.isin(status, ["accepted", "continued",
                                                                 "uniterated"]).sum()),
                             "rejected": int((status == "rejected").sum()),
                             "iterations": int(np.sum(steps["iterations"])),
                             "recoveries": int((status == "recovered").sum())}
        t = np.asarray(steps["t"], float)
        order = np.argsort(t, kind="stable")
        ts, cols = _binned(t[order], {"iterations": steps["iterations"][order],
                                      "rejected": (status == "rejected")[order]},
                           {"iterations": "max", "rejected": "sum"})
        delta["steps"] = {"t": ts, "iterations": cols["iterations"],
                          "rejected": cols["rejected"]}
        kinds = {"recovered": "recovery", "stopped": "stop", "rejected": "rejected",
                 "continued": "nonconverged"}
        delta["marks"] = [{"t": float(t[i]), "kind": kinds[status[i]], "text": status[i]}
                          for i in np.flatnonzero(np.isin(status, list(kinds)))[:2000]]
    delta["set"]["progress"] = progress
    if record.timing:
        per_unit = {}
        for unit, arr in record.timing.items():
            points, where = np.unique(arr[:, 0], return_inverse=True)
            per_unit[unit] = (points, 1e3 * np.bincount(where, weights=arr[:, 1],
                                                        minlength=len(points)))
        axis = np.unique(np.concatenate([p for p, _ in per_unit.values()]))
        cols = {u: np.interp(axis, p, ms, left=np.nan, right=np.nan)
                for u, (p, ms) in per_unit.items()}
        ts, cols = _binned(axis, cols, {u: "mean" for u in cols})
        delta["timing"] = {"t": ts, "units": cols}
    board.publish(delta)
    return board.snapshot()


def view_state(model, config) -> str:
    """The page's state (JSON text) for ``model`` not run: its diagram and, when it has units
    (atomic subsystems, or ``config.cosim``), each unit's step, solver, feedthrough, where
    it would run and the algebraic couplings (the units are built in this process and
    initialized, as ``cosim plan`` does; no macro step is taken)."""
    from cosim.config import CosimConfig
    from cosim.master.cosimulation import CoSimulation
    from cosim.model.diagram import Subsystem
    board = Board(model.name, "view")
    delta = {"set": {"title": model.name, "mode": "view", "diagram": model_diagram(model),
                     "progress": {}}}
    cfg = config.cosim
    has_units = any((isinstance(b, Subsystem) and b.atomic) or hasattr(b, "as_unit")
                    for b in model.blocks)
    if cfg is None and has_units:
        cfg = CosimConfig(H=config.dt)
    if cfg is not None:
        here = replace(config, cosim=replace(cfg, backend="local", units={},
                                             checkpoint_every=None, trace=False))
        sim = CoSimulation(model, here)
        try:
            sim.initialize()
            facts = unit_facts(sim.master)
            units = {}
            for spec in sim.partition.units:
                backend = cfg.backend_of(spec.name)
                opts = cfg.options(spec.name)
                units[spec.name] = {
                    "backend": backend, "kind": "planned",
                    "label": f"{backend} (planned)" + (f" {opts.address}" if opts.address
                                                       else ""),
                    "dt": facts["units"][spec.name]["dt"],
                    "solver": unit_solver(spec, sim.master.proxies[spec.name]),
                    "feedthrough": facts["units"][spec.name]["feedthrough"]}
            delta["set"].update(units=units, couplings=facts["couplings"])
            # Drawn as built: parameter expressions (sample times, ...) evaluated.
            delta["set"]["diagram"] = model_diagram(sim.model)
        finally:
            sim.close()
    board.publish(delta)
    return board.snapshot()


def dumps(facts: dict) -> str:
    """``run_facts`` as JSON text (what ``CoSimulation.save_logs`` stores)."""
    return json.dumps(facts, default=lambda v: v.tolist() if hasattr(v, "tolist") else str(v))
