"""One self-contained HTML page about a run (``cosim report RESULTS -o report.html``).

The page is the dashboard's (:mod:`cosim.dashboard`: the model's diagram with where each unit
ran, progress, signal plots, per-unit step time, iterations and marks), static, with the
sections below after it.

From a results file — best the NPZ a co-simulation writes (``cosim run --out r.npz`` or
``CoSimulation.save_logs``), which also holds the step log, per-unit timing and placement;
any file ``Logs.load`` reads gives the plots alone — the page shows: where each unit ran
(backend, options, step, solver), plots of the chosen signals per unit, the wall time of each
unit's macro steps over time (with totals), and the coupling iterations and rejected steps
over time. Figures are inline SVG (matplotlib, Agg), so the page needs no other file.

The page's parts carry ids (``placement``, ``signals``, ``unit-<name>``, ``timing``,
``steps``) and the numbers they show are also in its tables, so a program (the tests) can
read what it claims.
"""

from __future__ import annotations

import html
import io
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = ["RunRecord", "read_run", "write_report"]


@dataclass
class RunRecord:
    """What a results file holds about a run.

    Attributes
    ----------
    logs : Logs
    steps : dict of str to ndarray
        The step log (``t``, ``H``, ``iterations``, ``residual``, ``status`` codes,
        ``status_names``); empty when the file has none.
    timing : dict of str to ndarray
        Unit -> shape ``(n, 2)``: master time (s), wall seconds of the call that stepped it.
    placement : dict
        :meth:`CoSimulation.placement <cosim.master.cosimulation.CoSimulation.placement>`;
        empty when the file has none.
    dashboard : dict
        The model's diagram, where its units ran and its couplings
        (:func:`cosim.dashboard.static.run_facts`); empty when the file has none.
    """

    logs: object
    steps: dict = field(default_factory=dict)
    timing: dict = field(default_factory=dict)
    placement: dict = field(default_factory=dict)
    dashboard: dict = field(default_factory=dict)


def read_run(path) -> RunRecord:
    """The run in results file ``path`` (any format ``Logs.load`` reads)."""
    from cosim.run.logs import Logs
    path = Path(path)
    logs = Logs.load(path)
    record = RunRecord(logs)
    if path.suffix.lower() == ".npz":
        with np.load(path, allow_pickle=False) as z:
            record.steps = {k[6:]: z[k] for k in z.files if k.startswith("steps/")}
            record.timing = {k[7:]: z[k] for k in z.files if k.startswith("timing/")}
            if "run.json" in z.files:
                record.placement = json.loads(str(z["run.json"]))
            if "dashboard.json" in z.files:
                record.dashboard = json.loads(str(z["dashboard.json"]))
    return record


def _svg(fig) -> str:
    import matplotlib.pyplot as plt
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]          # inline: no XML declaration or doctype


def _table(header: list[str], rows: list[list], table_id: str) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row)
                   + "</tr>" for row in rows)
    return f'<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _placement(record: RunRecord) -> str:
    p = record.placement
    if not p:
        return "<p>No placement recorded (a monolithic run, or a file without it).</p>"
    rows = [[u, d.get("backend"), ", ".join(f"{k}={v}" for k, v in d.get("options", {}).items())
             or "-", d.get("dt"), d.get("solver")] for u, d in p.get("units", {}).items()]
    return (f"<p>Model <b>{html.escape(str(p.get('model')))}</b>: macro step H = "
            f"{p.get('H')} s, {html.escape(str(p.get('scheme')))}, backend "
            f"{html.escape(str(p.get('backend')))}"
            + ("; compiled exchange available (its steps are not timed)"
               if p.get("compiled") else "") + ".</p>"
            + _table(["unit", "backend", "options", "step [s]", "solver"], rows, "placement-table"))


def _signals(record: RunRecord, patterns) -> str:
    from cosim.run.plotting import panels, plot_logs, select_signals
    keys = select_signals(record.logs, patterns or [])
    parts = []
    for group, ks in panels(keys).items():
        fig = plot_logs(record.logs, ks, title=None)
        parts.append(f'<section id="unit-{html.escape(group)}" class="unit">'
                     f"<h3>{html.escape(group)}</h3><p>{len(ks)} signals: "
                     f"{html.escape(', '.join(ks))}</p>{_svg(fig)}</section>")
    return "".join(parts)


def _timing(record: RunRecord) -> str:
    if not record.timing:
        return ("<p>No per-unit timing in this file (only co-simulations write it; steps "
                "taken by the compiled exchange are not timed).</p>")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(9, 3.2), layout="constrained")
    rows = []
    for unit, data in record.timing.items():
        t, seconds = data[:, 0], data[:, 1]
        # Several calls at one macro point (coupling iterations) add up to that step's time.
        points, where = np.unique(t, return_inverse=True)
        per_step = np.bincount(where, weights=seconds, minlength=len(points))
        ax.plot(points, per_step * 1e3, label=unit, lw=1)
        rows.append([unit, len(points), f"{per_step.sum():.4f}",
                     f"{1e3 * per_step.mean():.4f}", f"{1e3 * per_step.max():.4f}"])
    ax.set_xlabel("time [s]")
    ax.set_ylabel("wall time per macro step [ms]")
    ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    return (_table(["unit", "macro steps", "total [s]", "mean [ms]", "max [ms]"], rows,
                   "timing-table") + _svg(fig))


def _steps(record: RunRecord) -> str:
    s = record.steps
    if not s or len(s.get("t", ())) == 0:
        return "<p>No step log in this file (only co-simulations write it).</p>"
    import matplotlib.pyplot as plt
    names = [str(n) for n in s["status_names"]]
    status = np.array([names[int(c)] for c in s["status"]])
    rejected = status == "rejected"
    fig, (a1, a2) = plt.subplots(2, 1, sharex=True, figsize=(9, 4.2), layout="constrained")
    a1.step(s["t"], s["iterations"], where="post", lw=1)
    a1.set_ylabel("coupling iterations")
    a1.grid(True, alpha=0.3)
    a2.step(s["t"], s["H"], where="post", lw=1, label="H")
    if rejected.any():
        a2.plot(s["t"][rejected], s["H"][rejected], "rx", label="rejected")
    a2.set_ylabel("macro step H [s]")
    a2.set_xlabel("time [s]")
    a2.grid(True, alpha=0.3)
    a2.legend(fontsize=8)
    counts = [[name, int((status == name).sum())] for name in names]
    summary = [["macro step attempts", len(status)],
               ["most iterations in a step", int(np.max(s["iterations"]))],
               ["mean iterations per step", f"{np.mean(s['iterations']):.3f}"],
               *counts]
    return _table(["", "count"], summary, "steps-table") + _svg(fig)


_STYLE = """#report{font-family:sans-serif;max-width:1200px;margin:2em auto;color:#222}
#report table{border-collapse:collapse;margin:1em 0}#report td,#report th{border:1px solid #ccc;
padding:3px 8px;text-align:left}#report th{background:#eee}
#report svg{max-width:100%;height:auto}"""


def write_report(results, out, signals=None, title: str | None = None) -> Path:
    """Write the HTML page about results file ``results`` to ``out``.

    Parameters
    ----------
    results : str or Path
    out : str or Path
    signals : sequence of str, optional
        Signal names or globs to plot (default: all).
    title : str, optional

    Raises
    ------
    ModelError
        A signal pattern that matches nothing (named, with close matches).
    """
    import matplotlib
    matplotlib.use("Agg", force=False)
    record = read_run(results)
    name = title or record.placement.get("model") or Path(results).stem
    body = (f"<h1>{html.escape(str(name))}</h1>"
            f"<p>From {html.escape(Path(results).name)}: {len(record.logs)} signals, "
            f"t = {record.logs.time[0]:g} .. {record.logs.time[-1]:g} s.</p>"
            f'<section id="placement"><h2>Placement</h2>{_placement(record)}</section>'
            f'<section id="signals"><h2>Signals per unit</h2>'
            f"{_signals(record, signals)}</section>"
            f'<section id="timing"><h2>Macro-step timing per unit</h2>{_timing(record)}'
            "</section>"
            f'<section id="steps"><h2>Iterations and rejected steps</h2>{_steps(record)}'
            "</section>")
    from cosim.dashboard.page import render
    from cosim.dashboard.static import report_state
    page = render(str(name), report_state(record, signals, str(name)),
                  extra=f'<div id="report"><style>{_STYLE}</style>{body}</div>')
    out = Path(out)
    out.write_text(page, encoding="utf-8")
    return out
