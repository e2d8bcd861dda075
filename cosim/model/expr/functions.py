"""The functions an expression may call, each validating its own arguments and charging its
work to the evaluator's limits before doing it."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

import numpy as np

from cosim.model.expr.errors import Refused

if TYPE_CHECKING:
    from cosim.model.expr.evaluator import Evaluator

__all__ = ["FUNCTIONS", "as_index"]

# Each function takes (evaluator, *positional args) and validates its arguments itself: numpy's
# own signatures accept dtypes and `out=` arrays, which expressions must not reach.


def _count(value: object, what: str) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise Refused(f"{what} must be a non-negative integer, got {value!r}")
    return value


def as_index(value: object) -> int:
    """An index or slice bound: an integer (a float with an integral value is accepted)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise Refused(f"indices must be integers or slices, got {value!r}")
    return value


def _number(value: object, func: str) -> float:
    if isinstance(value, np.ndarray):
        raise Refused(f"{func}() needs a number here, not an array")
    return value


def _array(value: object) -> np.ndarray:
    return value if isinstance(value, np.ndarray) else np.asarray(value, dtype=float)


def _shape(value: object) -> tuple[int, ...]:
    dims = [value] if not isinstance(value, np.ndarray) else list(value.ravel())
    if isinstance(value, np.ndarray) and (value.ndim != 1 or value.size > 32):
        raise Refused("a shape is a number or a short list of numbers")
    return tuple(_count(float(d), "a dimension") for d in dims)


def _elementwise(ufunc: np.ufunc) -> Callable:
    def apply(ev: Evaluator, *args: object) -> object:
        ev.reserve_broadcast(*args)
        return ufunc(*args)
    return apply


def _reduce(func: Callable, elementwise: np.ufunc | None = None) -> Callable:
    def apply(ev: Evaluator, a: object, *rest: object) -> object:
        if rest and elementwise is not None:    # min(a, b, ...): element-wise
            ev.reserve_broadcast(a, *rest)
            result = a
            for b in rest:
                result = elementwise(result, b)
            return result
        axis = None if not rest else as_index(rest[0])
        ev.reserve(np.size(a))
        return func(_array(a), axis=axis)
    return apply


def _constructor(fill: float) -> Callable:
    def make(ev: Evaluator, shape: object) -> np.ndarray:
        dims = _shape(shape)
        ev.reserve(math.prod(dims))
        return np.full(dims, fill, dtype=float)
    return make


def _eye(ev: Evaluator, n: object, m: object = None) -> np.ndarray:
    n = _count(n, "eye() size")
    m = n if m is None else _count(m, "eye() size")
    ev.reserve(n * m)
    return np.eye(n, m)


def _linspace(ev: Evaluator, start: object, stop: object, num: object = 50) -> np.ndarray:
    num = _count(num, "linspace() count")
    ev.reserve(num)
    return np.linspace(_number(start, "linspace"), _number(stop, "linspace"), num)


def _arange(ev: Evaluator, *args: object) -> np.ndarray:
    start, stop, step = (0, args[0], 1) if len(args) == 1 else (*args, 1)[:3]
    start, stop, step = (_number(v, "arange") for v in (start, stop, step))
    if step == 0:
        raise Refused("arange() step must not be zero")
    n = math.ceil((stop - start) / step)   # inf/nan raise OverflowError/ValueError in _run
    ev.reserve(max(n, 0) + 1)               # +1: numpy's length may round up by one
    return np.arange(start, stop, step, dtype=float)


def _diag(ev: Evaluator, v: object) -> np.ndarray:
    v = _array(v)
    if v.ndim not in (1, 2):
        raise Refused("diag() needs a vector or a matrix")
    ev.reserve(v.size**2 if v.ndim == 1 else min(v.shape))
    return np.diag(v).copy()


def _square(a: object, func: str) -> np.ndarray:
    if not isinstance(a, np.ndarray) or a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise Refused(f"{func}() needs a square matrix, got shape {np.shape(a)}")
    return a


def _inv(ev: Evaluator, a: object) -> np.ndarray:
    a = _square(a, "inv")
    ev.reserve(a.size, flops=a.shape[0] ** 3)
    return np.linalg.inv(a)


def _det(ev: Evaluator, a: object) -> float:
    a = _square(a, "det")
    ev.reserve(a.size, flops=a.shape[0] ** 3)
    return np.linalg.det(a)


def _copy(ev: Evaluator, a: object) -> np.ndarray:
    ev.reserve(np.size(a))
    return np.array(a, dtype=float)


def _transpose(ev: Evaluator, a: object) -> np.ndarray:
    return _array(a).T   # a view; the final result is copied


def _round(ev: Evaluator, x: object, decimals: object = 0) -> object:
    ev.reserve(np.size(x))
    return np.round(x, as_index(decimals))


def _clip(ev: Evaluator, x: object, lo: object, hi: object) -> object:
    ev.reserve_broadcast(x, lo, hi)
    return np.clip(x, lo, hi)


_UNARY = ("sin cos tan arcsin arccos arctan sinh cosh tanh exp log log10 log2 sqrt abs "
          "floor ceil sign deg2rad rad2deg")

#: Callable functions: name -> (implementation, min args, max args).
FUNCTIONS: Mapping[str, tuple[Callable, int, int]] = MappingProxyType({
    **{name: (_elementwise(getattr(np, name)), 1, 1) for name in _UNARY.split()},
    "arctan2": (_elementwise(np.arctan2), 2, 2), "hypot": (_elementwise(np.hypot), 2, 2),
    "round": (_round, 1, 2), "clip": (_clip, 3, 3),
    "min": (_reduce(np.min, np.minimum), 1, 99), "max": (_reduce(np.max, np.maximum), 1, 99),
    "sum": (_reduce(np.sum), 1, 2), "prod": (_reduce(np.prod), 1, 2),
    "mean": (_reduce(np.mean), 1, 2),
    "zeros": (_constructor(0.0), 1, 1), "ones": (_constructor(1.0), 1, 1), "eye": (_eye, 1, 2),
    "linspace": (_linspace, 2, 3), "arange": (_arange, 1, 3), "diag": (_diag, 1, 1),
    "array": (_copy, 1, 1), "transpose": (_transpose, 1, 1), "inv": (_inv, 1, 1),
    "det": (_det, 1, 1),
})
