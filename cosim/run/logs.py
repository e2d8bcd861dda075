"""Simulation results: one array per logged signal, each with its own time vector."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np

__all__ = ["Logs", "SampleList"]


class SampleList(list):
    """The samples of one logged signal while a run records them.

    Elements are single samples (arrays of the signal's shape, appended by the interpreter
    at C speed: ``append`` is the list's own) or *chunks* of many samples (arrays with one
    more leading axis, added by the fast path in one go). Lengths and cuts count samples.

    Parameters
    ----------
    shape : tuple of int
        The signal's shape.
    """

    __slots__ = ("ndim", "shape", "extra")

    def __init__(self, shape: tuple[int, ...]):
        super().__init__()
        self.shape = tuple(shape)
        self.ndim = len(self.shape)
        self.extra = 0          # samples beyond one per element (in chunks)

    def _n(self, e) -> int:
        return 1 if e.ndim == self.ndim else len(e)

    def add_chunk(self, chunk: np.ndarray) -> None:
        """Append many samples at once, shape ``(n, *shape)``."""
        if len(chunk):
            self.append(chunk)
            self.extra += len(chunk) - 1

    def length(self) -> int:
        """Number of samples (constant time)."""
        return len(self) + self.extra

    def array(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        """Samples ``start:stop`` as one array of shape ``(n, *shape)``.

        Walks back from the end: a log batch (the samples since the last collection) touches
        only the last elements, so collecting a long run costs what the batches hold.
        """
        total = self.length()
        stop = total if stop is None else stop
        parts, end = [], total
        for e in reversed(self):
            if end <= start:
                break
            n = self._n(e)
            begin = end - n
            lo, hi = max(start - begin, 0), min(stop - begin, n)
            if lo < hi:
                parts.append(e[None] if e.ndim == self.ndim else e[lo:hi])
            end = begin
        if not parts:
            return np.zeros((0,) + self.shape)
        parts.reverse()
        out = np.concatenate(parts)
        # (A String / Binary port's samples stay str / bytes in an object array.)
        return out if out.dtype == object else out.astype(np.float64, copy=False)

    def truncate(self, n: int) -> None:
        """Keep the first ``n`` samples (walks back from the end: cuts are recent)."""
        total = self.length()
        while self and total > n:
            e = self[-1]
            m = self._n(e)
            if total - m >= n:
                self.pop()
                self.extra -= m - 1
                total -= m
            else:
                keep = m - (total - n)
                self[-1] = e[:keep]
                self.extra -= m - keep
                total = n

    def pop_last(self) -> None:
        """Drop the last sample."""
        self.truncate(self.length() - 1)


class Logs(Mapping):
    """Logged signals of a run.

    ``logs[key]`` is an array of shape ``(n_samples, *port_shape)``, one row per sample of the
    signal's own rate; ``logs.time_of(key)`` is its time vector, shape ``(n_samples,)``;
    ``logs.time`` is the base-rate time vector (the finest). Keys are ``"block.port"``, and
    ``"sub/block.port"`` inside an atomic subsystem or a co-simulation unit (the same keys for
    a model run monolithically and co-simulated).

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

    def plot(self, keys=None, path=None, title=None, units=None):
        """Plot the signals, one panel per unit (see :func:`cosim.run.plotting.plot_logs`)."""
        from cosim.run.plotting import plot_logs
        return plot_logs(self, keys, path, title, units)

    def save(self, path):
        """Write to ``path`` in the format of its suffix: ``.csv``, ``.parquet``, ``.h5``,
        ``.mat`` or ``.npz`` (layouts in :mod:`cosim.run.results`); returns the path."""
        from cosim.run import results
        return results.write(self, path)

    @classmethod
    def load(cls, path) -> Logs:
        """Read logs that :meth:`save` wrote (any of its formats)."""
        from cosim.run import results
        return results.read(path)

    def to_csv(self, path):
        """A table: ``time`` and a column per signal component (see :meth:`save`)."""
        return self._save(path, ".csv")

    def to_parquet(self, path):
        """The table of :meth:`to_csv` as Parquet (needs pyarrow)."""
        return self._save(path, ".parquet")

    def to_hdf5(self, path):
        """Each signal's values and time vector in HDF5 (needs h5py)."""
        return self._save(path, ".h5")

    def to_mat(self, path):
        """A MATLAB file: ``time`` and a struct of signals (see :mod:`cosim.run.results`)."""
        return self._save(path, ".mat")

    def to_npz(self, path):
        """NumPy ``.npz``: ``time``, ``values/<key>``, ``time/<key>``."""
        return self._save(path, ".npz")

    @classmethod
    def from_npz(cls, path) -> Logs:
        """Load logs saved by :meth:`to_npz`."""
        return cls.load(path)

    def _save(self, path, suffix: str):
        from pathlib import Path
        path = Path(path)
        if path.suffix.lower() not in ((suffix, ".hdf5") if suffix == ".h5" else (suffix,)):
            path = path.with_name(path.name + suffix)
        return self.save(path)

    def __repr__(self) -> str:
        return f"Logs({len(self)} signals, {len(self.time)} base samples)"
