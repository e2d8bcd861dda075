"""Linear time-invariant discrete systems: state space and transfer function.

Timing as every discrete block (:mod:`blocks.discrete`): at a sample hit ``k`` the output is
``y[k] = C x[k] + D u[k]`` and ``x[k+1] = A x[k] + B u[k]`` shows at the next hit
(scipy.signal.dlsim's convention).

Blocks: DiscreteStateSpace, DiscreteTransferFunction.
"""

from __future__ import annotations

import numpy as np

from blocks._support import Params, affine_expr, affine_terms, affine_value, state_space
from cosim.model.block import Block, Kernel

__all__ = ["DiscreteStateSpace", "DiscreteTransferFunction"]


#: Single-input single-output systems with at most this many states keep one scalar state
#: entry per state (``x1`` .. ``xn``) and are evaluated as explicit scalar sums, so the fast
#: path can run them; larger or multivariable systems use one state vector and ``@``.
SCALAR_MAX_STATES = 8


class DiscreteStateSpace(Block):
    """Linear time-invariant discrete system ``x[k+1] = A x[k] + B u[k]``,
    ``y[k] = C x[k] + D u[k]`` (scipy.signal.dlsim's convention).

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
    Direct feedthrough iff ``D`` has a nonzero entry (set per instance). A single-input
    single-output system with ``n <= 8`` keeps its state as scalar entries ``x1`` .. ``xn``
    and computes each sum left to right over the nonzero coefficients (zero entries are
    structural zeros); it has a fast-path kernel. Any other system keeps the state vector
    ``x`` (shape ``(n,)``) and uses matrix products (no kernel).
    """

    def __init__(self, name: str, A, B, C, D=None, x0=None, **kw):
        super().__init__(name, **kw)
        p = Params(self, name)
        self.A, self.B, self.C, self.D, _ = state_space(p, A, B, C, D, None)
        self._realise(p, x0)

    def _realise(self, p: Params, x0):
        """Check ``x0`` and precompute the evaluation of (A, B, C, D) and the feedthrough flag."""
        A, B, C, D = self.A, self.B, self.C, self.D
        n, (q, m) = A.shape[0], D.shape
        self.x0 = np.zeros(n) if x0 is None else p.array("x0", x0, ndim=1)
        if self.x0.shape != (n,):
            raise p.error("x0", f"must have shape ({n},) (one entry per state), got "
                                f"{self.x0.shape}")
        self.direct_feedthrough = bool(np.any(D != 0))
        self.input_shapes["in"] = (m,)
        self._scalar = m == 1 and q == 1 and n <= SCALAR_MAX_STATES
        if self._scalar:
            # Variables: state j at index j, the input at index n.
            self._names = tuple(f"x{j + 1}" for j in range(n))
            self._y_terms = affine_terms(list(C[0]) + [D[0, 0]], range(n + 1))
            self._x_terms = [affine_terms(list(A[i]) + [B[i, 0]], range(n + 1))
                             for i in range(n)]

    def initialize(self, t0):
        if self._scalar:
            for name, v in zip(self._names, self.x0):
                self.state[name] = np.array([v])
        else:
            self.state["x"] = self.x0.copy()

    def _values(self, with_input: bool) -> list[float]:
        state = self.state
        vals = [float(state[nm][0]) for nm in self._names]
        vals.append(float(self.inputs["in"][0]) if with_input else 0.0)
        return vals

    def output_update(self, t, dt):
        if self._scalar:
            vals = self._values(self.direct_feedthrough)
            self.outputs["out"] = np.array([affine_value(self._y_terms, vals)])
        elif self.direct_feedthrough:
            self.outputs["out"] = self.C @ self.state["x"] + self.D @ self.inputs["in"]
        else:
            self.outputs["out"] = self.C @ self.state["x"]

    def state_update(self, t, dt):
        if self._scalar:
            vals = self._values(True)
            for name, terms in zip(self._names, self._x_terms):
                self.next_state[name] = np.array([affine_value(terms, vals)])
        else:
            self.next_state["x"] = self.A @ self.state["x"] + self.B @ self.inputs["in"]

    def kernel(self):
        if not self._scalar:
            return None
        names = [f"x_{nm}" for nm in self._names] + ["u_in"]
        return Kernel({"out": affine_expr(self._y_terms, names)},
                      {nm: affine_expr(terms, names)
                       for nm, terms in zip(self._names, self._x_terms)})


class DiscreteTransferFunction(DiscreteStateSpace):
    """Single-input single-output transfer function ``H = num / den``, realised as a state
    space (scipy.signal.tf2ss's controllable canonical form).

    ``variable="z"`` (default; scipy.signal.dlti, Simulink's Discrete Transfer Fcn)
        ``num`` and ``den`` are coefficients of descending powers of ``z``; a numerator
        shorter than the denominator means delay: ``num=[1], den=[1, -0.5]`` is
        ``1 / (z - 0.5)``, whose output lags its input by one sample.
    ``variable="z^-1"`` (scipy.signal.lfilter ``b, a``, Simulink's Discrete Filter)
        Coefficients of ascending powers of ``z^-1``: ``num=[1], den=[1, -0.5]`` is
        ``1 / (1 - 0.5 z^-1)`` (feedthrough). ``den[0]`` must be nonzero.

    Parameters
    ----------
    name : str
    num, den : array_like, 1-D
        Numerator and denominator; the transfer function must be proper.
    variable : {"z", "z^-1"}
    x0 : array_like, optional
        Initial state of the realisation (zero by default).

    Ports
    -----
    in : (1,)
    out : (1,)

    Notes
    -----
    Direct feedthrough iff the realised ``D`` is nonzero (numerator and denominator of equal
    degree in ``z``). The realised matrices are the attributes ``A, B, C, D``. A static gain
    (``len(den) == 1``) has no state. Fast-path kernel up to order 8.
    """

    def __init__(self, name: str, num, den, variable="z", x0=None, **kw):
        from scipy.signal import tf2ss

        Block.__init__(self, name, **kw)
        p = Params(self, name)
        self.num = p.array("num", num, ndim=1)
        self.den = p.array("den", den, ndim=1)
        self.variable = p.choice("variable", variable, ("z", "z^-1"))
        num, den = self.num, self.den
        if self.variable == "z^-1":
            if den[0] == 0:
                raise p.error("den", f"must start with a nonzero a[0] for variable 'z^-1', got "
                                     f"{self.den.tolist()}")
            size = max(len(num), len(den))
            num = np.pad(num, (0, size - len(num)))
            den = np.pad(den, (0, size - len(den)))
        den = np.trim_zeros(den, "f")
        if den.size == 0:
            raise p.error("den", "must have a nonzero coefficient, got "
                                 f"{self.den.tolist()}")
        num = np.trim_zeros(num, "f")
        num = num if num.size else np.zeros(1)
        if len(num) > len(den):
            raise p.error("num", f"has a higher degree than den ({num.tolist()} over "
                                 f"{den.tolist()}): the transfer function is improper (not "
                                 "causal)")
        if len(den) == 1:
            A, B, C, D = np.zeros((0, 0)), np.zeros((0, 1)), np.zeros((1, 0)), \
                np.array([[num[0] / den[0]]])
        else:
            A, B, C, D = tf2ss(num, den)
        self.A, self.B, self.C, self.D = A, B, C, D
        self._realise(p, x0)
