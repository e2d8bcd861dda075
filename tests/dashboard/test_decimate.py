"""The min/max cut of a signal (cosim.dashboard.decimate) against a plain loop over its time
slices."""

from __future__ import annotations

import numpy as np
import pytest

from cosim.dashboard.decimate import jsonable, minmax


def _reference(t, v, points):
    """Each slice's first minimum and first maximum, plus the first and last samples."""
    slices = points // 2
    edges = np.linspace(t[0], t[-1], slices + 1)
    keep = {0, len(t) - 1}
    for k in range(slices):
        inside = [i for i in range(len(t)) if edges[k] <= t[i] < edges[k + 1]
                  or (k == slices - 1 and t[i] == edges[-1])]
        finite = [i for i in inside if np.isfinite(v[i])]
        if finite:
            keep.add(min(finite, key=lambda i: (v[i], i)))
            keep.add(max(finite, key=lambda i: (v[i], -i)))
        elif inside:
            keep.add(inside[0])
    keep = sorted(keep)
    return t[keep], v[keep]


@pytest.mark.parametrize("n,points", [(10, 20), (1000, 40), (5003, 200), (777, 7)])
def test_minmax_keeps_each_slices_extremes(n, points):
    rng = np.random.default_rng(n)
    t = np.sort(rng.uniform(0, 3, n))
    t[n // 3: n // 3 + 5] = t[n // 3]                   # repeated times (events)
    v = np.cumsum(rng.normal(size=n))
    v[n // 2] = np.nan
    ts, vs = minmax(t, v, points)
    if n <= points:
        np.testing.assert_array_equal(ts, t)
        return
    rt, rv = _reference(t, v, points)
    np.testing.assert_array_equal(ts, rt)
    np.testing.assert_array_equal(vs, rv)
    assert len(ts) <= points + 2
    assert np.nanmax(vs) == np.nanmax(v) and np.nanmin(vs) == np.nanmin(v)


def test_jsonable_writes_none_for_what_json_cannot_hold():
    assert jsonable(np.array([1.0, np.nan, np.inf, -2.5])) == [1.0, None, None, -2.5]
