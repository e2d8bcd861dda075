"""Fewer samples of a signal, drawn the same: the minimum and maximum of each time slice.

A plot ``w`` pixels wide shows of ``n >> w`` samples only each pixel column's lowest and
highest value; keeping those (real samples, in time order) draws the same line. The live
dashboard cuts each update's new samples this way (a logged signal at a fine micro step
would otherwise send thousands of samples a second), a static page its whole series; the
page cuts again to its plot's width when it draws.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["jsonable", "minmax"]


def minmax(t: np.ndarray, v: np.ndarray, points: int) -> tuple[np.ndarray, np.ndarray]:
    """At most ``points`` (+2) samples of ``(t, v)``: the first, the last, and the minimum
    and maximum of each of ``points // 2`` equal slices of time, in time order.

    Parameters
    ----------
    t : ndarray, shape (n,)
        Times, non-decreasing.
    v : ndarray, shape (n,)
        Values (NaN and infinities are kept where a slice has nothing finite).
    points : int

    Returns
    -------
    t, v : ndarray, shape (m,)
        A subset of the samples, m <= points + 2.
    """
    t = np.asarray(t, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    n = len(t)
    if n <= max(points, 2):
        return t, v
    slices = max(1, points // 2)
    edges = np.linspace(t[0], t[-1], slices + 1)
    where = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, slices - 1)
    starts = np.flatnonzero(np.r_[True, where[1:] != where[:-1]])
    seg = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, n]))
    finite = np.isfinite(v)
    low = np.where(finite, v, np.inf)
    high = np.where(finite, v, -np.inf)
    # The first sample of each slice equal to the slice's minimum (maximum).
    at_min = np.flatnonzero(low == np.minimum.reduceat(low, starts)[seg])
    at_max = np.flatnonzero(high == np.maximum.reduceat(high, starts)[seg])
    first_min = at_min[np.unique(seg[at_min], return_index=True)[1]]
    first_max = at_max[np.unique(seg[at_max], return_index=True)[1]]
    keep = np.unique(np.concatenate([[0, n - 1], first_min, first_max]))
    return t[keep], v[keep]


def jsonable(values: np.ndarray) -> list:
    """``values`` as a list of floats, None for NaN and infinities (JSON has neither)."""
    out = values.tolist()
    if not np.isfinite(values).all():
        out = [x if math.isfinite(x) else None for x in out]
    return out
