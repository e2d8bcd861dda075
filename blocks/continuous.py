"""Continuous-time blocks: their state is integrated by the simulator's solver.

Each block sets ``self.cstate`` (its initial continuous state, 1-D float64) in ``initialize``
and supplies ``derivative(t)``; the simulator integrates the concatenated state of all blocks
(bdsim's getstate0 / setstate / deriv). ``cstate`` is a view the solver overwrites, so outputs
are copies of it.
"""

from __future__ import annotations

import math

import numpy as np

from blocks._support import (Params, affine_expr, affine_terms, affine_value, clip_array,
                             clip_expr, clip_float, lit, state_space)
from cosim.model.block import Block, Kernel, as_signal
from cosim.errors import ModelError

__all__ = ["Derivative", "FirstOrderLag", "Integrator", "ODE", "PID", "StateSpace",
           "TransferFunction", "TransportDelay"]


class Integrator(Block):
    """``out = x``, ``dx/dt = in``, with optional limits and a reset input.

    Ports: ``in`` (shape of ``initial``), optional ``reset`` (scalar; a rising edge through
    zero at a tick sets ``x`` back to ``initial``); ``out`` (shape of ``initial``).

    Parameters
    ----------
    name : str
    initial : float or array_like
        Initial state; its length is the signal width.
    lower, upper : float, optional
        Limits: the state stops at a limit (its derivative is zeroed while it pushes outwards)
        and the output is clipped to them.
    """

    direct_feedthrough = False

    def __init__(self, name: str, initial=0.0, lower=None, upper=None, **kw):
        p = Params(self, name)
        super().__init__(name, inputs=("in", "reset"), **kw)
        self.optional_inputs = frozenset({"reset"})
        self.initial = p.array("initial", initial).ravel()
        self.lower = -np.inf if lower is None else p.bound("lower", lower)
        self.upper = np.inf if upper is None else p.bound("upper", upper)
        if not self.lower < self.upper:
            raise ModelError(f"Integrator {name!r}: need lower < upper, got {lower}, {upper}")
        self.limited = lower is not None or upper is not None
        self.input_shapes["in"] = self.initial.shape

    def initialize(self, t0):
        self.cstate = self.initial.copy()
        self.outputs["out"] = self.initial.copy()
        self.state["reset_prev"] = np.zeros(1)

    def output_update(self, t, dt):
        x = self.cstate
        if not self.limited:
            self.outputs["out"] = x.copy()
        elif x.shape == (1,):
            # The same selections as the kernel's clip (NaN and signed zeros included).
            self.outputs["out"] = np.array([clip_float(float(x[0]), self.lower, self.upper)])
        else:
            self.outputs["out"] = clip_array(x, self.lower, self.upper)

    def derivative(self, t):
        u = self.inputs["in"]
        if not self.limited:
            return u
        x = self.cstate
        return np.where(((x <= self.lower) & (u < 0)) | ((x >= self.upper) & (u > 0)), 0.0, u)

    def kernel(self):
        if self.initial.shape != (1,):
            return None
        reset = "reset" in self.inputs
        if not self.limited and not reset:
            return Kernel({"out": "c_0"}, {"reset_prev": "x_reset_prev"}, ("u_in",))
        if self.limited:
            out = clip_expr("c_0", self.lower, self.upper)
            lo, hi = lit(self.lower), lit(self.upper)
            held = f"(c_0 <= {lo} and u_in < 0.0) or (c_0 >= {hi} and u_in > 0.0)"
            derivative = f"(0.0 if {held} else u_in)"
        else:
            out, derivative = "c_0", "u_in"
        # state_update: clip, then a rising edge of reset through zero restarts the state.
        after = (f"({lit(self.initial[0])} if x_reset_prev <= 0.0 < u_reset else {out})"
                 if reset else out)
        return Kernel({"out": out}, {"reset_prev": "u_reset" if reset else "x_reset_prev"},
                      (derivative,), cstate=(after,))

    def state_update(self, t, dt):
        # Limits and resets act on the continuous state in place, between solver intervals.
        if self.limited:
            self.cstate[:] = clip_array(self.cstate, self.lower, self.upper)
        if "reset" in self.inputs:
            r = self.inputs["reset"]
            if self.state["reset_prev"][0] <= 0.0 < r[0]:
                self.cstate[:] = self.initial
            self.next_state["reset_prev"] = r.copy()


class StateSpace(Block):
    """Linear time-invariant system ``dx/dt = A x + B u``, ``y = C x + D u``.

    Parameters
    ----------
    name : str
    A : array_like, shape (n, n)
    B : array_like, shape (n, m)
    C : array_like, shape (p, n)
    D : array_like, shape (p, m), optional
        Zero by default.
    x0 : array_like, shape (n,), optional
        Initial state (zero by default).

    Ports
    -----
    in : (m,)
    out : (p,)

    Notes
    -----
    Direct feedthrough iff ``D`` has a nonzero entry (per instance). A single-input
    single-output system with at most 8 states evaluates each sum left to right over its
    nonzero coefficients in Python floats and has a fast-path kernel doing the same; larger
    systems use matrix products. The matrices are attributes (``A``, ``B``, ``C``, ``D``), so a
    linearisation can be checked against them.
    """

    direct_feedthrough = False

    def __init__(self, name: str, A, B, C, D=None, x0=None, **kw):
        super().__init__(name, **kw)
        self.A, self.B, self.C, self.D, self.x0 = state_space(Params(self, name), A, B, C, D,
                                                               x0)
        n = self.A.shape[0]
        shape_d = self.D.shape
        self.direct_feedthrough = bool(np.any(self.D != 0))
        self.input_shapes["in"] = (self.B.shape[1],)
        self._scalar = shape_d == (1, 1) and n <= 8
        if self._scalar:
            idx = range(n + 1)           # state j at index j, the input at index n
            self._y_terms = affine_terms(list(self.C[0]) + [self.D[0, 0]], idx)
            self._x_terms = [affine_terms(list(self.A[i]) + [self.B[i, 0]], idx)
                             for i in range(n)]

    def initialize(self, t0):
        self.cstate = self.x0.copy()

    def output_update(self, t, dt):
        if self._scalar:
            vals = [float(v) for v in self.cstate] + [
                float(self.inputs["in"][0]) if self.direct_feedthrough else 0.0]
            self.outputs["out"] = np.array([affine_value(self._y_terms, vals)])
        else:
            y = self.C @ self.cstate
            if self.direct_feedthrough:
                y = y + self.D @ self.inputs["in"]
            self.outputs["out"] = y

    def derivative(self, t):
        if self._scalar:
            vals = [float(v) for v in self.cstate] + [float(self.inputs["in"][0])]
            return np.array([affine_value(terms, vals) for terms in self._x_terms])
        return self.A @ self.cstate + self.B @ self.inputs["in"]

    def kernel(self):
        if not self._scalar:
            return None
        n = self.A.shape[0]
        names = [f"c_{j}" for j in range(n)] + ["u_in"]
        y_names = names if self.direct_feedthrough else names[:-1] + ["0.0"]
        return Kernel({"out": affine_expr(self._y_terms, y_names)},
                      derivatives=tuple(affine_expr(terms, names) for terms in self._x_terms))


class TransferFunction(StateSpace):
    """Continuous transfer function ``num(s) / den(s)`` (coefficients in descending powers of s).

    Realised as a state space by ``scipy.signal.tf2ss`` (controller canonical form); proper
    (``len(num) <= len(den)``). Feedthrough iff the realised ``D`` is nonzero.

    Parameters
    ----------
    name : str
    num, den : array_like
        Numerator and denominator coefficients.
    x0 : array_like, optional
        Initial state of the realisation.

    Ports
    -----
    in : (1,)
    out : (1,)
    """

    def __init__(self, name: str, num, den, x0=None, **kw):
        from scipy import signal
        p = Params(self, name)
        num_a = p.array("num", num, ndim=1)
        den_a = p.array("den", den, ndim=1)
        if len(num_a) > len(den_a):
            raise p.error("num", f"has degree {len(num_a) - 1} > degree {len(den_a) - 1} of "
                                 "den: the transfer function must be proper")
        if den_a[0] == 0:
            raise p.error("den", "must have a nonzero leading coefficient")
        A, B, C, D = signal.tf2ss(num_a, den_a)
        self.num, self.den = num_a, den_a
        super().__init__(name, A, B, C, D, x0=x0, **kw)


class FirstOrderLag(Block):
    """``tau dy/dt = gain * u - y`` (element-wise), ``out = y``.

    Parameters
    ----------
    name : str
    tau : float
        Time constant (s), > 0.
    gain : float
    initial : float or array_like
        Initial output; its shape is the signal shape.

    Ports
    -----
    in, out : shape of ``initial``

    Notes
    -----
    No direct feedthrough. Its kernel names ``tau`` and ``gain`` as parameters, so many lags
    run as one numpy operation on the batched fast path.
    """

    direct_feedthrough = False

    def __init__(self, name: str, tau=1.0, gain=1.0, initial=0.0, **kw):
        super().__init__(name, **kw)
        p = Params(self, name)
        self.tau = p.real("tau", tau, positive=True)
        self.gain = p.real("gain", gain)
        self.initial = p.array("initial", initial, ndim=1)
        self.input_shapes["in"] = self.initial.shape

    def initialize(self, t0):
        self.cstate = self.initial.copy()

    def output_update(self, t, dt):
        self.outputs["out"] = self.cstate.copy()

    def derivative(self, t):
        return (self.gain * self.inputs["in"] - self.cstate) / self.tau

    def kernel(self):
        if self.initial.shape != (1,):
            return None
        return Kernel({"out": "c_0"}, derivatives=("(p_gain * u_in - c_0) / p_tau",),
                      params={"gain": self.gain, "tau": self.tau})


class PID(Block):
    """Continuous PID with a filtered derivative and clamping anti-windup.

    ``out = clip(kp*e + ki*xi + kd*(e - xf)/tf, lower, upper)``, ``dxi/dt = e`` (held at 0
    while the output is saturated and ``e`` would drive it further), ``dxf/dt = (e - xf)/tf``:
    the derivative term is ``kd*s/(tf*s + 1)`` applied to ``e``.

    Parameters
    ----------
    name : str
    kp, ki, kd : float
    tf : float
        Derivative filter time constant (s), > 0.
    initial : float
        Initial integrator state.
    lower, upper : float, optional
        Output limits.

    Ports
    -----
    in : (1,) (the error ``e``)
    out : (1,)
    """

    def __init__(self, name: str, kp=1.0, ki=0.0, kd=0.0, tf=0.01, initial=0.0, lower=None,
                 upper=None, **kw):
        super().__init__(name, **kw)
        p = Params(self, name)
        self.kp = p.real("kp", kp)
        self.ki = p.real("ki", ki)
        self.kd = p.real("kd", kd)
        self.tf = p.real("tf", tf, positive=True)
        self.initial = p.real("initial", initial)
        self.lower = -math.inf if lower is None else p.real("lower", lower)
        self.upper = math.inf if upper is None else p.real("upper", upper)
        if not self.lower < self.upper:
            raise p.error("lower", f"must be < upper, got {lower} and {upper}")
        self.direct_feedthrough = self.kp != 0.0 or self.kd != 0.0
        self.input_shapes["in"] = (1,)

    def initialize(self, t0):
        self.cstate = np.array([self.initial, 0.0])

    def _raw(self, e: float, xi: float, xf: float) -> float:
        return self.kp * e + self.ki * xi + self.kd * ((e - xf) / self.tf)

    def output_update(self, t, dt):
        xi, xf = float(self.cstate[0]), float(self.cstate[1])
        e = float(self.inputs["in"][0]) if self.direct_feedthrough else 0.0
        v = self._raw(e, xi, xf)
        self.outputs["out"] = np.array([min(max(v, self.lower), self.upper)])

    def derivative(self, t):
        xi, xf = float(self.cstate[0]), float(self.cstate[1])
        e = float(self.inputs["in"][0])
        v = self._raw(e, xi, xf)
        windup = (v >= self.upper and e > 0.0) or (v <= self.lower and e < 0.0)
        return np.array([0.0 if windup else e, (e - xf) / self.tf])

    def kernel(self):
        kp, ki, kd, tf = lit(self.kp), lit(self.ki), lit(self.kd), lit(self.tf)
        lo, hi = lit(self.lower), lit(self.upper)
        e = "u_in" if self.direct_feedthrough else "0.0"
        raw = f"({kp} * {{e}} + {ki} * c_0 + {kd} * (({{e}} - c_1) / {tf}))"
        out = f"min(max({raw.format(e=e)}, {lo}), {hi})"
        v = raw.format(e="u_in")
        dxi = (f"(0.0 if (({v} >= {hi} and u_in > 0.0) or ({v} <= {lo} and u_in < 0.0)) "
               f"else u_in)")
        return Kernel({"out": out}, derivatives=(dxi, f"(u_in - c_1) / {tf}"))


class Derivative(Block):
    """Filtered derivative ``s / (tau s + 1)``: ``out = (u - x)/tau``, ``dx/dt = (u - x)/tau``.

    Parameters
    ----------
    name : str
    tau : float
        Filter time constant (s), > 0: the derivative is taken of ``u`` low-passed by it.
    initial : float or array_like
        Initial filter state (the input expected at ``t0``, to avoid a start-up kick).

    Ports
    -----
    in, out : shape of ``initial``
    """

    def __init__(self, name: str, tau=0.01, initial=0.0, **kw):
        super().__init__(name, **kw)
        p = Params(self, name)
        self.tau = p.real("tau", tau, positive=True)
        self.initial = p.array("initial", initial, ndim=1)
        self.input_shapes["in"] = self.initial.shape

    def initialize(self, t0):
        self.cstate = self.initial.copy()

    def output_update(self, t, dt):
        self.outputs["out"] = (self.inputs["in"] - self.cstate) / self.tau

    def derivative(self, t):
        return (self.inputs["in"] - self.cstate) / self.tau

    def kernel(self):
        if self.initial.shape != (1,):
            return None
        return Kernel({"out": "(u_in - c_0) / p_tau"}, derivatives=("(u_in - c_0) / p_tau",),
                      params={"tau": self.tau})


class ODE(Block):
    """A user system ``dx/dt = f(t, x, u)``, ``y = g(t, x, u)``.

    Parameters
    ----------
    name : str
    f : callable
        ``f(t, x, u) -> dx``: ``x`` of shape ``(n,)``, ``u`` the input array; returns ``(n,)``.
    g : callable
        ``g(t, x, u) -> y`` (any fixed shape).
    x0 : array_like, shape (n,)
    feedthrough : bool
        True if ``g`` uses ``u`` (default False: ``g`` is then called with ``u=None``).
    input_shape : tuple of int, optional
        Shape the input must have.

    Ports
    -----
    in : ``input_shape``
    out : shape of ``g``'s result
    """

    def __init__(self, name: str, f, g, x0, feedthrough: bool = False, input_shape=None, **kw):
        super().__init__(name, **kw)
        p = Params(self, name)
        if not callable(f) or not callable(g):
            raise p.error("f", "and g must be callables f(t, x, u) and g(t, x, u)")
        self.f, self.g = f, g
        self.x0 = p.array("x0", x0, ndim=1)
        self.direct_feedthrough = bool(feedthrough)
        if input_shape is not None:
            self.input_shapes["in"] = tuple(input_shape)

    def initialize(self, t0):
        self.cstate = self.x0.copy()

    def output_update(self, t, dt):
        u = self.inputs["in"] if self.direct_feedthrough else None
        self.outputs["out"] = as_signal(self.g(t, self.cstate.copy(), u))

    def derivative(self, t):
        dx = np.asarray(self.f(t, self.cstate.copy(), self.inputs["in"]), dtype=np.float64)
        if dx.shape != self.cstate.shape:
            raise ModelError(f"ODE {self.name!r}: f returned shape {dx.shape}, expected "
                             f"{self.cstate.shape}")
        return dx


class TransportDelay(Block):
    """``out(t) = in(t - delay)``, from a buffer of the input sampled at every tick.

    The output interpolates linearly between buffered samples (first order in the tick between
    samples); before ``t0 + delay`` it is ``initial``. The buffer lives in ``state`` (so
    checkpoints and rollbacks capture it) and holds ``ceil(delay/dt) + 2`` samples.

    Parameters
    ----------
    name : str
    delay : float
        Delay (s), > 0.
    initial : float or array_like
        Output before the first delayed sample; its shape is the signal shape.

    Ports
    -----
    in, out : shape of ``initial``

    Notes
    -----
    No direct feedthrough: a delay at least one tick long never needs the current input.
    """

    direct_feedthrough = False

    def __init__(self, name: str, delay=1.0, initial=0.0, **kw):
        super().__init__(name, **kw)
        p = Params(self, name)
        self.delay = p.real("delay", delay, positive=True)
        self.initial = p.array("initial", initial, ndim=1)
        self.input_shapes["in"] = self.initial.shape

    def initialize(self, t0):
        self.state["times"] = np.zeros(0)
        self.state["values"] = np.zeros((0,) + self.initial.shape)
        self.outputs["out"] = self.initial.copy()

    def output_update(self, t, dt):
        times, values = self.state["times"], self.state["values"]
        tq = t - self.delay
        if len(times) == 0 or tq < times[0]:
            self.outputs["out"] = self.initial.copy()
            return
        j = int(np.searchsorted(times, tq, side="right")) - 1
        if j >= len(times) - 1:
            self.outputs["out"] = values[-1].copy()
            return
        w = (tq - times[j]) / (times[j + 1] - times[j])
        self.outputs["out"] = values[j] + w * (values[j + 1] - values[j])

    def state_update(self, t, dt):
        keep = int(math.ceil(self.delay / dt)) + 2
        times = np.append(self.state["times"], t)[-keep:]
        values = np.concatenate([self.state["values"], self.inputs["in"][None]])[-keep:]
        self.next_state["times"] = times
        self.next_state["values"] = values
