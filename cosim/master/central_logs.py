"""The central logs of a co-simulation: the units' log batches gathered by the master, keyed
``unit/block.port``, cut back on rollback to a checkpoint or at a stop event. A sample at a
macro point carries the master's time of that point (units compute their own grid times:
``3 * 0.1`` is not ``0.3``), so every signal has the same time there and a results table
one row per macro point."""

from __future__ import annotations

import numpy as np

from cosim.master.partition import REST
from cosim.run.logs import Logs
from cosim.numerics.timegrid import EXCHANGE_RTOL, time_tolerance

__all__ = ["CentralLogs"]


class CentralLogs:
    """Log batches per signal, in the order they were collected.

    Parameters
    ----------
    units : iterable of str
        The co-simulation's units: the top-level unit's input ``<unit>__<port>`` (what a
        unit's output feeds into the top-level blocks) is logged as ``<unit>.<port>``, the key
        of that subsystem port in the monolithic run.
    keys : dict of str to str, optional
        Keys the logs show instead (an automatic split's units -> the model's own keys;
        None hides a signal).
    """

    def __init__(self, units=(), keys: dict | None = None):
        self._units = set(units)
        self._keys = keys or {}
        self._stored = {v: k for k, v in self._keys.items() if v is not None}
        self._batches: dict[str, tuple[list, list]] = {}
        self._grid: tuple[float, float] | None = None
        self._held: dict[str, float] = {}       # see truncate

    def stamp(self, t0: float, quantum: float) -> None:
        """Stamp samples at macro points with the master's time ``t0 + n * quantum`` (s;
        every macro point is a multiple of the quantum)."""
        self._grid = (t0, quantum) if quantum > 0 else None

    def _stamped(self, t: np.ndarray) -> np.ndarray:
        """``t`` with the times within the exchange tolerance of a macro point replaced by
        the master's time of that point."""
        t0, q = self._grid
        on = t0 + np.rint((t - t0) / q) * q
        close = np.abs(t - on) <= EXCHANGE_RTOL * np.maximum(1.0, np.abs(on))
        return np.where(close, on, t)

    def add(self, unit: str, signals: dict) -> None:
        """Add a unit's batch (``LogBatch.signals``: name -> ``(t, values)``, shapes ``(n,)``
        and ``(n, *port_shape)``). Keys are ``unit/block.port``, and ``block.port`` for the
        top-level unit, as in the monolithic run of the same model."""
        prefix = "" if unit == REST else f"{unit}/"
        stamped: dict[int, np.ndarray] = {}     # signals of a task share their times
        for key, (t, v) in signals.items():
            if unit == REST:
                key = self._boundary(key)
            if self._held and prefix + key in self._held:
                t, v = self._after_held(prefix + key, t, v)
            ts, vs = self._batches.setdefault(prefix + key, ([], []))
            if self._grid is not None and len(t):
                s = stamped.get(id(t))
                if s is None:
                    s = stamped[id(t)] = self._stamped(np.asarray(t, dtype=np.float64))
                t = s
            ts.append(t)
            vs.append(v)

    def _boundary(self, key: str) -> str:
        """``<unit>__<port>.out`` of the top-level unit -> ``<unit>.<port>``."""
        block, _, port = key.rpartition(".")
        unit, sep, out = block.partition("__")
        return f"{unit}.{out}" if sep and port == "out" and unit in self._units else key

    def names(self) -> list[str]:
        """The signals logged so far, named as :meth:`logs` names them."""
        shown = (self._keys.get(k, k) for k in list(self._batches))
        return [k for k in shown if k is not None]

    def batches(self, name: str, start: int = 0) -> tuple[list, list, int]:
        """Signal ``name`` (as :meth:`logs` names it) as collected since batch ``start``:
        its time arrays ``(n_i,)`` and value arrays ``(n_i, *port_shape)``, one per batch,
        and the number of batches held (the next ``start``; below ``start`` after the logs
        were cut back by a recovery, whose replayed samples then follow). Cheap: no array
        is copied (a live view such as a dashboard reads a few signals often)."""
        key = self._stored.get(name, name) if self._keys else name
        ts, vs = self._batches.get(key, ((), ()))
        end = len(vs)
        return list(ts[start:end]), list(vs[start:end]), end

    def lengths(self) -> dict[str, int]:
        """Batches held per signal (what :meth:`truncate` goes back to)."""
        return {k: len(ts) for k, (ts, _) in self._batches.items()}

    def truncate(self, lengths: dict[str, int], recovered: bool = False) -> None:
        """Keep the first ``lengths[key]`` batches of each signal (none of a signal not named).

        ``recovered``: the units were restored to the checkpoint these lengths are of (fault
        recovery): the next batch of each signal drops its samples up to the last one kept.
        A unit made again after a loss sends its own first samples, and sends again the
        sample at the checkpoint's point when its outputs are refreshed there, where the
        unit that was lost replaced a sample it had sent already.
        """
        self._held = {}
        for key, (ts, vs) in self._batches.items():
            n = lengths.get(key, 0)
            del ts[n:], vs[n:]
            if recovered:
                last = next((t[-1] for t in reversed(ts) if len(t)), None)
                if last is not None:
                    self._held[key] = float(last)

    def _after_held(self, key: str, t, v):
        """The samples of ``(t, v)`` after the last one kept (see :meth:`truncate`)."""
        last = self._held.pop(key)
        t = np.asarray(t, dtype=np.float64)
        keep = t > last + time_tolerance(last, EXCHANGE_RTOL)
        return (t, v) if keep.all() else (t[keep], np.asarray(v)[keep])

    def clear(self) -> None:
        self._batches, self._held = {}, {}

    def snapshot(self, lengths: dict[str, int] | None = None) -> dict:
        """Every signal so far (its first ``lengths[key]`` batches when given), as
        ``{key: (t, values)}`` — what a checkpoint file carries so that a resumed run's logs
        start at t0."""
        out = {}
        for key, (ts, vs) in self._batches.items():
            n = len(ts) if lengths is None else lengths.get(key, 0)
            if n:
                out[key] = (np.concatenate(ts[:n]), np.concatenate(vs[:n]))
        return out

    def seed(self, signals: dict) -> None:
        """Start afresh from ``signals`` (``{key: (t, values)}``, from :meth:`snapshot`)."""
        self._batches = {key: ([t], [v]) for key, (t, v) in signals.items()}
        self._held = {}

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
            key = self._keys.get(key, key)
            if key is None:
                continue
            times[key] = np.concatenate(ts) if ts else np.zeros(0)
            values[key] = np.concatenate(vs) if vs else np.zeros((0, 1))
        base = max(times.values(), key=len) if times else np.zeros(0)
        return Logs(values, times, base)
