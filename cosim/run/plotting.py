"""Plots of logged signals (matplotlib, an optional dependency: ``pip install cosim[plot]``).

One panel per unit (the first component of ``unit/block.port`` keys) or, for a monolithic
run, per top-level block; each signal against its own time vector, labelled axes. Legends sit
beside their panel, in as many columns as their entries need to fit its height, and the
figure grows to hold them (a 12-signal panel does not spill over its axes).
"""

from __future__ import annotations

import difflib
import fnmatch
import math
from collections import OrderedDict

import numpy as np

from cosim.errors import ModelError

__all__ = ["panels", "plot_logs", "select_signals"]

#: Legend entries per inch of panel height at the legend's font size (8 pt).
_ENTRIES_PER_INCH = 5.5
#: Width of one legend column [in] per character of its longest label, and its padding.
_INCH_PER_CHAR, _COLUMN_PAD = 0.075, 0.55


def select_signals(keys, patterns) -> list[str]:
    """The logged signals that ``patterns`` name, in the order of ``keys``.

    Parameters
    ----------
    keys : iterable of str
        The logged signals (``block.port``, ``unit/block.port``).
    patterns : sequence of str
        Signal names or shell-style globs (``vehicle/*``, ``*.out``, ``motor/current?.out``).
        Empty: every signal.

    Raises
    ------
    ModelError
        For a pattern that matches nothing, naming it, the closest signals and the choices.
    """
    keys = list(keys)
    if not patterns:
        return keys
    chosen, problems = [], []
    for pattern in patterns:
        hits = [k for k in keys if fnmatch.fnmatchcase(k, pattern)]
        if not hits:
            close = difflib.get_close_matches(pattern, keys, n=3, cutoff=0.5)
            problems.append(f"{pattern!r} matches no logged signal"
                            + (f"; did you mean {', '.join(close)}?" if close else ""))
        chosen += [k for k in hits if k not in chosen]
    if problems:
        raise ModelError("cannot plot: " + "; ".join(problems)
                         + f" (logged: {', '.join(keys)}; globs such as 'unit/*' work)")
    return [k for k in keys if k in chosen]


def panels(keys) -> OrderedDict[str, list[str]]:
    """``keys`` grouped by unit (or top-level block), in order: one plot panel each."""
    groups: OrderedDict[str, list[str]] = OrderedDict()
    for k in keys:
        head = k.split("/", 1)[0]
        groups.setdefault(head if "/" in k else head.rsplit(".", 1)[0], []).append(k)
    return groups


def plot_logs(logs, keys=None, path=None, title: str | None = None, units: dict | None = None,
              fig=None):
    """Plot signals of ``logs``, one panel per unit.

    Parameters
    ----------
    logs : Logs
    keys : sequence of str, optional
        Signals to plot, names or glob patterns (default: all). A vector signal draws one
        line per component.
    path : str or Path, optional
        Save the figure there (PNG, PDF, SVG by extension).
    title : str, optional
    units : dict of str to str, optional
        Physical unit of a signal's values by key (shown in its legend entry), e.g.
        ``{"motor/w.out": "rad/s"}``.
    fig : matplotlib.figure.Figure, optional
        Draw into this figure (cleared first) instead of a new one: a live view redraws so.

    Returns
    -------
    matplotlib.figure.Figure
    """
    try:
        import matplotlib
        if path is not None and fig is None:
            matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError as err:
        raise ModelError("plotting needs matplotlib: pip install 'cosim[plot]'") from err
    keys = select_signals(logs, keys or [])
    if not keys:
        raise ModelError("nothing to plot: the logs are empty")
    units = units or {}
    groups = panels(keys)
    labels = {g: [label for k in ks for label in _labels(k, logs[k], units)]
              for g, ks in groups.items()}
    height = 2.4
    columns = {g: max(1, math.ceil(len(ls) / max(1, int(height * _ENTRIES_PER_INCH))))
               for g, ls in labels.items()}
    legend_width = max(columns[g] * (_COLUMN_PAD + _INCH_PER_CHAR * max(map(len, ls)))
                       for g, ls in labels.items())
    size = (7.5 + legend_width, height * len(groups) + 0.8)
    if fig is None:
        fig = plt.figure(figsize=size)
    else:
        fig.clear()
        fig.set_size_inches(*size)
    axes = fig.subplots(len(groups), 1, sharex=True, squeeze=False)
    for ax, (group, ks) in zip(axes[:, 0], groups.items()):
        names = iter(labels[group])
        for k in ks:
            t, v = logs.time_of(k), logs[k]
            v2 = v.reshape(len(v), -1)
            step = _is_discrete(t, logs.time)
            for j in range(v2.shape[1]):
                if step:
                    ax.step(t, v2[:, j], where="post", label=next(names))
                else:
                    ax.plot(t, v2[:, j], label=next(names))
        ax.set_title(group, loc="left", fontsize=10)
        shared = {units.get(k) for k in ks}
        ax.set_ylabel(shared.pop() if len(shared) == 1 and None not in shared else "value")
        ax.grid(True, alpha=0.3)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8,
                  ncols=columns[group], borderaxespad=0.0, frameon=False)
    axes[-1, 0].set_xlabel("time [s]")
    if title:
        fig.suptitle(title)
    # tight_layout counts each axes' legend (beside it) in the space the axes need.
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig


def _labels(key: str, values: np.ndarray, units: dict) -> list[str]:
    width = int(np.prod(values.shape[1:], dtype=int)) if values.ndim > 1 else 1
    unit = f" [{units[key]}]" if key in units else ""
    return [key + (f"[{j}]" if width > 1 else "") + unit for j in range(width)]


def _is_discrete(t: np.ndarray, base: np.ndarray) -> bool:
    """A signal logged more sparsely than the base rate is drawn as steps (held values)."""
    return len(base) > 1 and len(t) > 1 and (t[1] - t[0]) > 1.5 * (base[1] - base[0])
