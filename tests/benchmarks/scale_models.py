"""Large diagrams for the scale benchmarks and tests (issue 17): a chain, a wide model and
continuous chains.

Gains near 1 with a few distinct values, so 100,000 of them in series neither overflow nor
vanish, and every block is a different kernel literal before parameters are lifted.
"""

import math

from blocks import FirstOrderLag, Gain, Lookup1D, Saturation, Sine
from cosim import Model


def gain(i: int) -> float:
    return 1.0 + 1e-6 * (i % 7) - 3e-6


def chain(n: int) -> Model:
    """A sine driving ``n - 1`` gains in series (``n`` blocks, ``n`` levels)."""
    m = Model("chain")
    m.add(Sine("src", 1.0, 0.5))
    prev = "src.out"
    for i in range(n - 1):
        m.add(Gain(f"g{i}", gain(i)))
        m.connect(prev, f"g{i}.in")
        prev = f"g{i}.out"
    return m


def wide(n: int, length: int = 100) -> Model:
    """A sine driving ``n // length`` parallel chains of ``length`` gains (``n`` blocks less
    the chains' count plus one, ``length + 1`` levels)."""
    m = Model("wide")
    m.add(Sine("src", 1.0, 0.5))
    for c in range(n // length):
        prev = "src.out"
        for i in range(length - 1 if c == 0 else length):
            m.add(Gain(f"g{c}_{i}", gain(c + i)))
            m.connect(prev, f"g{c}_{i}.in")
            prev = f"g{c}_{i}.out"
    return m


def lags(n: int, lookup: bool = False) -> Model:
    """A sine driving ``(n - 1) // 2`` pairs of a first-order lag and a saturation in series
    (about ``n`` blocks, as many continuous-state components as lags).

    A lag's output is its state: every lag is at the first level of the plan and every
    saturation at the second, so the vector strategy runs each kind as one group (a
    saturation's ``min``/``max`` lowered to an elementwise selection). With ``lookup``, the
    saturations are tables clipping alike (:class:`~blocks.Lookup1D`, whose kernel tests
    its input in conditional expressions): each is a group of its own, so the plan runs on the
    scalar strategy with inline Runge–Kutta stages. The lags start at 0.5: from zero, the
    values far down the chain would be subnormal for hundreds of steps (a hundred times
    slower arithmetic, whatever runs it).
    """
    m = Model("lookups" if lookup else "lags")
    m.add(Sine("src", 1.0, 0.5))
    prev = "src.out"
    for i in range((n - 1) // 2):
        limit = Lookup1D(f"q{i}", [-0.9, 0.9], [-0.9, 0.9]) if lookup else \
            Saturation(f"q{i}", -0.9, 0.9)
        m.add(FirstOrderLag(f"f{i}", tau=0.02 + 0.001 * (i % 7), gain=1.2, initial=0.5), limit)
        m.connect(prev, f"f{i}.in")
        m.connect(f"f{i}.out", f"q{i}.in")
        prev = f"q{i}.out"
    return m


def lookups(n: int) -> Model:
    """:func:`lags` whose saturations are clipping tables: the scalar strategy's plan."""
    return lags(n, lookup=True)


def last(model: Model) -> str:
    """The output of the model's last block (the one to log)."""
    return f"{model.blocks[-1].name}.out"


def oracle(model: Model, k: int, dt: float) -> float:
    """The last block's output at tick ``k``: the sine, then each gain of the last chain
    applied in series in Python floats (the order the diagram multiplies in)."""
    name = model.blocks[-1].name
    prefix = name[:name.index("_") + 1] if "_" in name else "g"
    y = math.sin(2 * math.pi * 0.5 * (0.0 + k * dt))
    for b in model.blocks[1:]:
        if b.name.startswith(prefix):
            y = b.k * y
    return y
