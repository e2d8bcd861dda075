"""A parameter sweep on the dashboard: runs done, failed and pending (per worker), and the
results table filling in as rows arrive (``sweep(..., dashboard=...)``)."""

from __future__ import annotations

import math
import time

__all__ = ["SweepMonitor"]


def _cell(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


class SweepMonitor:
    """Feeds a :class:`~cosim.dashboard.Dashboard` with a sweep's rows.

    Parameters
    ----------
    dashboard : Dashboard
    total : int
        Runs in the design.
    done : int
        Runs already in the results (a resumed sweep).
    columns : list of str
        The results table's columns.
    title : str
    """

    def __init__(self, dashboard, total: int, done: int, columns: list[str], title: str):
        self.board = dashboard.board
        self.started = time.perf_counter()
        self.sweep = {"total": total, "done": done, "failed": 0, "pending": total - done,
                      "columns": list(columns), "workers": {}, "status": "running"}
        self.board.publish({"set": {"title": title, "mode": "sweep", "sweep": self.sweep,
                                    "progress": self._progress()}})

    def _progress(self) -> dict:
        s = self.sweep
        finished = s["done"] + s["failed"]
        wall = time.perf_counter() - self.started
        rate = finished / wall if wall > 0 else 0.0
        return {"t": finished, "t0": 0, "t_end": s["total"], "steps": finished,
                "rate": rate, "eta": s["pending"] / rate if rate > 0 else None,
                "wall": wall, "status": s["status"], "unit": "runs"}

    def rows(self, rows: list[tuple[dict, str]]) -> None:
        """Rows that came in, each with the worker that ran it (None: not known)."""
        s = self.sweep
        for row, worker in rows:
            w = s["workers"].setdefault(worker or "unknown", {"done": 0, "failed": 0})
            key = "failed" if row.get("status") == "failed" else "done"
            w[key] += 1
            s[key] += 1
            s["pending"] -= 1
        self.board.publish({"set": {"sweep": s, "progress": self._progress()},
                            "rows": [{k: _cell(v) for k, v in row.items()}
                                     for row, _ in rows]})

    def finish(self, status: str = "done") -> None:
        self.sweep["status"] = status
        self.board.publish({"set": {"sweep": self.sweep, "progress": self._progress()}})
