"""Quickstart: a sine through a gain, a slow sample-and-delay and a difference, logged and saved.

Run: python examples/quickstart.py
"""

from pathlib import Path

from blocks import Gain, Recorder, Sine, Sum, UnitDelay
from cosim import Model, SimulationConfig, Simulator


def build() -> Model:
    m = Model("quickstart")
    m.add(Sine("src", amplitude=1.0, frequency=0.5))
    m.add(Gain("g", 2.0))
    m.add(UnitDelay("hold", sample_time=0.05))        # a slower task: 50 ms
    m.add(Sum("err", "+-"))
    m.add(Recorder("rec"))
    m.connect("src.out", "g.in", "hold.in")           # fan-out
    m.connect("g.out", "err.in1")
    m.connect("hold.out", "err.in2")
    m.connect("err.out", "rec.in")
    return m


def main() -> None:
    sim = Simulator(build(), SimulationConfig(dt=0.01, t_end=2.0))
    print(sim.plan.table())
    logs = sim.run()
    out = Path("quickstart_results.npz")
    logs.to_npz(out)
    print(f"\n{len(logs)} signals, {len(logs.time)} base samples; "
          f"rec.in at t=2: {logs['rec.in'][-1, 0]:+.6f}; saved {out}")


if __name__ == "__main__":
    main()
