"""Simulation results: one array per logged signal, each with its own time vector."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np

__all__ = ["Logs"]


class Logs(Mapping):
    """Logged signals of a run.

    ``logs[key]`` is an array of shape ``(n_samples, *port_shape)``, one row per sample of the
    signal's own rate; ``logs.time_of(key)`` is its time vector, shape ``(n_samples,)``;
    ``logs.time`` is the base-rate time vector (the finest). Keys are ``"block.port"`` (and
    ``"unit/block.port"`` for co-simulation).

    Parameters
    ----------
    values : dict of str to ndarray
        Signal samples, shape ``(n_samples, *shape)``.
    times : dict of str to ndarray
        Time vector of each signal, shape ``(n_samples,)``.
    time : ndarray
        Base-rate time vector.
    """

    def __init__(self, values: dict[str, np.ndarray], times: dict[str, np.ndarray],
                 time: np.ndarray):
        self._values = values
        self._times = times
        self.time = time

    def __getitem__(self, key: str) -> np.ndarray:
        try:
            return self._values[key]
        except KeyError:
            raise KeyError(f"no logged signal {key!r}; logged: {', '.join(self._values)}") \
                from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def time_of(self, key: str) -> np.ndarray:
        """Time vector (s) of signal ``key``, shape ``(n_samples,)``."""
        self[key]
        return self._times[key]

    def to_npz(self, path) -> None:
        """Save as a NumPy ``.npz``: ``time``, ``values/<key>``, ``time/<key>``."""
        arrays = {"time": self.time}
        for k, v in self._values.items():
            arrays[f"values/{k}"] = v
            arrays[f"time/{k}"] = self._times[k]
        np.savez(path, **arrays)

    @classmethod
    def from_npz(cls, path) -> Logs:
        """Load logs saved by :meth:`to_npz`."""
        with np.load(path, allow_pickle=False) as z:
            values = {k[7:]: z[k] for k in z.files if k.startswith("values/")}
            times = {k[5:]: z[k] for k in z.files if k.startswith("time/")}
            return cls(values, times, z["time"])

    def __repr__(self) -> str:
        return f"Logs({len(self)} signals, {len(self.time)} base samples)"
