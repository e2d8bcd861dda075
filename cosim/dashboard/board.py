"""The dashboard's state: one JSON-ready document the page draws, and the deltas that grow it.

A :class:`Board` holds what the page shows (the diagram, where units run, progress, per-unit
timing, coupling iterations, marks, signal samples, sweep rows). Producers (the run monitor
of :mod:`cosim.dashboard.monitor`, a sweep) call :meth:`Board.publish` with a *delta*;
the board merges it and hands it to every subscriber (the server's event streams). A page
that connects late gets :meth:`Board.snapshot` first: the whole state, the same shape as a
delta, so the page applies both the same way.

Delta (and state) keys
----------------------
``set``: dict of top-level keys replaced (``title``, ``mode``, ``diagram``, ``units``,
``couplings``, ``progress``, ``links``, ``signal_keys``, ``selected``, ``sweep``);
``timing``: ``{"t": [...], "units": {unit: [...]}}`` appended (wall ms per macro step);
``steps``: ``{"t": [...], "iterations": [...], "rejected": [...]}`` appended;
``marks``: list of ``{"t", "kind", "text"}`` appended (kinds ``recovery``, ``rejected``,
``stop``, ``nonconverged``); ``signals``: ``{key: [[t...], [v...]]}`` appended (samples
that start before the last one held replace those from their first time on: a recovery
replays the steps after its checkpoint);
``rows``: sweep result rows appended.
"""

from __future__ import annotations

import bisect
import json
import queue
import threading

__all__ = ["Board", "MAX_SAMPLES"]

#: Samples kept per series: beyond, every other sample is dropped (the page decimates what
#: it draws to its width; this bounds memory and a late page's first message).
MAX_SAMPLES = 200_000


def _thin(ts: list, vs: list) -> tuple[list, list]:
    return ts[::2], vs[::2]


class Board:
    """The dashboard's state and its subscribers (thread-safe)."""

    def __init__(self, title: str = "cosim", mode: str = "live"):
        self._lock = threading.Lock()
        self._subscribers: list[queue.Queue] = []
        self.state: dict = {"title": title, "mode": mode, "diagram": None, "units": {},
                            "couplings": [], "progress": {}, "links": {},
                            "signal_keys": [], "selected": [], "sweep": None,
                            "timing": {"t": [], "units": {}},
                            "steps": {"t": [], "iterations": [], "rejected": []},
                            "marks": [], "signals": {}, "rows": []}
        self.version = 0

    # -- producers --------------------------------------------------------------------

    def publish(self, delta: dict) -> None:
        """Merge ``delta`` into the state and send it to every subscriber."""
        if not delta:
            return
        with self._lock:
            self._merge(delta)
            self.version += 1
            text = json.dumps(delta, separators=(",", ":"), allow_nan=False, default=_plain)
            for q in self._subscribers:
                q.put(text)

    def _merge(self, delta: dict) -> None:
        s = self.state
        s.update(delta.get("set", {}))
        timing = delta.get("timing")
        if timing:
            t = s["timing"]
            n_old = len(t["t"])
            t["t"].extend(timing["t"])
            for u, vals in timing["units"].items():
                t["units"].setdefault(u, [None] * n_old).extend(vals)
            for u, vals in t["units"].items():
                if len(vals) < len(t["t"]):
                    vals.extend([None] * (len(t["t"]) - len(vals)))
        steps = delta.get("steps")
        if steps:
            for k in ("t", "iterations", "rejected"):
                s["steps"][k].extend(steps[k])
        s["marks"].extend(delta.get("marks", ()))
        for key, (ts, vs) in delta.get("signals", {}).items():
            mine = s["signals"].setdefault(key, [[], []])
            if ts and mine[0] and ts[0] < mine[0][-1]:
                # Back in time (a recovery's replay): the new samples replace the old.
                cut = bisect.bisect_left(mine[0], ts[0])
                del mine[0][cut:], mine[1][cut:]
            mine[0].extend(ts)
            mine[1].extend(vs)
            if len(mine[0]) > MAX_SAMPLES:
                mine[0], mine[1] = _thin(mine[0], mine[1])
        s["rows"].extend(delta.get("rows", ()))

    @staticmethod
    def delta_of(snapshot: str) -> dict:
        """A snapshot (:meth:`snapshot`'s text) as a delta that sets everything it holds."""
        return json.loads(snapshot)

    # -- consumers --------------------------------------------------------------------

    def snapshot(self) -> str:
        """The whole state as JSON text (the shape of a delta with everything set)."""
        with self._lock:
            return self._snapshot_text()

    def _snapshot_text(self) -> str:
        s = self.state
        full = {"set": {k: s[k] for k in ("title", "mode", "diagram", "units", "couplings",
                                          "progress", "links", "signal_keys", "selected",
                                          "sweep")},
                "timing": s["timing"], "steps": s["steps"], "marks": s["marks"],
                "signals": s["signals"], "rows": s["rows"], "reset": True}
        return json.dumps(full, separators=(",", ":"), allow_nan=False, default=_plain)

    def subscribe(self) -> tuple[str, queue.Queue]:
        """The state now and a queue that receives every later delta (JSON text), with no
        delta lost or repeated in between."""
        q: queue.Queue = queue.Queue()
        with self._lock:
            self._subscribers.append(q)
            return self._snapshot_text(), q

    @property
    def subscribers(self) -> int:
        """Event streams open now (pages watching)."""
        with self._lock:
            return len(self._subscribers)

    def unsubscribe(self, q: queue.Queue) -> None:
        with self._lock:
            if q in self._subscribers:
                self._subscribers.remove(q)

    def close(self) -> None:
        """Tell every subscriber the stream ends (a None in its queue)."""
        with self._lock:
            for q in self._subscribers:
                q.put(None)


def _plain(value):
    """numpy scalars and arrays (and anything else with ``tolist``/``item``) as JSON."""
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON-ready")
