"""Designs of a parameter study: the points a sweep runs, all given the same way.

Every design takes a dict with one entry per parameter: :func:`grid` its values, the sampled
designs (:func:`random_uniform`, :func:`lhs`, :func:`sobol`) its range ``(low, high)``, and
returns a list of points (dicts of parameter values). Sensitivity designs live in
:mod:`cluster.sensitivity` (they need their own analysis).

>>> grid({"k": [1.0, 2.0], "tau": [0.1, 0.2]})[1]
{'k': 1.0, 'tau': 0.2}
"""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cosim.errors import ModelError

__all__ = ["Run", "grid", "lhs", "listed", "random_uniform", "runs_of", "sobol"]


@dataclass(frozen=True)
class Run:
    """One run of a sweep: its index, a stable id, and its parameter values."""

    index: int
    run_id: str
    params: dict


def runs_of(points: Sequence[Mapping]) -> list[Run]:
    """The runs of a design's points; a run's id digests its index and parameters."""
    runs = []
    for i, p in enumerate(points):
        params = {k: (float(v) if isinstance(v, (int, float, np.floating, np.integer))
                      and not isinstance(v, bool) else v) for k, v in p.items()}
        digest = hashlib.sha1(json.dumps(params, sort_keys=True, default=str).encode())
        runs.append(Run(i, f"{i:06d}-{digest.hexdigest()[:8]}", params))
    return runs


def _axes(design: str, axes) -> dict:
    if not isinstance(axes, Mapping) or not axes:
        raise ModelError(f"{design}: give a dict with one entry per parameter, e.g. "
                         f"{design}({{'k': ...}}), got {axes!r}")
    return dict(axes)


def grid(axes: Mapping[str, Sequence]) -> list[dict]:
    """The full grid (Cartesian product) of each parameter's values, last parameter fastest.

    Parameters
    ----------
    axes : dict of str to sequence
        Parameter name -> its values.
    """
    axes = _axes("grid", axes)
    points = [{}]
    for name, values in axes.items():
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence | np.ndarray):
            raise ModelError(f"grid: {name} needs a list of values, got {values!r}")
        points = [{**p, name: v} for p in points for v in values]
    return points


def listed(source) -> list[dict]:
    """Explicit points: a list of dicts, or a CSV file (header = names) or a YAML list."""
    if isinstance(source, (list, tuple)):
        return [dict(p) for p in source]
    path = Path(source)
    if path.suffix.lower() == ".csv":
        with path.open(newline="") as fh:
            return [{k: float(v) for k, v in row.items()} for row in csv.DictReader(fh)]
    import yaml
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, list) or not all(isinstance(p, dict) for p in data):
        raise ModelError(f"{path}: a design file is a list of parameter mappings")
    return data


def box(design: str, bounds) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Names, lows and highs of a dict of ranges ``name -> (low, high)``, checked."""
    bounds = _axes(design, bounds)
    lo, hi = [], []
    for name, span in bounds.items():
        try:
            a, b = (float(v) for v in span)
        except (TypeError, ValueError):
            raise ModelError(f"{design}: {name} needs a range (low, high), got {span!r}") from None
        if not a < b:
            raise ModelError(f"{design}: {name} needs low < high, got ({a}, {b})")
        lo.append(a)
        hi.append(b)
    return list(bounds), np.array(lo), np.array(hi)


def _scaled(design: str, unit: np.ndarray, bounds) -> list[dict]:
    names, lo, hi = box(design, bounds)
    pts = lo + unit * (hi - lo)
    return [dict(zip(names, map(float, row))) for row in pts]


def random_uniform(bounds: Mapping[str, tuple[float, float]], n: int, seed: int = 0):
    """``n`` points uniform in the box ``bounds`` (name -> (low, high)), reproducible."""
    return _scaled("random_uniform", np.random.default_rng(seed).random((n, len(bounds))), bounds)


def lhs(bounds: Mapping[str, tuple[float, float]], n: int, seed: int = 0):
    """``n`` Latin-hypercube points in the box (``scipy.stats.qmc``), reproducible."""
    from scipy.stats import qmc
    return _scaled("lhs", qmc.LatinHypercube(d=len(bounds), seed=seed).random(n), bounds)


def sobol(bounds: Mapping[str, tuple[float, float]], n: int, seed: int = 0):
    """``n`` scrambled Sobol points in the box (``scipy.stats.qmc``; n a power of 2 is best).

    For Sobol' *sensitivity indices* use :func:`cluster.sensitivity.saltelli` instead: its
    points are arranged so that the indices can be computed from the results.
    """
    from scipy.stats import qmc
    return _scaled("sobol", qmc.Sobol(d=len(bounds), seed=seed).random(n), bounds)
