"""The trivial-unit ring the master and backend benchmarks share."""

from blocks import UnitDelay
from cosim import Inport, Model, Outport, Subsystem


def ring(n: int) -> Model:
    """``n`` atomic units (Inport -> UnitDelay -> Outport) wired in a ring."""
    m = Model("trivial")
    for i in range(n):
        s = Subsystem(f"u{i}", atomic=True)
        s.add(Inport("u"), UnitDelay("d", 1.0), Outport("y"))
        s.connect("u.out", "d.in")
        s.connect("d.out", "y.in")
        m.add(s)
    for i in range(n):
        m.connect(f"u{i}.y", f"u{(i + 1) % n}.u")
    return m
