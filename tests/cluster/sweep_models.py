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
    return m


class CountedFinal:
    """A reducer: the last value of ``plant.out``, each call counted in the file named by
    ``COSIM_SWEEP_COUNTER`` and slowed by ``pause`` seconds (the resume test kills a sweep
    mid-way and counts the runs done again)."""

    signals = ("plant.out",)

    def __init__(self, pause: float = 0.0):
        self.pause = pause

    def __repr__(self) -> str:
        return f"CountedFinal({self.pause})"

    def __call__(self, logs) -> float:
        with open(os.environ["COSIM_SWEEP_COUNTER"], "a") as fh:
            fh.write("run\n")
        time.sleep(self.pause)
        return float(logs["plant.out"][-1, 0])


#: The resume test's sweep: 20 runs of a few tens of milliseconds each.
RESUME_DESIGN = {"gain": [0.5, 1.0, 1.5, 2.0], "tau": [0.1, 0.2, 0.3, 0.4, 0.5]}


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


def virtual_lag():
    """The lag two virtual subsystems deep (``plant/inner/lag``), wired through their ports."""
    m = Model("vlag", parameters={"gain": 1.0, "tau": 0.2})
    inner = Subsystem("inner")
    inner.add(Inport("u"), FirstOrderLag("lag", tau="=tau", gain="=gain"), Outport("y"))
    inner.connect("u.out", "lag.in")
    inner.connect("lag.out", "y.in")
    plant = Subsystem("plant")
    plant.add(Inport("u"), inner, Outport("y"))
    plant.connect("u.out", "inner.u")
    plant.connect("inner.y", "y.in")
    m.add(Step("u", step_time=0.1, final=1.0), plant)
    m.connect("u.out", "plant.u")
    return m


def broken():
    m = lag()
    m.parameters["tau"] = "=0.1 + 0.1/(gain - 2)**2"      # gain = 2 divides by zero
    return m


if __name__ == "__main__":        # the driver the resume test kills
    import sys
    from cluster.sweep import grid, sweep
    # The module's own names (not __main__'s), so the sweep's fingerprint is the test's.
    from tests.cluster import sweep_models as sm
    sweep(sm.lag, sm.CONFIG, grid(sm.RESUME_DESIGN), {"y_end": sm.CountedFinal(0.05)},
          out_dir=Path(sys.argv[1]), backend="serial")


def linear():
    """``y = 2 x1 + x2 - 0.5 x3`` of three parameters, one step: a function with exactly
    known sensitivity indices."""
    from blocks import Constant, Gain, Sum
    m = Model("linear", parameters={"x1": 0.0, "x2": 0.0, "x3": 0.0})
    m.add(Constant("c1", "=x1"), Constant("c2", "=x2"), Constant("c3", "=x3"),
          Gain("a1", 2.0), Gain("a3", 0.5), Sum("y", "++-"))
    m.connect("c1.out", "a1.in")
    m.connect("c3.out", "a3.in")
    m.connect("a1.out", "y.in1")
    m.connect("c2.out", "y.in2")
    m.connect("a3.out", "y.in3")
    return m


LINEAR_CONFIG = SimulationConfig(dt=0.1, t_end=0.1)


def pi_loop():
    """Ten blocks: a PI controller (parameters kp, ki) closing a loop around a first-order
    plant (parameter tau), with a measurement gain and the integral of the output."""
    from blocks import Gain, Integrator, Sum
    m = Model("pi_loop", parameters={"kp": 2.0, "ki": 1.0, "tau": 0.5})
    m.add(Step("ref", step_time=0.1, final=1.0), Sum("e", "+-"), Gain("kp", "=kp"),
          Integrator("ie", 0.0), Gain("ki", "=ki"), Sum("u", "++"),
          FirstOrderLag("plant", tau="=tau", gain=1.0), Gain("meas", 1.0),
          Gain("scale", 1.0), Integrator("area", 0.0))
    m.connect("ref.out", "e.in1")
    m.connect("meas.out", "e.in2")
    m.connect("e.out", "kp.in", "ie.in")
    m.connect("ie.out", "ki.in")
    m.connect("kp.out", "u.in1")
    m.connect("ki.out", "u.in2")
    m.connect("u.out", "plant.in")
    m.connect("plant.out", "meas.in", "scale.in")
    m.connect("scale.out", "area.in")
    return m


#: The benchmark study's runs: 1,000 RK4 steps of :func:`pi_loop` on the fast path.
PI_CONFIG = SimulationConfig(dt=1e-3, t_end=1.0, solver="RK4", log=["plant.out", "area.out"])


def sized():
    """A constant vector of ``n`` ones through a gain ``gain``: ``n`` changes the plan's
    structure (its signals' shapes), ``gain`` does not."""
    from blocks import Constant, Gain
    m = Model("sized", parameters={"n": 1, "gain": 1.0})
    m.add(Constant("c", "=ones(n)"), Gain("g", "=gain"))
    m.connect("c.out", "g.in")
    return m


def msd_pid():
    """A mass-spring-damper (m=1, c=0.5, k=2) with a PID of parameters kp, ki, kd (derivative
    filter N=100) tracking a unit step, built from elementary blocks (16 blocks)."""
    from blocks import Gain, Integrator, Sum
    m = Model("msd", parameters={"kp": 20.0, "ki": 10.0, "kd": 5.0})
    m.add(Step("ref", step_time=0.0, final=1.0), Sum("e", "+-"), Gain("kp", "=kp"),
          Integrator("ie", 0.0), Gain("ki", "=ki"), Sum("dfe", "+-"), Gain("kdn", "=kd * 100"),
          Gain("nf", 100.0), Integrator("xf", 0.0), Sum("u", "+++"), Sum("f", "+--"),
          Gain("inv_m", 1.0), Integrator("v", 0.0), Integrator("x", 0.0),
          Gain("c", 0.5), Gain("k", 2.0))
    m.connect("ref.out", "e.in1")
    m.connect("x.out", "e.in2", "k.in")
    m.connect("e.out", "kp.in", "ie.in", "dfe.in1")
    m.connect("ie.out", "ki.in")
    m.connect("xf.out", "dfe.in2")
    m.connect("dfe.out", "kdn.in", "nf.in")
    m.connect("nf.out", "xf.in")
    m.connect("kp.out", "u.in1")
    m.connect("ki.out", "u.in2")
    m.connect("kdn.out", "u.in3")
    m.connect("u.out", "f.in1")
    m.connect("c.out", "f.in2")
    m.connect("k.out", "f.in3")
    m.connect("f.out", "inv_m.in")
    m.connect("inv_m.out", "v.in")
    m.connect("v.out", "x.in", "c.in")
    return m


#: The ensemble benchmark's runs: RK4, dt 1e-3, 10 s.
MSD_CONFIG = SimulationConfig(dt=1e-3, t_end=10.0, solver="RK4", log=["x.out"])


def relay_loop():
    """A lag switched by a relay on its own output: a block with located mode switches."""
    from blocks import Relay
    m = lag()
    m.add(Relay("r", on_point=0.5, off_point=0.2))
    m.connect("plant.out", "r.in")
    return m


def held():
    """The lag's output sampled at 50 ms by a zero-order hold and delayed one sample: a
    multirate model with discrete state."""
    from blocks import UnitDelay, ZeroOrderHold
    m = lag()
    m.add(ZeroOrderHold("hold", sample_time=0.05), UnitDelay("delay", sample_time=0.05))
    m.connect("plant.out", "hold.in")
    m.connect("hold.out", "delay.in")
    return m


def timed_step():
    """The lag driven by a step at a parameter time ``t_step`` and of height ``height``
    through a saturation-free gain: members switch at their own ticks."""
    from blocks import Gain
    m = Model("timed_step", parameters={"t_step": 0.1, "height": 1.0, "tau": 0.2})
    m.add(Step("u", step_time="=t_step", final="=height"), Gain("g", -2.5),
          FirstOrderLag("plant", tau="=tau", gain=1.0))
    m.connect("u.out", "g.in")
    m.connect("g.out", "plant.in")
    return m


def cosim_loop(b_name: str = "b"):
    """Three units in a loop, a parameter in each: plant ``a`` (x' = u - k x), integrator
    ``b`` that fails from ``t_fail`` on (a run that fails mid-way), and the source of
    frequency ``freq`` with the error sum (the rest). ``b_name`` renames unit b (another
    structure: the units group into other processes)."""
    from blocks import Gain, Integrator, Sine, Sum
    from tests.cluster.scenarios import Fail
    m = Model("coloop", parameters={"k": 1.0, "freq": 0.3, "t_fail": 100.0})
    a = Subsystem("a", atomic=True, dt=0.002, solver="RK4")
    a.add(Inport("u"), Integrator("x", 1.0), Gain("k", "=-k"), Sum("s", "++"), Outport("y"))
    a.connect("u.out", "s.in1")
    a.connect("x.out", "k.in", "y.in")
    a.connect("k.out", "s.in2")
    a.connect("s.out", "x.in")
    b = Subsystem(b_name, atomic=True, dt=0.002, solver="RK4")
    b.add(Inport("u"), Integrator("x", 0.0), Fail("fail", "=t_fail"), Outport("y"))
    b.connect("u.out", "x.in")
    b.connect("x.out", "fail.in")
    b.connect("fail.out", "y.in")
    m.add(a, b, Sine("src", frequency="=freq"), Sum("e", "+-"))
    m.connect("src.out", "e.in1")
    m.connect(f"{b_name}.y", "e.in2")
    m.connect("e.out", "a.u")
    m.connect("a.y", f"{b_name}.u")
    return m


def cosim_loop_config(backend: str) -> SimulationConfig:
    """:func:`cosim_loop`'s runs: 0.6 s at H = 10 ms, units on ``backend``."""
    return SimulationConfig(dt=0.002, t_end=0.6, solver="RK4",
                            cosim=CosimConfig(H=0.01, backend=backend))


def paced_lag():
    """:func:`lag` taking ~0.1 s of wall time per run (a sweep slow enough to lose a node
    in; the numbers those of :func:`lag`)."""
    from tests.cluster.scenarios import Pace
    m = lag()
    m.add(Pace("pace", delay=0.002, every=0.02))
    m.connect("plant.out", "pace.in")
    return m
