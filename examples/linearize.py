"""Analysis: linearise a mass-spring-damper built from blocks, find its steady state under a
constant force, and compare with the textbook matrices.

Run: python examples/linearize.py
"""

import numpy as np

from blocks import Constant, Gain, Sum
from blocks.continuous import Integrator
from cosim import Model, SimulationConfig, Simulator

M, C, K = 2.0, 0.6, 8.0


def build() -> Model:
    m = Model("msd")
    m.add(Constant("force", 4.0), Sum("net", "+--"), Gain("inv_m", 1 / M), Integrator("v", 0.0),
          Integrator("x", 0.0), Gain("damper", C), Gain("spring", K))
    m.connect("force.out", "net.in1")
    m.connect("damper.out", "net.in2")
    m.connect("spring.out", "net.in3")
    m.connect("net.out", "inv_m.in")
    m.connect("inv_m.out", "v.in")
    m.connect("v.out", "x.in", "damper.in")
    m.connect("x.out", "spring.in")
    return m


def main() -> None:
    sim = Simulator(build(), SimulationConfig(dt=0.01, t_end=1.0))
    sim.initialize()
    A, B, Cm, D = sim.linearize(inputs=["force.out"], outputs=["x.out", "v.out"])
    order = list(sim.state_slices())          # which state is which
    print("states:", order)
    print("A =\n", np.round(A, 9), "\nB =\n", np.round(B, 9))
    x = sim.steady_state()
    print(f"steady state under 4 N: x = {x[order.index('x')]:.9f} m (F/k = {4.0 / K:.9f})")


if __name__ == "__main__":
    main()
