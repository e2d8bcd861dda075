"""Nonlinear maps (Simulink's Discontinuities, Lookup Tables and Signal Routing): Saturation,
DeadZone, Lookup1D, Lookup2D, Switch, and two with memory, RateLimiter and Relay. All are
element-wise and have direct feedthrough; NaN inputs give NaN (a NaN control of a Switch
selects ``in3``).

A ``(1,)`` signal is computed in Python floats (several times faster than numpy on one
element), a larger one with numpy; both spell the same operations, so the values agree bit for
bit — with each other and with the fast-path kernel.
"""

from __future__ import annotations

import numpy as np

from blocks._support import (KERNEL_MAX_SEGMENTS, Params, clip_array, clip_expr, clip_float,
                             grid_axis, grid_fraction, grid_fraction_array, interp_array,
                             interp_expr, interp_at, lit, read_only, segment_slopes)
from cosim.model.block import Block, Kernel

__all__ = ["DeadZone", "Lookup1D", "Lookup2D", "RateLimiter", "Relay", "Saturation", "Switch"]


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


class Lookup2D(Block):
    """Two-dimensional lookup table with bilinear interpolation (Simulink's 2-D Lookup Table;
    scipy's ``RegularGridInterpolator(method="linear")``).

    ``table[i, j]`` is the output at ``(breakpoints1[i], breakpoints2[j])``; ``in1`` runs
    along ``breakpoints1``, ``in2`` along ``breakpoints2``. In the cell ``i, j`` (``i`` the
    last with ``breakpoints1[i] <= in1``, at most ``n1 - 2``; likewise ``j``) with fractions
    ``p = (in1 - breakpoints1[i]) / (breakpoints1[i+1] - breakpoints1[i])`` and ``q`` along
    ``in2``::

        out = (1 - p) * ((1 - q) * table[i, j] + q * table[i, j+1])
              + p * ((1 - q) * table[i+1, j] + q * table[i+1, j+1])

    (scipy's weights: the table's values at its breakpoints exactly).

    Parameters
    ----------
    name : str
    breakpoints1 : array_like, shape (n1,)
        Strictly increasing, n1 >= 2.
    breakpoints2 : array_like, shape (n2,)
        Strictly increasing, n2 >= 2.
    table : array_like, shape (n1, n2)
        Output at each pair of breakpoints.
    extrapolation : {"clip", "linear"}
        Outside the breakpoints: ``"clip"`` holds the edges (each fraction limited to
        ``[0, 1]``: the value at the inputs clipped to the grid, as
        ``RegularGridInterpolator`` on clipped points); ``"linear"`` extends the edge cells'
        bilinear forms (``RegularGridInterpolator(..., bounds_error=False,
        fill_value=None)``).

    Ports
    -----
    in1, in2 : broadcastable shapes
    out : the broadcast shape

    Notes
    -----
    Direct feedthrough from both inputs. Agrees with scipy's ``RegularGridInterpolator`` to
    rounding (the same bilinear form, evaluated in this order); a NaN input gives NaN.
    Fast-path kernel with at most 256 cells ``(n1 - 1) * (n2 - 1)``; an ensemble gathers
    each member's own table (:mod:`cosim.fastpath.ensemble`).
    """

    #: Most cells ``(n1 - 1) * (n2 - 1)`` of a table with a fast-path kernel (its expression
    #: holds a branch per cell).
    KERNEL_MAX_CELLS = 256

    def __init__(self, name: str, breakpoints1, breakpoints2, table, extrapolation="clip",
                 **kw):
        p = Params(self, name)
        super().__init__(name, inputs=("in1", "in2"), **kw)
        self.breakpoints1 = read_only(p.array("breakpoints1", breakpoints1, ndim=1))
        self.breakpoints2 = read_only(p.array("breakpoints2", breakpoints2, ndim=1))
        self.table = read_only(p.array("table", table, ndim=2))
        self.extrapolation = p.choice("extrapolation", extrapolation, ("clip", "linear"))
        for param, bp in (("breakpoints1", self.breakpoints1),
                          ("breakpoints2", self.breakpoints2)):
            if len(bp) < 2 or np.any(np.diff(bp) <= 0):
                raise p.error(param, "must be strictly increasing with at least 2 points, "
                                     f"got {bp.tolist()!r}")
        shape = (len(self.breakpoints1), len(self.breakpoints2))
        if self.table.shape != shape:
            raise p.error("table", f"must have shape {shape} (breakpoints1 by breakpoints2), "
                                   f"got {self.table.shape}")
        self._axes = (grid_axis(self.breakpoints1), grid_axis(self.breakpoints2))
        self._rows = self.table.tolist()
        self._clip = self.extrapolation == "clip"

    def output_update(self, t, dt):
        a, b = self.inputs["in1"], self.inputs["in2"]
        if a.shape == b.shape == (1,):
            self.outputs["out"] = np.array([self._at(float(a[0]), float(b[0]))])
            return
        a, b = np.broadcast_arrays(a, b)
        i, p = grid_fraction_array(a, *self._axes[0], self._clip)
        j, q = grid_fraction_array(b, *self._axes[1], self._clip)
        tb = self.table
        self.outputs["out"] = (1.0 - p) * ((1.0 - q) * tb[i, j] + q * tb[i, j + 1]) + \
            p * ((1.0 - q) * tb[i + 1, j] + q * tb[i + 1, j + 1])

    def _at(self, u1: float, u2: float) -> float:
        """The output at one point (Python floats, the kernel's operations)."""
        i, p = grid_fraction(u1, *self._axes[0], self._clip)
        j, q = grid_fraction(u2, *self._axes[1], self._clip)
        tb = self._rows
        return (1.0 - p) * ((1.0 - q) * tb[i][j] + q * tb[i][j + 1]) + \
            p * ((1.0 - q) * tb[i + 1][j] + q * tb[i + 1][j + 1])

    def kernel(self):
        n1, n2 = len(self.breakpoints1), len(self.breakpoints2)
        if (n1 - 1) * (n2 - 1) > self.KERNEL_MAX_CELLS:
            return None
        # Every value a named parameter: a value used in several cells (a breakpoint, the
        # limits 0 and 1) is one name, so an ensemble's translation sees it shared.
        params = {"zero": 0.0, "one": 1.0}
        fractions = []
        for axis, (x, dx) in enumerate(self._axes):
            fr = []
            for i in range(len(dx)):
                params[f"x{axis}_{i}"], params[f"d{axis}_{i}"] = x[i], dx[i]
                f = f"(u_in{axis + 1} - p_x{axis}_{i}) / p_d{axis}_{i}"
                fr.append(f"min(max({f}, p_zero), p_one)" if self._clip else f"({f})")
            fractions.append(fr)
        params.update((f"t{i}_{j}", v) for i, row in enumerate(self._rows)
                      for j, v in enumerate(row))

        def cell(i: int, j: int) -> str:
            p, q = fractions[0][i], fractions[1][j]
            return (f"(p_one - {p}) * ((p_one - {q}) * p_t{i}_{j} + {q} * p_t{i}_{j + 1}) + "
                    f"{p} * ((p_one - {q}) * p_t{i + 1}_{j} + {q} * p_t{i + 1}_{j + 1})")

        def chain(var: str, axis: int, branch) -> str:
            # The cell of ``var``: the first ``var < x[k+1]``, else the last (NaN too).
            cells = len(self._axes[axis][1])
            parts = [f"({branch(k)}) if {var} < p_x{axis}_{k + 1}" for k in range(cells - 1)]
            return "(" + " else ".join(parts + [f"({branch(cells - 1)})"]) + ")"
        for axis, (x, _) in enumerate(self._axes):
            params[f"x{axis}_{len(x) - 1}"] = x[-1]
        out = chain("u_in1", 0, lambda i: chain("u_in2", 1, lambda j: cell(i, j)))
        return Kernel({"out": out}, params=params)


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


class RateLimiter(Block):
    """Limits how fast a signal may rise and fall, per sample:
    ``out[k] = out[k-1] + clip(in[k] - out[k-1], -falling*dt, rising*dt)``.

    Parameters
    ----------
    name : str
    rising, falling : float
        Largest rates of rise and of fall (units per second), both > 0.

    Ports
    -----
    in : (1,)
    out : (1,)

    Notes
    -----
    Direct feedthrough. The first sample passes the input unchanged (Simulink's choice);
    ``dt`` is the block's sample period. Fast-path kernel: yes.
    """

    def __init__(self, name: str, rising: float = 1.0, falling: float = 1.0, **kw):
        p = Params(self, name)
        super().__init__(name, **kw)
        self.rising = p.real("rising", rising, positive=True)
        self.falling = p.real("falling", falling, positive=True)
        self.input_shapes["in"] = (1,)

    def initialize(self, t0):
        self.state["y"] = np.zeros(1)
        self.state["started"] = np.zeros(1)

    def output_update(self, t, dt):
        u = float(self.inputs["in"][0])
        if self.state["started"][0] == 0.0:
            self.outputs["out"] = np.array([u])
            return
        y = float(self.state["y"][0])
        step = clip_float(u - y, -self.falling * dt, self.rising * dt)
        self.outputs["out"] = np.array([y + step])

    def state_update(self, t, dt):
        self.next_state["y"] = self.outputs["out"].copy()
        self.next_state["started"] = np.ones(1)

    def kernel(self):
        lo, hi = f"-{lit(self.falling)} * dt", f"{lit(self.rising)} * dt"
        step = f"max(min(u_in - x_y, {hi}), {lo})"
        out = f"(u_in if x_started == 0.0 else x_y + {step})"
        return Kernel({"out": out}, {"y": out, "started": "1.0"})


class Relay(Block):
    """On/off with hysteresis: switches on when ``in >= on_point``, off when
    ``in <= off_point``, and otherwise keeps its state.

    Parameters
    ----------
    name : str
    on_point, off_point : float
        Switching thresholds, ``off_point <= on_point``.
    on_value, off_value : float
        Output in each state.

    Ports
    -----
    in : (1,)
    out : (1,)

    Notes
    -----
    Direct feedthrough (the state follows the current input). Starts off. Evaluated at
    solver stages (fed by continuous state), it holds its on/off mode through each solver
    step and switches at the crossing located on the dense output (to 1e-12 s), so a relay
    in a continuous loop switches where the analytic solution does, with every solver; such a
    model runs on the interpreter, not the generated fast path (an ensemble's translated
    code holds the mode through its steps and runs the steps that switch on the
    interpreter, member by member). Fast-path kernel: yes.
    """

    def __init__(self, name: str, on_point: float = 0.5, off_point: float = -0.5,
                 on_value: float = 1.0, off_value: float = 0.0, **kw):
        p = Params(self, name)
        super().__init__(name, **kw)
        self.on_point = p.real("on_point", on_point)
        self.off_point = p.real("off_point", off_point)
        if self.off_point > self.on_point:
            raise p.error("off_point", f"must be <= on_point ({self.on_point}), got "
                                       f"{self.off_point}")
        self.on_value = p.real("on_value", on_value)
        self.off_value = p.real("off_value", off_value)
        self.input_shapes["in"] = (1,)

    def initialize(self, t0):
        self.state["on"] = np.zeros(1)

    def _on(self, u: float) -> bool:
        return u >= self.on_point or (self.state["on"][0] != 0.0 and u > self.off_point)

    def output_update(self, t, dt):
        on = self._on(float(self.inputs["in"][0]))
        self.outputs["out"] = np.array([self.on_value if on else self.off_value])

    def state_update(self, t, dt):
        self.next_state["on"] = np.array([1.0 if self._on(float(self.inputs["in"][0])) else 0.0])

    # In continuous time the on/off memory is a mode: held through a solver step's stages,
    # switched at the located crossing of the active threshold.
    def held_output_update(self, t, dt):
        on = self.state["on"][0] != 0.0
        self.outputs["out"] = np.array([self.on_value if on else self.off_value])

    def switch_surfaces(self, t):
        level = self.off_point if self.state["on"][0] != 0.0 else self.on_point
        return np.array([float(self.inputs["in"][0]) - level])

    def switch_mode(self, t):
        self.state["on"] = np.array([1.0 if self._on(float(self.inputs["in"][0])) else 0.0])

    def kernel(self):
        on = (f"(u_in >= {lit(self.on_point)} or "
              f"(x_on != 0.0 and u_in > {lit(self.off_point)}))")
        held = f"({lit(self.on_value)} if x_on != 0.0 else {lit(self.off_value)})"
        level = f"({lit(self.off_point)} if x_on != 0.0 else {lit(self.on_point)})"
        return Kernel({"out": f"({lit(self.on_value)} if {on} else {lit(self.off_value)})"},
                      {"on": f"(1.0 if {on} else 0.0)"}, held={"out": held},
                      surfaces=(f"u_in - {level}",))
