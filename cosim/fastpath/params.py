"""Parameters as data: a kernel's float literals become named parameters.

Blocks write their parameters into kernel expressions as literals (``"0.9 * u_in"``). Lifted
out as ``p__0``, ``p__1``, ... (values kept in the kernel's ``params``), the expressions of two
gains with different ``k`` are one template: the vector strategy runs them as one numpy
operation, and the generated source names the values instead of spelling them, so it depends
only on the plan's structure and a changed parameter reuses the compiled code
(:mod:`cosim.fastpath.cache`).

A literal and a variable holding the same float give the same IEEE results: ``repr`` of a
float round-trips exactly, and Python's compile-time constant folding uses the run-time
arithmetic, so lifted code is bit-identical to the literal code.
"""

from __future__ import annotations

import functools
import re

from cosim.model.block import Kernel

__all__ = ["lift", "lift_like"]

#: A float literal: digits with a point or an exponent, not part of a name or an attribute.
#: Integer literals (``% 2``, ``l_0``) stay: they are structure, not parameters.
_LITERAL = r"(?:\d+\.\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+)"
_FLOAT = re.compile(rf"(?<![\w.])({_LITERAL})(?![\w.])")


def lift(kern: Kernel) -> Kernel:
    """``kern`` with every float literal of its expressions replaced by a parameter ``p__<n>``.

    Parameters
    ----------
    kern : Kernel

    Returns
    -------
    Kernel
        The same expressions over ``p__0``, ``p__1``, ... (numbered in order of appearance:
        outputs, states, derivatives, continuous-state updates), its ``params`` extended by
        their values. ``kern`` itself when it has no float literal. Kernels are never
        modified: blocks whose kernels are spelt alike, without parameters or live values of
        their own, share one lifted kernel (a plan's kernels would otherwise hold about
        0.6 kB per block while its code is generated).
    """
    texts = (tuple(kern.outputs.items()), tuple(kern.state.items()), kern.derivatives,
             kern.cstate, tuple(kern.held.items()), kern.surfaces)
    if not kern.params and kern.live is None:
        return _shared(texts) or kern
    shape, values = _lifted(texts)
    if not values:
        return kern
    outputs, state, derivatives, cstate, held, surfaces = shape
    params = dict(kern.params)
    params.update((f"_{j}", v) for j, v in enumerate(values))
    return Kernel(dict(outputs), dict(state), derivatives, cstate, params, kern.live,
                  dict(held), surfaces)


def lift_like(kern: Kernel, ref: Kernel) -> Kernel | None:
    """``lift(kern)`` when ``kern``'s float literals stand where ``ref``'s lifted parameters
    do (another member of an ensemble: the same block with other values), found by one
    anchored match of ``ref``'s template instead of a scan for literals; else None (lift it
    and compare).

    The same literals are found: in ``ref``'s template a parameter is never next to a
    letter, digit or point (a literal's bounds), and the characters around each piece are a
    literal's in both texts.

    Parameters
    ----------
    kern : Kernel
        As a block gives it (literals inline).
    ref : Kernel
        A lifted kernel.

    Returns
    -------
    Kernel or None
        ``ref``'s expressions with ``kern``'s values (the expression containers are
        ``ref``'s own: kernels are never modified).
    """
    pattern = _anchored(_joined(ref))
    if pattern is None:
        return None
    found = pattern.fullmatch("\0".join(_joined(kern)))
    if found is None:
        return None
    # (More literals than names: the keys differ, and lift() is called.)
    params = {**kern.params, **dict(zip(_NAMES, map(float, found.groups())))}
    if params.keys() != ref.params.keys():
        return None
    return Kernel(ref.outputs, ref.state, ref.derivatives, ref.cstate, params, kern.live,
                  ref.held, ref.surfaces)


def _joined(kern: Kernel) -> tuple:
    """Every expression of ``kern``, in the order :func:`lift` numbers their literals."""
    return (*kern.outputs.values(), *kern.state.values(), *kern.derivatives, *kern.cstate,
            *kern.held.values(), *kern.surfaces)


#: The names :func:`lift` gives its parameters in ``params``, in order.
_NAMES = tuple(f"_{j}" for j in range(4096))


@functools.lru_cache(maxsize=256)
def _anchored(texts: tuple) -> re.Pattern | None:
    """The lifted expressions ``texts`` (joined by NUL) as a pattern matching a kernel
    whose literals stand for ``p__0``, ``p__1``, ... in turn; None when they are not
    numbered in order (or there are none)."""
    parts = re.split(r"\bp__(\d+)\b", "\0".join(texts))
    numbers = [int(x) for x in parts[1::2]]
    if not numbers or numbers != list(range(len(numbers))):
        return None
    return re.compile(f"({_LITERAL})".join(re.escape(p) for p in parts[0::2]))


@functools.lru_cache(maxsize=4096)
def _shared(texts: tuple) -> Kernel | None:
    """The lifted kernel of expressions ``texts`` (see :func:`_lifted`) without parameters
    or live values of the block's own, one per spelling; None when it has no float
    literal."""
    (outputs, state, derivatives, cstate, held, surfaces), values = _lifted(texts)
    if not values:
        return None
    return Kernel(dict(outputs), dict(state), derivatives, cstate,
                  {f"_{j}": v for j, v in enumerate(values)}, None, dict(held), surfaces)


@functools.lru_cache(maxsize=4096)
def _lifted(texts: tuple) -> tuple[tuple, tuple[float, ...]]:
    """``(outputs, state, derivatives, cstate, held, surfaces)`` with their literals named,
    and the literals' values (memoized: large models repeat a few kernels with the same values)."""
    values: list[str] = []
    outputs, state, derivatives, cstate, held, surfaces = texts
    shape = (tuple((p, _template(e, values)) for p, e in outputs),
             tuple((n, _template(e, values)) for n, e in state),
             tuple(_template(e, values) for e in derivatives),
             tuple(_template(e, values) for e in cstate),
             tuple((p, _template(e, values)) for p, e in held),
             tuple(_template(e, values) for e in surfaces))
    return shape, tuple(float(v) for v in values)


def _template(text: str, values: list[str]) -> str:
    """``text`` with its float literals named ``p__<n>`` (numbered on from ``len(values)``);
    the literals are appended to ``values``."""
    parts = _FLOAT.split(text)
    if len(parts) == 1:
        return text
    out = [parts[0]]
    for lit, rest in zip(parts[1::2], parts[2::2]):
        out.append(f"p__{len(values)}")
        out.append(rest)
        values.append(lit)
    return "".join(out)
