"""Models for the dashboard tests and benchmark."""

from __future__ import annotations

from blocks import FirstOrderLag, Gain, Sine
from cosim import CosimConfig, Inport, Model, Outport, SimulationConfig, Subsystem


def chain(n: int) -> tuple[Model, SimulationConfig]:
    """``n`` blocks at the top level: a sine through a chain of gains (one unit)."""
    m = Model(f"chain{n}")
    m.add(Sine("src", frequency=1.0))
    prev = "src"
    for i in range(n - 1):
        m.add(Gain(f"g{i}", 1.0))
        m.connect(f"{prev}.out", f"g{i}.in")
        prev = f"g{i}"
    return m, SimulationConfig(dt=0.01, t_end=1.0)


def two_lags(t_end: float = 10.0, H: float = 0.001, backend: str = "local",
             micro: int = 1):
    """Two units, each a first-order lag, in a loop: 1,000 macro steps per simulated
    second at ``H`` = 1 ms; each unit takes ``micro`` RK4 steps per macro step."""
    m = Model("two_lags")
    for name, other in (("p", "q"), ("q", "p")):
        s = Subsystem(name, atomic=True)
        s.add(Inport("u"), FirstOrderLag("lag", tau=0.5), Outport("y"))
        s.connect("u.out", "lag.in")
        s.connect("lag.out", "y.in")
        m.add(s)
    m.add(Sine("src", frequency=0.5))
    m.connect("p.y", "q.u")
    m.connect("q.y", "p.u")
    return m, SimulationConfig(dt=H / micro, t_end=t_end, solver="RK4", cosim=CosimConfig(
        H=H, scheme="jacobi", backend=backend))
