"""Discrete-time blocks: difference equations evaluated at their sample hits.

Timing (pySimBlocks / Simulink): at a sample hit ``k`` a block's output is computed from its
current state ``x[k]`` (and, with direct feedthrough, its current input ``u[k]``); its
``state_update`` computes ``x[k+1]``, which shows in the output at the next hit. The ``dt`` a
block receives is its own sample period ``T`` (the base step when it has no ``sample_time``).
Between its hits a block's output holds, so a block with a slower ``sample_time`` is also a
sample-and-hold of its inputs.

Blocks: UnitDelay, ZeroOrderHold, RateTransition, DiscreteIntegrator, DiscretePID (the linear
time-invariant systems are in :mod:`blocks.discrete_lti`).
"""

from __future__ import annotations

import numpy as np

from blocks._support import Params, clip_array, clip_expr, clip_float, lit
from cosim.model.block import Block, Kernel

__all__ = ["DiscreteIntegrator", "DiscretePID", "RateTransition", "UnitDelay", "ZeroOrderHold"]


class UnitDelay(Block):
    """``out[k] = in[k-1]``, ``out[0] = initial``: a delay of one sample period.

    Parameters
    ----------
    name : str
    initial : float or array_like
        Output before the first sample; its shape is the signal shape.

    Ports
    -----
    in : shape of ``initial``
    out : shape of ``initial``

    Notes
    -----
    State ``x`` (shape of ``initial``). No direct feedthrough (it breaks algebraic loops).
    Fast-path kernel for a scalar signal.
    """

    direct_feedthrough = False

    def __init__(self, name: str, initial=0.0, **kw):
        super().__init__(name, **kw)
        self.initial = Params(self, name).array("initial", initial)
        self.input_shapes["in"] = self.initial.shape

    def initialize(self, t0):
        self.state["x"] = self.initial.copy()
        self.outputs["out"] = self.state["x"]

    def output_update(self, t, dt):
        self.outputs["out"] = self.state["x"]

    def state_update(self, t, dt):
        self.next_state["x"] = self.inputs["in"]

    def kernel(self):
        return Kernel({"out": "x_x"}, {"x": "u_in"})


class ZeroOrderHold(Block):
    """Samples its input at its own sample hits and holds it in between (Simulink's ZOH).

    ``out = in`` at each hit of ``sample_time``; between hits the output holds. This is the
    Simulink and pySimBlocks convention: the hold has *direct feedthrough* — the sample taken at
    hit ``k`` shows at hit ``k`` itself, not one period later (use a UnitDelay or
    ``RateTransition(mode="delay")`` for that).

    Parameters
    ----------
    name : str
    sample_time : float or (float, float)
        The sampling period (and offset); without it the hold samples at every base step and
        is an identity.

    Ports
    -----
    in : any shape
    out : shape of ``in``

    Notes
    -----
    No state. Direct feedthrough. Fast-path kernel: yes.
    """

    def output_update(self, t, dt):
        self.outputs["out"] = self.inputs["in"]

    def kernel(self):
        return Kernel({"out": "u_in"})


class RateTransition(Block):
    """Moves a signal between two rates, deterministically (Simulink's Rate Transition).

    The block runs at the *slower* of the two rates, given as its ``sample_time``:

    ``mode="zoh"`` (fast to slow)
        A zero-order hold: at each slow hit ``out = in``, held until the next hit. Direct
        feedthrough. This is Simulink's deterministic fast-to-slow transition.
    ``mode="delay"`` (slow to fast)
        A unit delay at the slow rate: at slow hit ``j`` the output is the input sampled at
        slow hit ``j-1`` (``initial`` at the first hit), held for the whole slow period. No
        direct feedthrough, so the fast side never waits for the slow side within a tick.
        This is Simulink's deterministic slow-to-fast transition (its output changes only at
        slow hits, one slow period late).

    Parameters
    ----------
    name : str
    mode : {"zoh", "delay"}
    initial : float or array_like
        Output of ``mode="delay"`` before the first sample; its shape is the signal shape.
    sample_time : float or (float, float)
        The slower rate (required).

    Ports
    -----
    in : any shape (``"zoh"``); shape of ``initial`` (``"delay"``)
    out : shape of ``in``

    Notes
    -----
    State ``x`` in ``mode="delay"``. Fast-path kernel: yes.
    """

    def __init__(self, name: str, mode="zoh", initial=0.0, sample_time=None, **kw):
        super().__init__(name, sample_time=sample_time, **kw)
        p = Params(self, name)
        if sample_time is None:
            raise p.error("sample_time", "must be given: the slower of the two rates the "
                                         "block connects")
        self.mode = p.choice("mode", mode, ("zoh", "delay"))
        self.initial = p.array("initial", initial)
        self.direct_feedthrough = self.mode == "zoh"
        if self.mode == "delay":
            self.input_shapes["in"] = self.initial.shape

    def initialize(self, t0):
        if self.mode == "delay":
            self.state["x"] = self.initial.copy()
            self.outputs["out"] = self.state["x"]

    def output_update(self, t, dt):
        self.outputs["out"] = self.state["x"] if self.mode == "delay" else self.inputs["in"]

    def state_update(self, t, dt):
        if self.mode == "delay":
            self.next_state["x"] = self.inputs["in"]

    def kernel(self):
        if self.mode == "delay":
            return Kernel({"out": "x_x"}, {"x": "u_in"})
        return Kernel({"out": "u_in"})


class DiscreteIntegrator(Block):
    """Discrete-time integrator ``gain * ∫ in dt`` (Simulink's Discrete-Time Integrator).

    With ``T`` the sample period, ``K`` the gain and state ``x[0] = initial``:

    ``"forward"`` (Euler forward)
        ``y[k] = x[k]``; ``x[k+1] = x[k] + K*T*u[k]``. No direct feedthrough.
    ``"backward"`` (Euler backward)
        ``y[k] = x[k] + K*T*u[k]``; ``x[k+1] = y[k]``. Direct feedthrough.
    ``"trapezoidal"``
        ``y[k] = x[k] + K*T/2*u[k]``; ``x[k+1] = y[k] + K*T/2*u[k]``. Direct feedthrough.

    So ``y[k] = initial + K*T*sum(u[:k]) + c*K*T*u[k]`` with ``c = 0, 1, 1/2``: the initial
    value is the state, as Simulink's default "initial condition setting: state".
    With limits, the output and the state are clipped to ``[lower, upper]`` after every
    update (the integrator stops at a limit and leaves it as soon as the input reverses).

    Parameters
    ----------
    name : str
    gain : float
        K.
    initial : float or array_like
        Initial state; its shape is the signal shape. Must lie within the limits.
    method : {"forward", "backward", "trapezoidal"}
    lower, upper : float or array_like or None
        Optional saturation limits.

    Ports
    -----
    in : shape of ``initial``
    out : shape of ``initial``

    Notes
    -----
    State ``x``. Fast-path kernel for a scalar signal and scalar limits.
    """

    def __init__(self, name: str, gain=1.0, initial=0.0, method="forward", lower=None,
                 upper=None, **kw):
        super().__init__(name, **kw)
        p = Params(self, name)
        self.gain = p.real("gain", gain)
        self.initial = p.array("initial", initial)
        self.method = p.choice("method", method, ("forward", "backward", "trapezoidal"))
        self.lower, self.upper = p.limits(lower, upper)
        for param, lim in (("lower", self.lower), ("upper", self.upper)):
            try:
                fits = np.broadcast_shapes(np.shape(lim), self.initial.shape) \
                    == self.initial.shape
            except ValueError:
                fits = False
            if not fits:
                raise p.error(param, f"must be a scalar or broadcast to the shape of initial "
                                     f"{self.initial.shape}, got shape {np.shape(lim)}")
        if not np.array_equal(clip_array(self.initial, self.lower, self.upper), self.initial):
            raise p.error("initial", f"must lie within [lower, upper], got {initial!r}")
        self.direct_feedthrough = self.method != "forward"
        self.input_shapes["in"] = self.initial.shape
        # A scalar integrator computes in Python floats (several times faster than numpy on
        # one element); the same formulas over arrays otherwise, with the same values.
        self._scalar = self.initial.shape == (1,) and not isinstance(self.lower, np.ndarray) \
            and not isinstance(self.upper, np.ndarray)
        if self.lower is None and self.upper is None:
            self._clip = None
        else:
            self._clip = clip_float if self._scalar else clip_array

    def _limit(self, v):
        return v if self._clip is None else self._clip(v, self.lower, self.upper)

    def _step(self, x, u, dt):
        """``(y[k], x[k+1])`` from ``x[k]`` and ``u[k]`` (floats or arrays alike)."""
        if self.method == "trapezoidal":
            h = self.gain * dt * 0.5
            y = self._limit(x + h * u)
            return y, self._limit(y + h * u)
        x_next = self._limit(x + self.gain * dt * u)
        return (x if self.method == "forward" else x_next), x_next

    def _run(self, dt):
        """``(y, x_next)`` as signals, from the current state and input."""
        x, u = self.state["x"], self.inputs["in"]
        if not self._scalar:
            return self._step(x, u, dt)
        y, x_next = self._step(float(x[0]), float(u[0]), dt)
        return np.array([y]), np.array([x_next])

    def initialize(self, t0):
        self.state["x"] = self.initial.copy()
        if self.method == "forward":
            self.outputs["out"] = self.state["x"]

    def output_update(self, t, dt):
        if self.method == "forward":
            self.outputs["out"] = self.state["x"]
        else:
            self.outputs["out"] = self._run(dt)[0]

    def state_update(self, t, dt):
        self.next_state["x"] = self._run(dt)[1]

    def kernel(self):
        if not self._scalar:
            return None
        lo, hi, k = self.lower, self.upper, lit(self.gain)
        if self.method == "trapezoidal":
            y = clip_expr(f"x_x + {k} * dt * 0.5 * u_in", lo, hi)
            return Kernel({"out": y}, {"x": clip_expr(f"{y} + {k} * dt * 0.5 * u_in", lo, hi)})
        x_next = clip_expr(f"x_x + {k} * dt * u_in", lo, hi)
        return Kernel({"out": "x_x" if self.method == "forward" else x_next}, {"x": x_next})


class DiscretePID(Block):
    """Discrete PID controller, parallel form, forward-Euler integrator and filter.

    With error ``e = in``, sample period ``T``, integrator state ``xi`` and derivative state
    ``xf``:

    - derivative, filtered (``N`` given, Simulink's ``D*N / (1 + N*T/(z-1))``):
      ``d = N*(kd*e - xf)``, ``xf[k+1] = xf + T*d``;
      unfiltered (``N=None``, backward difference): ``d = (kd*e - xf) / T``,
      ``xf[k+1] = kd*e`` (so ``d = kd*(e[k] - e[k-1]) / T`` with ``e[-1] = 0``);
    - ``v = kp*e + xi + d`` (the terms with a zero gain are left out) and
      ``out = clip(v, lower, upper)``;
    - integrator ``xi[k+1] = xi + ki*T*e``, with anti-windup:

      ``"none"``
          as written;
      ``"clamping"``
          the integrator holds (``xi[k+1] = xi``) while the output is saturated and
          ``ki*e`` pushes it further (``v > upper`` and ``ki*e > 0``, or ``v < lower`` and
          ``ki*e < 0``);
      ``"back_calculation"``
          ``xi[k+1] = xi + T*(ki*e + kb*(out - v))``.

    Parameters
    ----------
    name : str
    kp, ki, kd : float
        Proportional, integral (1/s) and derivative (s) gains.
    N : float or None
        Derivative filter coefficient (rad/s, ``N = 1/Tf``); keep ``N*T < 2`` for a stable
        filter. None: unfiltered backward difference.
    lower, upper : float or None
        Output limits.
    anti_windup : {"none", "clamping", "back_calculation"}
        Needs at least one output limit unless ``"none"``.
    kb : float
        Back-calculation gain (1/s), used by ``"back_calculation"``.
    initial : float
        Initial integrator state ``xi[0]``.

    Ports
    -----
    in : (1,)
        Control error.
    out : (1,)
        Control signal.

    Notes
    -----
    States ``xi`` and (when ``kd != 0``) ``xf``. Direct feedthrough unless
    ``kp == kd == 0``. Fast-path kernel: yes.
    """

    def __init__(self, name: str, kp=1.0, ki=0.0, kd=0.0, N=None, lower=None, upper=None,
                 anti_windup="none", kb=1.0, initial=0.0, **kw):
        super().__init__(name, **kw)
        p = Params(self, name)
        self.kp, self.ki, self.kd = p.real("kp", kp), p.real("ki", ki), p.real("kd", kd)
        self.N = None if N is None else p.real("N", N, positive=True)
        self.lower = p.optional_real("lower", lower)
        self.upper = p.optional_real("upper", upper)
        p.limits(self.lower, self.upper)
        self.anti_windup = p.choice("anti_windup", anti_windup,
                                    ("none", "clamping", "back_calculation"))
        if self.anti_windup != "none" and self.lower is None and self.upper is None:
            raise p.error("anti_windup", f"{anti_windup!r} needs output limits (lower and/or "
                                         "upper)")
        self.kb = p.real("kb", kb)
        self.initial = p.real("initial", initial)
        self.direct_feedthrough = self.kp != 0 or self.kd != 0
        self.input_shapes["in"] = (1,)

    def initialize(self, t0):
        self.state["xi"] = np.array([self.initial])
        if self.kd != 0:
            self.state["xf"] = np.array([0.0])

    # The reference evaluates these floats in the order the kernel's expressions spell them.
    def _derivative(self, e, xf, dt):
        if self.N is None:
            return (self.kd * e - xf) / dt
        return self.N * (self.kd * e - xf)

    def _unsaturated(self, e, xi, xf, dt):
        v = self.kp * e + xi if self.kp != 0 else xi
        return v + self._derivative(e, xf, dt) if self.kd != 0 else v

    def output_update(self, t, dt):
        st = self.state
        e = float(self.inputs["in"][0]) if self.direct_feedthrough else 0.0
        xf = float(st["xf"][0]) if self.kd != 0 else 0.0
        v = self._unsaturated(e, float(st["xi"][0]), xf, dt)
        self.outputs["out"] = np.array([clip_float(v, self.lower, self.upper)])

    def state_update(self, t, dt):
        st = self.state
        e = float(self.inputs["in"][0])
        xi = float(st["xi"][0])
        xf = float(st["xf"][0]) if self.kd != 0 else 0.0
        v = self._unsaturated(e, xi, xf, dt)
        if self.anti_windup == "back_calculation":
            out = clip_float(v, self.lower, self.upper)
            xi_next = xi + dt * (self.ki * e + self.kb * (out - v))
        elif self.anti_windup == "clamping" and (
                self.upper is not None and v > self.upper and self.ki * e > 0.0
                or self.lower is not None and v < self.lower and self.ki * e < 0.0):
            xi_next = xi
        else:
            xi_next = xi + self.ki * dt * e
        self.next_state["xi"] = np.array([xi_next])
        if self.kd != 0:
            if self.N is None:
                self.next_state["xf"] = np.array([self.kd * e])
            else:
                self.next_state["xf"] = np.array([xf + dt * self._derivative(e, xf, dt)])

    def kernel(self):
        kp, ki, kd, kb = lit(self.kp), lit(self.ki), lit(self.kd), lit(self.kb)
        lo, hi = self.lower, self.upper
        if self.N is None:
            d = f"(({kd} * u_in - x_xf) / dt)"
        else:
            d = f"({lit(self.N)} * ({kd} * u_in - x_xf))"
        v = f"{kp} * u_in + x_xi" if self.kp != 0 else "x_xi"
        v = f"({v} + {d})" if self.kd != 0 else f"({v})"
        out = clip_expr(v, lo, hi)
        if self.anti_windup == "back_calculation":
            xi = f"x_xi + dt * ({ki} * u_in + {kb} * ({out} - {v}))"
        elif self.anti_windup == "clamping":
            held = []
            if hi is not None:
                held.append(f"{v} > {lit(hi)} and {ki} * u_in > 0.0")
            if lo is not None:
                held.append(f"{v} < {lit(lo)} and {ki} * u_in < 0.0")
            xi = f"(x_xi if {' or '.join(held)} else x_xi + {ki} * dt * u_in)"
        else:
            xi = f"x_xi + {ki} * dt * u_in"
        state = {"xi": xi}
        if self.kd != 0:
            state["xf"] = f"{kd} * u_in" if self.N is None else f"x_xf + dt * {d}"
        return Kernel({"out": out}, state)
