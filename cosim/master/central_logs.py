"""The central logs of a co-simulation: the units' log batches gathered by the master, keyed
``unit/block.port``, cut back on rollback to a checkpoint or at a stop event."""

from __future__ import annotations

import numpy as np

from cosim.run.logs import Logs
from cosim.numerics.timegrid import EXCHANGE_RTOL, time_tolerance

__all__ = ["CentralLogs"]


class CentralLogs:
    """Log batches per signal, in the order they were collected."""

    def __init__(self):
        self._batches: dict[str, tuple[list, list]] = {}

    def add(self, unit: str, signals: dict) -> None:
        """Add a unit's batch (``LogBatch.signals``: name -> ``(t, values)``, shapes ``(n,)``
        and ``(n, *port_shape)``)."""
        for key, (t, v) in signals.items():
            ts, vs = self._batches.setdefault(f"{unit}/{key}", ([], []))
            ts.append(t)
            vs.append(v)

    def lengths(self) -> dict[str, int]:
        """Batches held per signal (what :meth:`truncate` goes back to)."""
        return {k: len(ts) for k, (ts, _) in self._batches.items()}

    def truncate(self, lengths: dict[str, int]) -> None:
        """Keep the first ``lengths[key]`` batches of each signal (none of a signal not named)."""
        for key, (ts, vs) in self._batches.items():
            n = lengths.get(key, 0)
            del ts[n:], vs[n:]

    def clear(self) -> None:
        self._batches = {}

    def cut_after(self, t_end: float) -> None:
        """Drop the samples after ``t_end`` (s, with a relative tolerance of 1e-9)."""
        eps = time_tolerance(t_end, EXCHANGE_RTOL)
        for key, (ts, vs) in self._batches.items():
            if ts:
                t, v = np.concatenate(ts), np.concatenate(vs)
                keep = t <= t_end + eps
                self._batches[key] = ([t[keep]], [v[keep]])

    def logs(self) -> Logs:
        """Everything so far, each signal with its own time vector."""
        values, times = {}, {}
        for key, (ts, vs) in self._batches.items():
            times[key] = np.concatenate(ts) if ts else np.zeros(0)
            values[key] = np.concatenate(vs) if vs else np.zeros((0, 1))
        base = max(times.values(), key=len) if times else np.zeros(0)
        return Logs(values, times, base)
