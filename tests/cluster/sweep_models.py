"""Models for the sweep tests (importable by worker processes)."""

import os
import time
from pathlib import Path

from blocks import FirstOrderLag, Step
from cosim import CosimConfig, Inport, Model, Outport, SimulationConfig, Subsystem

CONFIG = SimulationConfig(dt=0.01, t_end=1.0, solver="RK4")
#: Runs of a few tenths of a second (the interpreter at a fine step): long enough to overlap.
SLOW_CONFIG = SimulationConfig(dt=1e-4, t_end=1.0, solver="RK4", fast=False)


def finished_at(logs) -> float:
    """A reducer: the wall-clock time the run finished (to see which runs overlapped)."""
    return time.time()


def lag():
    """A unit step through a first-order lag: parameters gain and tau."""
    m = Model("lag", parameters={"gain": 1.0, "tau": 0.2})
    m.add(Step("u", step_time=0.1, final=1.0), FirstOrderLag("plant", tau="=tau", gain="=gain"))
    m.connect("u.out", "plant.in")
    counter = os.environ.get("COSIM_SWEEP_COUNTER")
    if counter:                       # the resume test counts executions
        with open(counter, "a") as fh:
            fh.write("run\n")
    return m


def cosim_lag():
    """The same lag as an atomic unit, co-simulated."""
    m = Model("colag", parameters={"gain": 1.0, "tau": 0.2})
    sub = Subsystem("plant", atomic=True, dt=0.01, solver="RK4")
    sub.add(Inport("u"), FirstOrderLag("lag", tau="=tau", gain="=gain"), Outport("y"))
    sub.connect("u.out", "lag.in")
    sub.connect("lag.out", "y.in")
    m.add(Step("u", step_time=0.1, final=1.0), sub)
    m.connect("u.out", "plant.u")
    return m


COSIM_CONFIG = SimulationConfig(dt=0.01, t_end=1.0, cosim=CosimConfig(H=0.05))


def broken():
    m = lag()
    m.parameters["tau"] = "=0.1 + 0.1/(gain - 2)**2"      # gain = 2 divides by zero
    return m


if __name__ == "__main__":        # the driver the resume test kills
    import sys
    from cluster.sweep import final, grid, sweep
    out = Path(sys.argv[1])
    sweep(lag, CONFIG, grid(gain=[0.5, 1.0, 1.5, 2.0], tau=[0.1, 0.2, 0.3, 0.4, 0.5]),
          {"y_end": final("plant.out")}, out_dir=out, backend="serial")
