"""Events: a bouncing ball. A zero crossing of the height (falling) is located on the solver's
dense output and resets the velocity: v <- -e*v. Prints the impact times next to the
analytic ones.

Run: python examples/bouncing_ball.py
"""

import math

from blocks import Constant
from blocks.continuous import Integrator
from cosim import Model, SimulationConfig, Simulator
from cosim.model.events import ZeroCrossing

G, E, H0 = 9.81, 0.8, 10.0


def build() -> Model:
    m = Model("ball")
    m.add(Constant("g", -G), Integrator("v", 0.0), Integrator("x", H0))
    m.connect("g.out", "v.in")
    m.connect("v.out", "x.in")
    m.add_event(ZeroCrossing("impact", "x", direction="falling", reset={"v": lambda v: -E * v},
                             tol=1e-13))
    return m


def main() -> None:
    sim = Simulator(build(), SimulationConfig(dt=0.01, t_end=8.0, solver="RK45", rtol=1e-10,
                                              atol=1e-12))
    sim.run()
    t, v = math.sqrt(2 * H0 / G), math.sqrt(2 * H0 * G)
    print(f"{'impact':>6} {'cosim t (s)':>14} {'analytic t (s)':>15} {'error':>9}")
    for n, (te, _) in enumerate(sim.event_log, start=1):
        print(f"{n:>6} {te:14.10f} {t:15.10f} {abs(te - t):9.1e}")
        v *= E
        t += 2 * v / G


if __name__ == "__main__":
    main()
