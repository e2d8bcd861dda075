"""Math operators: memoryless element-wise blocks with direct feedthrough.

Gain, Sum, Product, Abs and MathFunction. Signals of different shapes combine by numpy
broadcasting where a block says so. Errors that IEEE arithmetic would hide (a division by
zero, the log of a negative number) stop the run with a :class:`~cosim.errors.SimulationError`:
the reference interpreter names the block, the port and the time; the fast path, where the
same kernel raises Python's ZeroDivisionError or ValueError, names the time.
"""

from __future__ import annotations

import math
import re

import numpy as np

from blocks._support import Params, lit
from cosim.model.block import Block, Kernel, as_signal
from cosim.errors import ModelError, SimulationError

__all__ = ["Abs", "Gain", "MathFunction", "MinMax", "Product", "Sum"]


class Gain(Block):
    """``out = k * in`` (scalar ``k``) or ``out = K @ in`` (matrix ``K``).

    Parameters
    ----------
    name : str
    k : float or array_like
        Scalar gain, or a matrix of shape ``(n_out, n_in)``.

    Ports
    -----
    in : any shape (scalar ``k``) or ``(n_in,)`` (matrix ``K``)
    out : shape of ``in``, or ``(n_out,)``

    Notes
    -----
    Direct feedthrough. Fast-path kernel for a scalar ``k``.
    """

    def __init__(self, name: str, k=1.0, **kw):
        p = Params(self, name)
        super().__init__(name, **kw)
        scalar = np.ndim(k) == 0
        k_given, k = k, p.array("k", k)
        if scalar:
            # A float given is kept (the same value, not a copy per block).
            self.k = k_given if type(k_given) is float else float(k[0])
        elif k.ndim == 2:
            self.k = k
            self.input_shapes["in"] = (k.shape[1],)
        else:
            raise ModelError(f"Gain {name!r}: k must be a scalar or a 2-D matrix, got shape "
                             f"{k.shape}")

    def output_update(self, t, dt):
        if isinstance(self.k, float):
            self.outputs["out"] = self.k * self.inputs["in"]
        else:
            self.outputs["out"] = self.k @ self.inputs["in"]

    def kernel(self):
        return Kernel({"out": f"{lit(self.k)} * u_in"}) if isinstance(self.k, float) else None


class Sum(Block):
    """Signed sum of the inputs ``in1``, ``in2``, ... : ``out = ±in1 ±in2 ...``.

    Parameters
    ----------
    name : str
    signs : str
        One ``+`` or ``-`` per input, e.g. ``"+-"`` (the default is ``"++"``).

    Ports
    -----
    in1 .. inN : broadcastable shapes (N = ``len(signs)``)
    out : broadcast shape

    Notes
    -----
    Accumulates left to right. Direct feedthrough. Fast-path kernel: yes.
    """

    def __init__(self, name: str, signs: str = "++", **kw):
        if not isinstance(signs, str) or not signs or set(signs) - {"+", "-"}:
            raise ModelError(f"Sum {name!r}: signs must be a string of '+' and '-', "
                             f"got {signs!r}")
        super().__init__(name, inputs=tuple(f"in{i + 1}" for i in range(len(signs))), **kw)
        self.signs = signs

    def output_update(self, t, dt):
        ins = self.inputs
        names = self.input_names
        acc = ins[names[0]] if self.signs[0] == "+" else -ins[names[0]]
        # Accumulate left to right: the kernel's expression does the same, bit for bit.
        for s, p in zip(self.signs[1:], names[1:]):
            acc = acc + ins[p] if s == "+" else acc - ins[p]
        self.outputs["out"] = acc

    def kernel(self):
        first = ("" if self.signs[0] == "+" else "-") + f"u_{self.input_names[0]}"
        rest = "".join(f" {s} u_{p}" for s, p in zip(self.signs[1:], self.input_names[1:]))
        return Kernel({"out": f"{first}{rest}"})


class Product(Block):
    """Element-wise product and quotient of the inputs: ``out = in1 ∘ in2 ∘ ...``.

    Each character of ``ops`` is ``*`` (multiply by that input) or ``/`` (divide by it);
    a leading ``/`` takes the reciprocal of ``in1``. The result accumulates left to right:
    ``ops="*/*"`` gives ``(in1 / in2) * in3``.

    Parameters
    ----------
    name : str
    ops : str
        One ``*`` or ``/`` per input (default ``"**"``).

    Ports
    -----
    in1 .. inN : broadcastable shapes (N = ``len(ops)``)
    out : broadcast shape

    Raises
    ------
    SimulationError
        When a divisor has an element equal to zero (IEEE would give inf or NaN silently);
        the message names the input and the time.

    Notes
    -----
    Direct feedthrough. Fast-path kernel: yes (a zero divisor raises there too, as
    ``ZeroDivisionError`` reported by the fast path).
    """

    def __init__(self, name: str, ops: str = "**", **kw):
        if not isinstance(ops, str) or not ops or set(ops) - {"*", "/"}:
            raise ModelError(f"Product {name!r}: ops must be a string of '*' and '/', "
                             f"got {ops!r}")
        super().__init__(name, inputs=tuple(f"in{i + 1}" for i in range(len(ops))), **kw)
        self.ops = ops
        self._steps = tuple(zip(ops, self.input_names))

    def output_update(self, t, dt):
        ins = self.inputs
        acc = None
        for op, port in self._steps:
            v = ins[port]
            if op == "*":
                acc = v if acc is None else acc * v
                continue
            if not v.all():
                raise SimulationError(
                    f"division by zero: input {self.name}.{port} is {v.tolist()} (ops "
                    f"{self.ops!r}); keep the divisor away from 0 (e.g. with a Saturation)",
                    t=t, block=self.name)
            acc = 1.0 / v if acc is None else acc / v
        self.outputs["out"] = acc

    def kernel(self):
        (op0, p0), rest = self._steps[0], self._steps[1:]
        first = f"u_{p0}" if op0 == "*" else f"1.0 / u_{p0}"
        return Kernel({"out": first + "".join(f" {op} u_{p}" for op, p in rest)})


class MinMax(Block):
    """Element-wise minimum or maximum of the inputs: ``out = max(in1, in2, ...)``.

    Parameters
    ----------
    name : str
    function : {"max", "min"}
    n_inputs : int
        Number of inputs (at least 1; default 2).

    Ports
    -----
    in1 .. inN : broadcastable shapes
    out : broadcast shape

    Notes
    -----
    Direct feedthrough. Python's selection, input by input: ``max(a, b)`` is ``b if b > a
    else a`` (so a NaN in a later input is passed over, one in ``in1`` is kept), for arrays
    and scalars alike. Fast-path kernel: yes.
    """

    def __init__(self, name: str, function: str = "max", n_inputs: int = 2, **kw):
        p = Params(self, name)
        p.choice("function", function, ("max", "min"))
        n = p.count("n_inputs", n_inputs)
        super().__init__(name, inputs=tuple(f"in{i + 1}" for i in range(n)), **kw)
        self.function = function

    def output_update(self, t, dt):
        ins = self.inputs
        names = self.input_names
        acc = ins[names[0]]
        if len(names) == 1:
            self.outputs["out"] = acc.copy()
            return
        pick = np.greater if self.function == "max" else np.less
        for port in names[1:]:
            v = ins[port]
            acc = np.where(pick(v, acc), v, acc)
        self.outputs["out"] = acc

    def kernel(self):
        expr = f"u_{self.input_names[0]}"
        for port in self.input_names[1:]:
            expr = f"{self.function}({expr}, u_{port})"
        return Kernel({"out": expr})


class Abs(Block):
    """Element-wise absolute value: ``out = |in|``.

    Ports
    -----
    in : any shape
    out : shape of ``in``

    Notes
    -----
    Direct feedthrough. Fast-path kernel: yes.
    """

    def output_update(self, t, dt):
        self.outputs["out"] = np.abs(self.inputs["in"])

    def kernel(self):
        return Kernel({"out": "abs(u_in)"})


# name -> (scalar source over ``u``, numpy ufunc). The scalar source is used for (1,) signals
# by the reference method and, verbatim, by the fast-path kernel: math.* functions, because
# numpy's may differ from them by an ulp.
_FUNCTIONS = {
    "exp": ("math.exp(u)", np.exp),
    "log": ("math.log(u)", np.log),
    "log10": ("math.log10(u)", np.log10),
    "log2": ("math.log2(u)", np.log2),
    "sqrt": ("math.sqrt(u)", np.sqrt),
    "square": ("u * u", np.square),
    "reciprocal": ("1.0 / u", np.reciprocal),
    "sin": ("math.sin(u)", np.sin),
    "cos": ("math.cos(u)", np.cos),
    "tan": ("math.tan(u)", np.tan),
    "asin": ("math.asin(u)", np.arcsin),
    "acos": ("math.acos(u)", np.arccos),
    "atan": ("math.atan(u)", np.arctan),
    "sinh": ("math.sinh(u)", np.sinh),
    "cosh": ("math.cosh(u)", np.cosh),
    "tanh": ("math.tanh(u)", np.tanh),
}
_SCALAR = {k: eval(f"lambda u: {src}", {"math": math}) for k, (src, _) in _FUNCTIONS.items()}


class MathFunction(Block):
    """Element-wise function of one input: ``out = f(in)``.

    Parameters
    ----------
    name : str
    function : str or callable
        One of ``exp, log, log10, log2, sqrt, square, reciprocal, sin, cos, tan, asin, acos,
        atan, sinh, cosh, tanh``; or a Python callable mapping an array to an array of the
        same shape (no fast path then).

    Ports
    -----
    in : any shape
    out : shape of ``in``

    Raises
    ------
    SimulationError
        For an input outside the function's domain (log or sqrt of a negative number, log or
        reciprocal of 0, asin of 2, ...) or an overflow (exp of 1000); the message names the
        block, the function, the value and the time.

    Notes
    -----
    A ``(1,)`` signal is computed with Python's ``math`` module — the functions the fast path
    runs — and a larger one with numpy's ufuncs; the two may differ in the last bit. Direct
    feedthrough. Fast-path kernel for named functions.
    """

    def __init__(self, name: str, function="exp", **kw):
        super().__init__(name, **kw)
        if not callable(function):
            Params(self, name).choice("function", function, tuple(_FUNCTIONS))
        self.function = function

    def output_update(self, t, dt):
        u = self.inputs["in"]
        f = self.function
        if callable(f):
            self.outputs["out"] = as_signal(f(u))
            return
        try:
            if u.shape == (1,):
                self.outputs["out"] = np.array([_SCALAR[f](float(u[0]))])
                return
            with np.errstate(divide="raise", over="raise", invalid="raise"):
                self.outputs["out"] = _FUNCTIONS[f][1](u)
        except (ValueError, OverflowError, ZeroDivisionError, FloatingPointError) as err:
            raise SimulationError(f"{f}({self.name}.in = {u.tolist()}) is undefined or "
                                  f"overflows ({err}); keep the input in the domain of {f}",
                                  t=t, block=self.name) from None

    def kernel(self):
        if callable(self.function):
            return None
        return Kernel({"out": re.sub(r"\bu\b", "u_in", _FUNCTIONS[self.function][0])})
