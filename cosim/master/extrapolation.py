"""Inputs over a macro step from past macro points: each unit output's recent values and the
polynomial (order 0, 1, 2) through them, turned into a unit's SetInputs."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from cosim.master import protocol as P

__all__ = ["PortHistory"]

#: Macro points kept per output: enough for the order-2 polynomial.
KEPT = 3


class PortHistory:
    """Every unit output at the last :data:`KEPT` macro points.

    Parameters
    ----------
    order : int
        Extrapolation order (``CosimConfig.extrapolation``).
    period : dict of (str, str) to float
        ``(unit, output)`` -> how often it changes (s); 0.0 for a continuous output.

    Attributes
    ----------
    points : dict of (str, str) to list of (float, ndarray)
        ``(unit, output)`` -> ``(t, value)`` at past macro points, oldest first.
    """

    def __init__(self, order: int, period: dict):
        self.order = order
        self.period = period
        self.points: dict[tuple[str, str], list[tuple[float, np.ndarray]]] = {}

    def start(self, t0: float, values: dict) -> None:
        """Forget the past: the history is the values at ``t0``. A String / Binary output
        (an object array) is held like a discrete output whose period never ends: text is
        never extrapolated."""
        self.points = {key: [(t0, v)] for key, v in values.items()}
        for key, v in values.items():
            if v.dtype == object:
                self.period[key] = math.inf

    def append(self, T: float, outputs: dict) -> None:
        """Add the macro point ``T`` (dropping what is older than needed)."""
        for key, v in outputs.items():
            hist = self.points.setdefault(key, [])
            hist.append((T, v))
            del hist[:-KEPT]

    def ahead(self, later: dict, k: int) -> PortHistory:
        """This history as macro step ``k`` of a window sees it (a view, nothing copied):
        these points, then the first ``k`` of ``later`` (``(unit, output)`` -> ``(t,
        value)`` at the window's later macro points, appended as they become final)."""
        view = PortHistory(self.order, self.period)
        view.points = _Upto(self.points, later, k)
        return view

    def latest(self) -> Mapping:
        """Every output's value at the latest macro point (a view of :attr:`points`)."""
        return _Latest(self.points)

    def replace_last(self, key: tuple[str, str], T: float, value: np.ndarray) -> None:
        """The value at the latest macro point ``T`` became ``value`` (a refresh)."""
        self.points[key][-1] = (T, value)

    def held(self, key: tuple[str, str], H: float) -> bool:
        """True for a discrete output whose period is at least ``H``: constant over the step."""
        return self.period[key] >= H * (1 - 1e-9)

    def extrapolate(self, key: tuple[str, str], H: float, predict: bool = True):
        """Value at T, derivatives at T, and the prediction at T+H from past macro points.

        A discrete output whose period is at least H is held (it does not change within the
        step); others follow the configured order, lowered while history is short.

        Returns
        -------
        y : ndarray
            The value at the latest macro point T, of the port's shape.
        derivatives : tuple of ndarray
            ``()``, ``(d1,)`` or ``(d1, d2)`` at T.
        prediction : ndarray or None
            The polynomial at T+H (None unless ``predict``: the inputs do not need it).
        """
        hist = self.points[key]
        y = hist[-1][1]
        order = min(self.order, len(hist) - 1)
        if self.held(key, H):
            order = 0
        if order == 0:
            return y, (), y
        (t1, y1), (t0, y0) = hist[-1], hist[-2]
        f01 = (y1 - y0) / (t1 - t0)
        if order == 1:
            return y, (f01,), (y + f01 * H if predict else None)
        tm, ym = hist[-3]
        f12 = (y0 - ym) / (t0 - tm)
        f012 = (f01 - f12) / (t1 - tm)
        d1 = f01 + f012 * (t1 - t0)
        d2 = 2.0 * f012
        return y, (d1, d2), (y + d1 * H + f012 * H * H if predict else None)

    def interpolate(self, key: tuple[str, str], y: np.ndarray, y_end: np.ndarray,
                    H: float) -> tuple:
        """Derivatives at T of the input over ``[T, T+H]`` when the driving unit already
        stepped (Gauss–Seidel): the polynomial through the value ``y`` at T, ``y_end`` at
        T+H and, for degree 2, the value at the previous macro point.

        The input at T is ``y`` whatever the degree, so a unit sampling its inputs at macro
        points sees what the monolithic run shows; degree 0 and a held output (constant over
        the step, see :meth:`held`) stay at ``y``. Degree 2 is the quadratic through three
        points, so Gauss–Seidel keeps the order 3 of extrapolation 2.

        Returns
        -------
        tuple of ndarray
            ``()``, ``(d1,)`` or ``(d1, d2)``, each of the port's shape.
        """
        hist = self.points[key]
        order = 0 if self.held(key, H) else min(self.order, len(hist))
        if order == 0:
            return ()
        f01 = (y_end - y) / H
        if order == 1:
            return (f01,)
        (t1, _), (t0, y0) = hist[-1], hist[-2]
        f012 = (f01 - (y - y0) / (t1 - t0)) / (t1 + H - t0)
        return (f01 - f012 * H, 2.0 * f012)

    def held_at_end(self, ports, H: float, cand: dict) -> P.SetInputs | None:
        """The inputs of a unit in an iterated coupling at the end of the step, T+H, that
        come from held coupling outputs (:meth:`held`): their candidates, the values of the
        sample hit at T+H (over the step they stayed at T, see :meth:`inputs`); None when
        the unit has no such input.

        Parameters
        ----------
        ports : list of (str, (str, str))
            The unit's inputs and the outputs driving them (``UnitGraph.inputs[unit]``).
        cand : dict
            Coupling candidates at T+H.
        """
        vals = {name: cand[key] for name, key in ports
                if key in cand and self.held(key, H)}
        return P.SetInputs(vals, {}) if vals else None

    def inputs(self, ports, values: dict, H: float, fresh: dict, cand: dict) -> P.SetInputs:
        """A unit's inputs over ``[T, T+H]`` (:meth:`each`, as a SetInputs).

        Returns
        -------
        SetInputs
            Values at T and derivatives; inputs from other outputs are extrapolated.
        """
        vals, ders = {}, {}
        for name, y, d in self.each(ports, values, H, fresh, cand):
            vals[name] = y
            if d:
                ders[name] = d
        return P.SetInputs(vals, ders)

    def each(self, ports, values: dict, H: float, fresh: dict, cand: dict):
        """A unit's inputs over ``[T, T+H]``, one ``(input, value at T, derivatives at T)``
        after the other (derivatives: a tuple of 0-2 arrays of the port's shape).

        Parameters
        ----------
        ports : list of (str, (str, str))
            The unit's inputs and the outputs driving them (``UnitGraph.inputs[unit]``).
        values : dict
            Every output's value at T.
        fresh : dict
            Outputs already computed for T+H (Gauss–Seidel): inputs are interpolated to them
            (:meth:`interpolate`).
        cand : dict
            Coupling candidates at T+H (iteration): inputs ramp to them, except from a
            held output (:meth:`held`), which stays at its value at T as in every other
            exchange: it changes only at its next sample hit, T+H itself. Inputs from other
            outputs are extrapolated.
        """
        for name, key in ports:
            y = values[key]
            if key in cand:
                yield name, y, (() if self.held(key, H) else ((cand[key] - y) / H,))
            elif key in fresh:
                yield name, y, self.interpolate(key, y, fresh[key], H)
            else:
                y, d, _ = self.extrapolate(key, H, predict=False)
                yield name, y, d


class _Upto(Mapping):
    """``base``'s points of every output, then the first ``k`` of ``later``'s (the last
    :data:`KEPT`): :meth:`PortHistory.ahead`."""

    def __init__(self, base: dict, later: dict, k: int):
        self.base, self.later, self.k = base, later, k

    def __getitem__(self, key):
        new = self.later.get(key)
        if not new:
            return self.base[key]
        return (self.base[key] + new[:self.k])[-KEPT:]

    def __iter__(self):
        return iter(self.base)

    def __len__(self) -> int:
        return len(self.base)


class _Latest(Mapping):
    """Every output's value at the latest macro point of ``points``."""

    def __init__(self, points: Mapping):
        self.points = points

    def __getitem__(self, key):
        return self.points[key][-1][1]

    def __iter__(self):
        return iter(self.points)

    def __len__(self) -> int:
        return len(self.points)
