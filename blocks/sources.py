"""Sources: blocks without inputs whose output is a function of time.

No source has direct feedthrough (there are no inputs). Time switches — Step, the edges of
Pulse and Square, FromArray's "zoh" and "nearest" samples — are decided on ``t + TIME_TOL*dt``
(``TIME_TOL = 1e-9`` sample periods), so a switch time that falls on a tick is hit at that tick
although ``t = t0 + k*dt`` is rounded (``0.1 + 7*0.1 < 0.8``).
"""

from __future__ import annotations

import math
from bisect import bisect_right

import numpy as np

from blocks._support import (KERNEL_MAX_SEGMENTS, TIME_TOL, Params, interp_at, interp_expr,
                             lit, read_only, segment_slopes)
from cosim.model.block import Block, Kernel

__all__ = ["Clock", "Constant", "FromArray", "Pulse", "Ramp", "Sine", "Square", "Step",
           "WhiteNoise"]


class Constant(Block):
    """A constant signal.

    Parameters
    ----------
    name : str
    value : float or array_like
        The output value; its shape is the output shape (a scalar gives ``(1,)``).
    allow_nonfinite : bool
        Let ``value`` hold NaN or infinities (refused by default, as in every block: a
        non-finite parameter is almost always a mistake).

    Ports
    -----
    out : shape of ``value``

    Notes
    -----
    No direct feedthrough. Fast-path kernel when ``value`` is a scalar.
    """

    input_ports = ()
    direct_feedthrough = False

    def __init__(self, name: str, value=0.0, allow_nonfinite: bool = False, **kw):
        p = Params(self, name)
        super().__init__(name, **kw)
        self.value = p.array("value", value, finite=not allow_nonfinite)
        self.value.flags.writeable = False   # shared by every tick's output: keep it a value

    def initialize(self, t0):
        self.outputs["out"] = self.value

    def output_update(self, t, dt):
        self.outputs["out"] = self.value

    def kernel(self):
        if self.value.shape != (1,):
            return None
        return Kernel({"out": lit(self.value[0])})


class Sine(Block):
    """``amplitude * sin(2*pi*frequency*t + phase) + bias``.

    Parameters
    ----------
    name : str
    amplitude : float
    frequency : float
        Hz.
    phase : float
        rad.
    bias : float

    Ports
    -----
    out : (1,)

    Notes
    -----
    No direct feedthrough. Fast-path kernel: yes (``math.sin`` in both paths).
    """

    input_ports = ()
    direct_feedthrough = False

    def __init__(self, name: str, amplitude=1.0, frequency=1.0, phase=0.0, bias=0.0, **kw):
        super().__init__(name, **kw)
        p = Params(self, name)
        self.amplitude, self.frequency, self.phase, self.bias = (
            p.real(pname, v) for pname, v in (("amplitude", amplitude), ("frequency", frequency),
                                             ("phase", phase), ("bias", bias)))
        self._w = 2.0 * math.pi * self.frequency

    def output_update(self, t, dt):
        self.outputs["out"] = np.array(
            [self.amplitude * math.sin(self._w * t + self.phase) + self.bias])

    def kernel(self):
        return Kernel({"out": f"{lit(self.amplitude)} * math.sin({lit(self._w)} * t + "
                              f"{lit(self.phase)}) + {lit(self.bias)}"})


def _broadcast_pair(p: Params, a_name, a, b_name, b):
    """Two signal parameters broadcast to one shape, as read-only arrays."""
    a, b = p.array(a_name, a), p.array(b_name, b)
    try:
        shape = np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise p.error(f"{a_name}/{b_name}", f"must have broadcastable shapes, got {a.shape} "
                                            f"and {b.shape}") from None
    return read_only(np.broadcast_to(a, shape)), read_only(np.broadcast_to(b, shape))


class Step(Block):
    """A step from ``initial`` to ``final`` at ``step_time`` (Simulink's Step).

    ``out(t) = initial`` for ``t < step_time`` and ``final`` for ``t >= step_time``.

    Parameters
    ----------
    name : str
    step_time : float
        Time of the step (s).
    initial, final : float or array_like
        Values before and from the step; broadcast to one shape.

    Ports
    -----
    out : broadcast shape of ``initial`` and ``final`` (``(1,)`` for scalars)

    Notes
    -----
    No direct feedthrough. Fast-path kernel when the output is scalar.
    """

    input_ports = ()
    direct_feedthrough = False

    def __init__(self, name: str, step_time=1.0, initial=0.0, final=1.0, **kw):
        super().__init__(name, **kw)
        p = Params(self, name)
        self.step_time = p.real("step_time", step_time)
        self.initial, self.final = _broadcast_pair(p, "initial", initial, "final", final)

    def output_update(self, t, dt):
        self.outputs["out"] = self.final if t + TIME_TOL * dt >= self.step_time \
            else self.initial

    def kernel(self):
        if self.final.shape != (1,):
            return None
        return Kernel({"out": f"({lit(self.final[0])} if t + {TIME_TOL!r} * dt >= "
                              f"{lit(self.step_time)} else {lit(self.initial[0])})"})


class Ramp(Block):
    """A ramp: ``initial`` until ``start_time``, then ``initial + slope*(t - start_time)``.

    Parameters
    ----------
    name : str
    slope : float or array_like
        Units per second.
    start_time : float
        Time the ramp starts (s).
    initial : float or array_like
        Output before the start; broadcast with ``slope`` to one shape.

    Ports
    -----
    out : broadcast shape of ``slope`` and ``initial`` (``(1,)`` for scalars)

    Notes
    -----
    No direct feedthrough. Fast-path kernel when the output is scalar.
    """

    input_ports = ()
    direct_feedthrough = False

    def __init__(self, name: str, slope=1.0, start_time=0.0, initial=0.0, **kw):
        super().__init__(name, **kw)
        p = Params(self, name)
        self.start_time = p.real("start_time", start_time)
        self.slope, self.initial = _broadcast_pair(p, "slope", slope, "initial", initial)

    def output_update(self, t, dt):
        if t > self.start_time:
            self.outputs["out"] = self.initial + self.slope * (t - self.start_time)
        else:
            self.outputs["out"] = self.initial

    def kernel(self):
        if self.slope.shape != (1,):
            return None
        s, i, t0 = lit(self.slope[0]), lit(self.initial[0]), lit(self.start_time)
        return Kernel({"out": f"({i} + {s} * (t - {t0}) if t > {t0} else {i})"})


class _PeriodicPulse(Block):
    """Rectangular wave between a high and a low level (the shared part of Pulse, Square).

    With ``c = (t - delay) / period`` (evaluated at ``t + TIME_TOL*dt``), the output is high
    when ``c - floor(c) < duty`` — and, for a pulse, ``c >= 0``.
    """

    input_ports = ()
    direct_feedthrough = False
    _low_before_delay = True      # Pulse: low until ``delay``; Square: periodic for all t

    def __init__(self, name: str, amplitude=1.0, period=1.0, duty=0.5, delay=0.0, bias=0.0,
                 **kw):
        super().__init__(name, **kw)
        p = Params(self, name)
        self.amplitude = p.real("amplitude", amplitude)
        self.period = p.real("period", period, positive=True)
        self.duty = p.real("duty", duty, nonnegative=True)
        if self.duty > 1.0:
            raise p.error("duty", f"must be a fraction of the period in [0, 1], got {duty!r}")
        self.delay = p.real("delay", delay)
        self.bias = p.real("bias", bias)
        self._high = self.bias + self.amplitude
        self._low = self.bias if self._low_before_delay else self.bias - self.amplitude
        self._high_out, self._low_out = read_only([self._high]), read_only([self._low])

    def output_update(self, t, dt):
        c = (t + TIME_TOL * dt - self.delay) / self.period
        high = c - math.floor(c) < self.duty and (c >= 0.0 or not self._low_before_delay)
        self.outputs["out"] = self._high_out if high else self._low_out

    def kernel(self):
        c = f"((t + {TIME_TOL!r} * dt - {lit(self.delay)}) / {lit(self.period)})"
        cond = f"{c} - math.floor({c}) < {lit(self.duty)}"
        if self._low_before_delay:
            cond += f" and {c} >= 0.0"
        return Kernel({"out": f"({lit(self._high)} if {cond} else {lit(self._low)})"})


class Pulse(_PeriodicPulse):
    """A pulse train (Simulink's time-based Pulse Generator).

    ``bias`` until ``delay``; from then on ``bias + amplitude`` for the first ``duty`` fraction
    of every ``period`` and ``bias`` for the rest.

    Parameters
    ----------
    name : str
    amplitude : float
        Height of the pulses above ``bias``.
    period : float
        Seconds, > 0.
    duty : float
        Fraction of the period the pulse is high, in [0, 1].
    delay : float
        Time of the first rising edge (s).
    bias : float
        Low level.

    Ports
    -----
    out : (1,)

    Notes
    -----
    No direct feedthrough. Fast-path kernel: yes.
    """


class Square(_PeriodicPulse):
    """A square wave between ``bias - amplitude`` and ``bias + amplitude``.

    High for the first ``duty`` fraction of every period, periodic for all t (``delay`` shifts
    the wave: the rising edges are at ``delay + n*period`` for every integer n).

    Parameters
    ----------
    name : str
    amplitude : float
        Half the peak-to-peak height.
    period : float
        Seconds, > 0.
    duty : float
        Fraction of the period the wave is high, in [0, 1].
    delay : float
        Time of a rising edge (s).
    bias : float
        Mean level for ``duty = 0.5``.

    Ports
    -----
    out : (1,)

    Notes
    -----
    No direct feedthrough. Fast-path kernel: yes.
    """

    _low_before_delay = False


class Clock(Block):
    """The simulation time: ``out = t``.

    Parameters
    ----------
    name : str

    Ports
    -----
    out : (1,)
        Seconds.

    Notes
    -----
    No direct feedthrough. Fast-path kernel: yes. With a ``sample_time`` the clock holds the
    time of its last sample hit.
    """

    input_ports = ()
    direct_feedthrough = False

    def output_update(self, t, dt):
        self.outputs["out"] = np.array([t])

    def kernel(self):
        return Kernel({"out": "t"})


class WhiteNoise(Block):
    """Gaussian white noise, one independent draw per sample hit.

    The draw at time ``t`` comes from a generator seeded with ``(seed, k)``, ``k = round(t /
    period)``: the sequence depends on nothing but the seed and the sample times, so a restart,
    a checkpoint, a co-simulation rollback or another backend give the same numbers, with no
    generator state to save.

    Parameters
    ----------
    name : str
    mean, std : float
        Mean and standard deviation (``std >= 0``).
    seed : int
        Non-negative.
    width : int
        Number of independent channels.

    Ports
    -----
    out : (width,)

    Notes
    -----
    No direct feedthrough. Give it a ``sample_time``: the noise's bandwidth is set by its
    sample rate. Reference interpreter only (it draws from numpy's generator).
    """

    input_ports = ()
    direct_feedthrough = False

    def __init__(self, name: str, mean: float = 0.0, std: float = 1.0, seed: int = 0,
                 width: int = 1, **kw):
        p = Params(self, name)
        super().__init__(name, **kw)
        self.mean = p.real("mean", mean)
        self.std = p.real("std", std, nonnegative=True)
        self.seed = p.count("seed", seed, minimum=0)
        self.width = p.count("width", width)

    def output_update(self, t, dt):
        k = round(t / dt)
        # SeedSequence takes non-negative integers: a negative tick (t < 0) maps to odd ones.
        key = 2 * k if k >= 0 else -2 * k - 1
        self.outputs["out"] = np.random.default_rng([self.seed, key]).normal(
            self.mean, self.std, self.width)


_INTERPOLATIONS = ("linear", "zoh", "nearest")


class FromArray(Block):
    """A signal given as samples (Simulink's From Workspace), held beyond its ends.

    Parameters
    ----------
    name : str
    times : array_like, shape (n,)
        Sample times (s), strictly increasing, n >= 1.
    values : array_like, shape (n,) or (n, m)
        Sample values; row ``i`` is the value at ``times[i]``.
    interpolation : {"linear", "zoh", "nearest"}
        Between samples: linear interpolation (numpy.interp's formula); hold the last
        sample at or before ``t`` (zero-order hold); or the nearest sample (ties go to the
        later one).

    Ports
    -----
    out : (1,) for 1-D ``values``, (m,) for 2-D

    Notes
    -----
    Before ``times[0]`` the output is ``values[0]`` and after ``times[-1]`` it is
    ``values[-1]`` (extrapolation by holding, for every interpolation). No direct feedthrough.
    Fast-path kernel for 1-D ``values`` with at most 64 samples.
    """

    input_ports = ()
    direct_feedthrough = False

    def __init__(self, name: str, times, values, interpolation="linear", **kw):
        super().__init__(name, **kw)
        p = Params(self, name)
        self.times = read_only(p.array("times", times, ndim=1))
        self.values = read_only(p.array("values", values))
        self.interpolation = p.choice("interpolation", interpolation, _INTERPOLATIONS)
        n = len(self.times)
        if np.any(np.diff(self.times) <= 0):
            raise p.error("times", "must be strictly increasing")
        if self.values.ndim > 2 or len(self.values) != n:
            raise p.error("values", f"must have shape ({n},) or ({n}, m) to match times, got "
                                    f"{self.values.shape}")
        rows = self.values.reshape(n, -1)
        self._rows = [read_only(r) for r in rows]
        self._t = self.times.tolist()
        self._slope = segment_slopes(self.times, rows)
        self._mid = ((self.times[:-1] + self.times[1:]) / 2.0).tolist()

    def output_update(self, t, dt):
        if self.interpolation == "linear":
            out = interp_at(t, self._t, self._rows, self._slope, extrapolate=False)
        elif self.interpolation == "zoh":
            out = self._rows[max(bisect_right(self._t, t + TIME_TOL * dt) - 1, 0)]
        else:
            out = self._rows[bisect_right(self._mid, t + TIME_TOL * dt)]
        self.outputs["out"] = out

    def kernel(self):
        n = len(self._t)
        if self._rows[0].shape != (1,) or n > KERNEL_MAX_SEGMENTS:
            return None
        v = [float(r[0]) for r in self._rows]
        if self.interpolation == "linear":
            return Kernel({"out": interp_expr("t", self._t, v, self._slope[:, 0],
                                              extrapolate=False)})
        te = f"t + {TIME_TOL!r} * dt"
        # The sample in force: the last j with edge[j] <= t + TIME_TOL*dt, tested from the top.
        edges = self._t[1:] if self.interpolation == "zoh" else self._mid
        parts = [f"{lit(v[j + 1])} if {te} >= {lit(edges[j])}" for j in reversed(range(n - 1))]
        return Kernel({"out": "(" + " else ".join(parts + [lit(v[0])]) + ")"})
