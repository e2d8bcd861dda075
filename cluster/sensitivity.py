"""Global sensitivity analysis of a parameter study, through SALib (extra ``sensitivity``).

A sensitivity design is a sweep design whose points are arranged for one method, and knows
how to compute that method's indices from the sweep's results table:

- :func:`saltelli` — Sobol' indices (Saltelli's scheme with Jansen's estimators, as SALib
  computes them): first-order ``S1`` and total ``ST`` per parameter (and second-order ``S2``
  on request), each with a bootstrap confidence interval (``*_conf``, half-width). It takes
  ``n * (d + 2)`` runs (``n * (2d + 2)`` with second order) for ``d`` parameters; ``n`` a
  power of two.
- :func:`morris` — Morris' elementary effects: ``mu_star`` (mean absolute effect, with its
  bootstrap interval), ``mu`` and ``sigma`` per parameter, from ``trajectories * (d + 1)``
  runs; a screening method, much cheaper than Sobol'.

>>> design = saltelli({"kp": (0.5, 2.0), "ki": (0.1, 1.0)}, 256)
>>> rows = sweep(make_model, config, design, {"iae": integral_abs_error("plant.out", 1.0)})
>>> design.analyze(rows, "iae")           # one row per parameter
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from cluster.sweep_design import box
from cosim.errors import ModelError

__all__ = ["METHODS", "SensitivityDesign", "morris", "saltelli"]

#: The sensitivity methods (`cosim sweep --sensitivity METHOD N`).
METHODS = ("sobol", "morris")


def _salib():
    try:
        import SALib  # noqa: F401
    except ImportError:
        raise ModelError("sensitivity analysis needs SALib: pip install 'cosim[sensitivity]'"
                         ) from None


@dataclass(frozen=True)
class SensitivityDesign:
    """The points of a sensitivity study and how to analyse its results.

    Iterating gives the points (dicts of parameter values), so the design is passed to
    :func:`cluster.sweep.sweep` like any other.

    Attributes
    ----------
    method : str
        ``"sobol"`` or ``"morris"``.
    bounds : dict of str to (float, float)
        Each parameter's range.
    points : list of dict
        The runs' parameter values, in the order the analysis expects.
    matrix : ndarray, shape (n_runs, d)
        The same points as an array (columns in ``bounds`` order).
    second_order : bool
        Sobol': the design also gives second-order indices.
    levels : int
        Morris: grid levels of each parameter.
    seed : int
    """

    method: str
    bounds: dict
    points: list = field(repr=False)
    matrix: np.ndarray = field(repr=False)
    second_order: bool = False
    levels: int = 4
    seed: int = 0

    def __iter__(self):
        return iter(self.points)

    def __len__(self) -> int:
        return len(self.points)

    @property
    def problem(self) -> dict:
        """The SALib problem description."""
        return {"num_vars": len(self.bounds), "names": list(self.bounds),
                "bounds": [list(map(float, b)) for b in self.bounds.values()]}

    def outputs(self, rows: Sequence[Mapping], metric: str) -> np.ndarray:
        """The metric of every run, in design order, shape ``(n_runs,)``.

        Raises
        ------
        ModelError
            The table is not this design's (run count or parameter values differ), or a run
            failed or its metric is NaN (the estimators need every run), or (Sobol') the
            metric is the same in every run.
        """
        rows = sorted(rows, key=lambda r: r["index"])
        if len(rows) != len(self.points):
            raise ModelError(f"the table has {len(rows)} runs, the {self.method} design "
                             f"{len(self.points)}: analyse the table of this design's sweep")
        names = list(self.bounds)
        got = np.array([[float(r[n]) for n in names] for r in rows])
        if not np.array_equal(got, self.matrix):
            raise ModelError(f"the table's parameter values are not the {self.method} "
                             "design's: analyse the table of this design's sweep")
        if metric not in rows[0]:
            raise ModelError(f"the table has no metric {metric!r}; its columns are "
                             f"{', '.join(rows[0])}")
        y = np.array([float(r[metric]) for r in rows])
        bad = [r["run_id"] for r, v in zip(rows, y) if r["status"] != "ok" or math.isnan(v)]
        if bad:
            raise ModelError(f"{len(bad)} run(s) have no {metric} (failed or NaN), e.g. "
                             f"{', '.join(bad[:5])}: the {self.method} estimators need every "
                             "run; fix them and sweep again into the same directory")
        if self.method == "sobol" and np.ptp(y) == 0:
            # Sobol' indices are shares of the output's variance: with none, 0/0 (SALib
            # prints warnings and zeros, which would read as "no parameter matters").
            raise ModelError(f"{metric} is {y[0]:g} in every run: it does not vary, so its "
                             "Sobol' indices (shares of its variance) are undefined")
        return y

    def analyze(self, rows: Sequence[Mapping], metric: str, *, resamples: int = 1000,
                conf_level: float = 0.95) -> list[dict]:
        """The method's indices of ``metric`` from the sweep's results table.

        Parameters
        ----------
        rows : list of dict
            The results table of a sweep of this design.
        metric : str
            The reducer column to analyse.
        resamples : int
            Bootstrap resamples of the confidence intervals.
        conf_level : float
            Confidence level of the intervals.

        Returns
        -------
        list of dict
            One row per parameter: ``parameter`` and, for Sobol', ``S1``, ``S1_conf``,
            ``ST``, ``ST_conf`` (and ``S2_<other>``, ``S2_<other>_conf`` with second order);
            for Morris ``mu_star``, ``mu_star_conf``, ``mu``, ``sigma``.
        """
        _salib()
        y = self.outputs(rows, metric)
        names = list(self.bounds)
        if self.method == "sobol":
            from SALib.analyze import sobol as analysis
            res = analysis.analyze(self.problem, y, calc_second_order=self.second_order,
                                   num_resamples=resamples, conf_level=conf_level,
                                   seed=self.seed)
            out = []
            for i, name in enumerate(names):
                row = {"parameter": name}
                for key in ("S1", "S1_conf", "ST", "ST_conf"):
                    row[key] = float(res[key][i])
                if self.second_order:
                    for j, other in enumerate(names):
                        if j != i:
                            a, b = min(i, j), max(i, j)
                            row[f"S2_{other}"] = float(res["S2"][a, b])
                            row[f"S2_{other}_conf"] = float(res["S2_conf"][a, b])
                out.append(row)
            return out
        from SALib.analyze import morris as analysis
        res = analysis.analyze(self.problem, self.matrix, y, num_resamples=resamples,
                               conf_level=conf_level, num_levels=self.levels, seed=self.seed)
        return [{"parameter": name, "mu_star": float(res["mu_star"][i]),
                 "mu_star_conf": float(res["mu_star_conf"][i]), "mu": float(res["mu"][i]),
                 "sigma": float(res["sigma"][i])} for i, name in enumerate(names)]


def _design(method, bounds, matrix, **kw) -> SensitivityDesign:
    names = list(bounds)
    points = [dict(zip(names, map(float, row))) for row in matrix]
    return SensitivityDesign(method, dict(bounds), points, np.asarray(matrix, dtype=float), **kw)


def saltelli(bounds: Mapping[str, tuple[float, float]], n: int, seed: int = 0,
             second_order: bool = False) -> SensitivityDesign:
    """A design for Sobol' indices (Saltelli's scheme, scrambled Sobol' sequence).

    Parameters
    ----------
    bounds : dict of str to (float, float)
        Each parameter's range (uniform in it).
    n : int
        Base sample size, a power of two; the design has ``n * (d + 2)`` points
        (``n * (2d + 2)`` with ``second_order``).
    seed : int
    second_order : bool
        Also give second-order indices.
    """
    box("saltelli", bounds)
    if n < 2 or n & (n - 1):
        raise ModelError(f"saltelli: n must be a power of two (the Sobol' sequence's "
                         f"balance), got {n}; try {1 << max(1, round(math.log2(max(n, 2))))}")
    _salib()
    from SALib.sample import sobol as sampling
    design = _design("sobol", bounds, np.empty((0, len(bounds))), second_order=second_order,
                     seed=seed)
    matrix = sampling.sample(design.problem, n, calc_second_order=second_order, seed=seed)
    return _design("sobol", bounds, matrix, second_order=second_order, seed=seed)


def morris(bounds: Mapping[str, tuple[float, float]], trajectories: int, seed: int = 0,
           levels: int = 4) -> SensitivityDesign:
    """A design for Morris' elementary effects (one-at-a-time trajectories on a grid).

    Parameters
    ----------
    bounds : dict of str to (float, float)
    trajectories : int
        Number of trajectories; the design has ``trajectories * (d + 1)`` points.
    seed : int
    levels : int
        Grid levels per parameter (even).
    """
    box("morris", bounds)
    if trajectories < 2:
        raise ModelError(f"morris: need at least 2 trajectories, got {trajectories}")
    if levels < 2 or levels % 2:
        raise ModelError(f"morris: levels must be even and >= 2, got {levels}")
    _salib()
    from SALib.sample import morris as sampling
    design = _design("morris", bounds, np.empty((0, len(bounds))), levels=levels, seed=seed)
    matrix = sampling.sample(design.problem, trajectories, num_levels=levels, seed=seed)
    return _design("morris", bounds, matrix, levels=levels, seed=seed)
