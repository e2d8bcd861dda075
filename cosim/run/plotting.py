"""Plots of logged signals (matplotlib, an optional dependency: ``pip install cosim[plot]``).

One panel per unit (the first component of ``unit/block.port`` keys) or, for a monolithic
run, per top-level block; each signal against its own time vector, labelled axes, legends.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from cosim.errors import ModelError

__all__ = ["plot_logs"]


def _group(key: str) -> str:
    head = key.split("/", 1)[0]
    return head if "/" in key else head.rsplit(".", 1)[0]


def plot_logs(logs, keys=None, path=None, title: str | None = None, units: dict | None = None):
    """Plot signals of ``logs``, one panel per unit.

    Parameters
    ----------
    logs : Logs
    keys : sequence of str, optional
        Signals to plot (default: all). A vector signal draws one line per component.
    path : str or Path, optional
        Save the figure there (PNG, PDF, SVG by extension).
    title : str, optional
    units : dict of str to str, optional
        Physical unit of a signal's values by key (shown in its legend entry), e.g.
        ``{"motor/w.out": "rad/s"}``.

    Returns
    -------
    matplotlib.figure.Figure
    """
    try:
        import matplotlib
        if path is not None:
            matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError as err:
        raise ModelError("plotting needs matplotlib: pip install 'cosim[plot]'") from err
    keys = list(logs) if keys is None else list(keys)
    missing = [k for k in keys if k not in logs]
    if missing:
        raise ModelError(f"cannot plot {missing}: not logged (logged: {', '.join(logs)})")
    if not keys:
        raise ModelError("nothing to plot: the logs are empty")
    groups: OrderedDict[str, list[str]] = OrderedDict()
    for k in keys:
        groups.setdefault(_group(k), []).append(k)
    units = units or {}
    fig, axes = plt.subplots(len(groups), 1, sharex=True, squeeze=False,
                             figsize=(9, 2.4 * len(groups) + 0.8))
    for ax, (group, ks) in zip(axes[:, 0], groups.items()):
        for k in ks:
            t, v = logs.time_of(k), logs[k]
            v2 = v.reshape(len(v), -1)
            unit = f" [{units[k]}]" if k in units else ""
            draw = ax.step if _is_discrete(t, logs.time) else ax.plot
            for j in range(v2.shape[1]):
                label = k + (f"[{j}]" if v2.shape[1] > 1 else "") + unit
                if draw is ax.step:
                    draw(t, v2[:, j], where="post", label=label)
                else:
                    draw(t, v2[:, j], label=label)
        ax.set_title(group, loc="left", fontsize=10)
        shared = {units.get(k) for k in ks}
        ax.set_ylabel(shared.pop() if len(shared) == 1 and None not in shared else "value")
        ax.grid(True, alpha=0.3)
        ax.legend(loc="best", fontsize=8)
    axes[-1, 0].set_xlabel("time [s]")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig


def _is_discrete(t: np.ndarray, base: np.ndarray) -> bool:
    """A signal logged more sparsely than the base rate is drawn as steps (held values)."""
    return len(base) > 1 and len(t) > 1 and (t[1] - t[0]) > 1.5 * (base[1] - base[0])
