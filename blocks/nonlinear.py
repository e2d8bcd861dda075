"""Nonlinear static maps (Simulink's Discontinuities, Lookup Tables and Signal Routing):
Saturation, DeadZone, Lookup1D, Switch. All are element-wise, memoryless and have direct
feedthrough; NaN inputs give NaN (a NaN control of a Switch selects ``in3``).

A ``(1,)`` signal is computed in Python floats (several times faster than numpy on one
element), a larger one with numpy; both spell the same operations, so the values agree bit for
bit — with each other and with the fast-path kernel.
"""

from __future__ import annotations

import numpy as np

from blocks._support import (KERNEL_MAX_SEGMENTS, Params, clip_array, clip_expr, clip_float,
                             interp_array, interp_expr, interp_at, lit, read_only,
                             segment_slopes)
from cosim.block import Block, Kernel

__all__ = ["DeadZone", "Lookup1D", "Saturation", "Switch"]


class Saturation(Block):
    """Limits a signal to ``[lower, upper]``: ``out = min(max(in, lower), upper)``.

    Parameters
    ----------
    name : str
    lower, upper : float or array_like or None
        Limits (None: unbounded on that side), broadcastable with the input;
        ``lower <= upper``.

    Ports
    -----
    in : any shape
    out : broadcast shape of ``in`` and the limits

    Notes
    -----
    Direct feedthrough. Fast-path kernel for scalar limits.
    """

    def __init__(self, name: str, lower=-1.0, upper=1.0, **kw):
        super().__init__(name, **kw)
        self.lower, self.upper = Params(self, name).limits(lower, upper)
        self._scalar_limits = not isinstance(self.lower, np.ndarray) \
            and not isinstance(self.upper, np.ndarray)

    def output_update(self, t, dt):
        u = self.inputs["in"]
        if u.shape == (1,) and self._scalar_limits:
            self.outputs["out"] = np.array([clip_float(float(u[0]), self.lower, self.upper)])
        else:
            self.outputs["out"] = clip_array(u, self.lower, self.upper)

    def kernel(self):
        if not self._scalar_limits:
            return None
        return Kernel({"out": clip_expr("u_in", self.lower, self.upper)})


class DeadZone(Block):
    """Zero output inside ``[start, end]``, the input shifted towards zero outside.

    ``out = in - start`` for ``in < start``, ``0`` for ``start <= in <= end``,
    ``in - end`` for ``in > end`` (Simulink's Dead Zone); computed as
    ``in - clip(in, start, end)``.

    Parameters
    ----------
    name : str
    start, end : float
        Edges of the dead zone, ``start <= end``.

    Ports
    -----
    in : any shape
    out : shape of ``in``

    Notes
    -----
    Direct feedthrough. Fast-path kernel: yes.
    """

    def __init__(self, name: str, start=-0.5, end=0.5, **kw):
        super().__init__(name, **kw)
        p = Params(self, name)
        self.start = p.real("start", start)
        self.end = p.real("end", end)
        if self.start > self.end:
            raise p.error("start/end", f"must satisfy start <= end, got {start!r} and {end!r}")

    def output_update(self, t, dt):
        u = self.inputs["in"]
        if u.shape == (1,):
            v = float(u[0])
            self.outputs["out"] = np.array([v - clip_float(v, self.start, self.end)])
        else:
            self.outputs["out"] = u - clip_array(u, self.start, self.end)

    def kernel(self):
        return Kernel({"out": f"(u_in - {clip_expr('u_in', self.start, self.end)})"})


class Lookup1D(Block):
    """One-dimensional lookup table with linear interpolation (Simulink's 1-D Lookup Table).

    Inside the table, ``out = table[j] + slope[j]*(in - breakpoints[j])`` on the segment
    ``breakpoints[j] <= in < breakpoints[j+1]`` (numpy.interp's formula); at the last
    breakpoint ``table[-1]``.

    Parameters
    ----------
    name : str
    breakpoints : array_like, shape (n,)
        Strictly increasing, n >= 2.
    table : array_like, shape (n,)
        Output at each breakpoint.
    extrapolation : {"clip", "linear"}
        Outside the breakpoints: hold the end values (as numpy.interp), or extend the end
        segments' lines.

    Ports
    -----
    in : any shape
    out : shape of ``in``

    Notes
    -----
    Direct feedthrough. Fast-path kernel with at most 64 breakpoints.
    """

    def __init__(self, name: str, breakpoints, table, extrapolation="clip", **kw):
        super().__init__(name, **kw)
        p = Params(self, name)
        self.breakpoints = read_only(p.array("breakpoints", breakpoints, ndim=1))
        self.table = read_only(p.array("table", table, ndim=1))
        self.extrapolation = p.choice("extrapolation", extrapolation, ("clip", "linear"))
        if len(self.breakpoints) < 2 or np.any(np.diff(self.breakpoints) <= 0):
            raise p.error("breakpoints", "must be strictly increasing with at least 2 "
                                         f"points, got {breakpoints!r}")
        if self.table.shape != self.breakpoints.shape:
            raise p.error("table", f"must have the shape of breakpoints "
                                   f"{self.breakpoints.shape}, got {self.table.shape}")
        self._slope = segment_slopes(self.breakpoints, self.table)
        self._extrapolate = self.extrapolation == "linear"
        self._lists = (self.breakpoints.tolist(), self.table.tolist(), self._slope.tolist())

    def output_update(self, t, dt):
        u = self.inputs["in"]
        if u.shape == (1,):
            self.outputs["out"] = np.array([interp_at(float(u[0]), *self._lists,
                                                         self._extrapolate)])
        else:
            self.outputs["out"] = interp_array(u, self.breakpoints, self.table, self._slope,
                                               self._extrapolate)

    def kernel(self):
        if len(self.breakpoints) > KERNEL_MAX_SEGMENTS:
            return None
        return Kernel({"out": interp_expr("u_in", self.breakpoints, self.table, self._slope,
                                          self._extrapolate)})


class Switch(Block):
    """Passes ``in1`` where the control ``in2`` meets the criterion, else ``in3``.

    Parameters
    ----------
    name : str
    criterion : {">=", ">", "!="}
        ``in2 >= threshold``, ``in2 > threshold`` or ``in2 != 0`` (Simulink's three).
    threshold : float
        Ignored by ``"!="``.

    Ports
    -----
    in1, in3 : data inputs, broadcastable with ``in2``
    in2 : control input
    out : broadcast shape

    Notes
    -----
    Direct feedthrough from all three inputs. Element-wise; the output switches at a sample
    hit (it does not locate the crossing: use a ZeroCrossing event for that). Fast-path
    kernel: yes.
    """

    _TESTS = {">=": "{u} >= {c}", ">": "{u} > {c}", "!=": "{u} != 0.0"}

    def __init__(self, name: str, criterion: str = ">=", threshold: float = 0.0, **kw):
        p = Params(self, name)
        p.choice("criterion", criterion, tuple(self._TESTS))
        super().__init__(name, inputs=("in1", "in2", "in3"), **kw)
        self.criterion = criterion
        self.threshold = p.real("threshold", threshold)

    def _passes(self, u):
        if self.criterion == ">=":
            return u >= self.threshold
        if self.criterion == ">":
            return u > self.threshold
        return u != 0.0

    def output_update(self, t, dt):
        ins = self.inputs
        a, c, b = ins["in1"], ins["in2"], ins["in3"]
        if a.shape == c.shape == b.shape == (1,):
            self.outputs["out"] = (a if self._passes(float(c[0])) else b).copy()
        else:
            self.outputs["out"] = np.where(self._passes(c), a, b)

    def kernel(self):
        test = self._TESTS[self.criterion].format(u="u_in2", c=lit(self.threshold))
        return Kernel({"out": f"(u_in1 if {test} else u_in3)"})
