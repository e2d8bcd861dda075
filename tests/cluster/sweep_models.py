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


def thermal_zone():
    """A two-node thermal zone (air and wall) heated through a saturated heater by a discrete
    PI (sample 0.1 s, output limits 0..q_max) tracking a set point, 16 blocks. Parameters:
    kp, ki, q_max (heater limit), r12 (air-wall resistance), c1 (air capacity); gains large
    enough that the heater and the PI's limits are active for part of every run."""
    from blocks import Constant, DiscretePID, Gain, Integrator, Saturation, Sum, ZeroOrderHold
    m = Model("zone", parameters={"kp": 8.0, "ki": 2.0, "q_max": 6.0, "r12": 0.5, "c1": 1.0})
    m.add(Step("ref", step_time=0.5, initial=18.0, final=21.0), Sum("e", "+-"),
          DiscretePID("pi", kp="=kp", ki="=ki", lower=-1.0, upper="=2 * q_max",
                      anti_windup="clamping", sample_time=0.1),
          Saturation("heater", lower=0.0, upper="=q_max"),
          ZeroOrderHold("sensor", sample_time=0.1),
          Integrator("t1", 18.0), Integrator("t2", 17.0), Sum("d12", "+-"),
          Gain("g12", "=1 / r12"), Sum("q1", "+-"), Gain("inv_c1", "=1 / c1"),
          Sum("d2o", "+-"), Constant("t_out", 10.0), Gain("g2o", 0.3), Sum("q2", "+-"),
          Gain("inv_c2", 0.25))
    m.connect("ref.out", "e.in1")
    m.connect("sensor.out", "e.in2")
    m.connect("e.out", "pi.in")
    m.connect("pi.out", "heater.in")
    m.connect("heater.out", "q1.in1")
    m.connect("t1.out", "sensor.in", "d12.in1")
    m.connect("t2.out", "d12.in2", "d2o.in1")
    m.connect("d12.out", "g12.in")
    m.connect("g12.out", "q1.in2", "q2.in1")
    m.connect("q1.out", "inv_c1.in")
    m.connect("inv_c1.out", "t1.in")
    m.connect("t_out.out", "d2o.in2")
    m.connect("d2o.out", "g2o.in")
    m.connect("g2o.out", "q2.in2")
    m.connect("q2.out", "inv_c2.in")
    m.connect("inv_c2.out", "t2.in")
    return m


#: The thermal-zone study's runs: RK4, dt 0.01, 20 s.
ZONE_CONFIG = SimulationConfig(dt=0.01, t_end=20.0, solver="RK4", log=["t1.out", "heater.out"])


def msd_friction():
    """The mass-spring-damper + PID of :func:`msd_pid` with the control force limited to
    +-``u_max`` (a Saturation) and a friction force from a Lookup1D map of the velocity
    (Stribeck-like, peak ``mu``, per-member table) subtracted from it: 18 blocks.
    Parameters kp, ki, kd, u_max, mu."""
    from blocks import Gain, Integrator, Lookup1D, Saturation, Sum
    m = Model("msdf", parameters={"kp": 20.0, "ki": 10.0, "kd": 5.0, "u_max": 8.0, "mu": 1.5})
    m.add(Step("ref", step_time=0.0, final=1.0), Sum("e", "+-"), Gain("kp", "=kp"),
          Integrator("ie", 0.0), Gain("ki", "=ki"), Sum("dfe", "+-"), Gain("kdn", "=kd * 100"),
          Gain("nf", 100.0), Integrator("xf", 0.0), Sum("u", "+++"),
          Saturation("lim", lower="=-u_max", upper="=u_max"),
          Lookup1D("fric", [-1.0, -0.05, -0.01, 0.0, 0.01, 0.05, 1.0],
                   "=[-0.6 * mu, -0.5 * mu, -mu, 0.0, mu, 0.5 * mu, 0.6 * mu]"),
          Sum("f", "+---"), Gain("inv_m", 1.0), Integrator("v", 0.0), Integrator("x", 0.0),
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
    m.connect("u.out", "lim.in")
    m.connect("lim.out", "f.in1")
    m.connect("c.out", "f.in2")
    m.connect("k.out", "f.in3")
    m.connect("fric.out", "f.in4")
    m.connect("f.out", "inv_m.in")
    m.connect("inv_m.out", "v.in")
    m.connect("v.out", "x.in", "c.in", "fric.in")
    return m


def limits_zoo():
    """The nonlinear blocks users put in swept models, each with a swept parameter that
    moves where it acts: a sine of amplitude ``amp`` through a dead zone (end ``dz``), a
    rate limiter (rising rate ``rise``), a saturation (upper ``hi``), the max with a floor,
    a Lookup1D whose middle breakpoint ``bp`` is a member's own, a Switch on the sine (threshold ``hi - 0.5``)
    between a gain and the exponential of ``-gain * |sine|`` (math per member), a first-order
    lag, and a relay sampled at 50 ms on the lag (on point ``on``)."""
    from blocks import (Abs, Constant, DeadZone, Gain, Lookup1D, MathFunction, MinMax,
                        RateLimiter, Relay, Saturation, Sine, Switch)
    m = Model("zoo", parameters={"amp": 1.5, "dz": 0.3, "rise": 4.0, "hi": 0.6, "bp": 0.2,
                                 "on": 0.3})
    m.add(Sine("s", amplitude="=amp", frequency=0.7),
          DeadZone("dz", start=-0.3, end="=dz"), RateLimiter("rl", rising="=rise",
                                                             falling=2.0),
          Saturation("sat", lower=-0.5, upper="=hi"), Constant("floor", -0.2),
          MinMax("mx", "max"),
          Lookup1D("map", [-1.0, "=bp", 1.0], [-2.0, 0.5, 1.0], extrapolation="linear"),
          Abs("a"), Gain("neg", "=-amp"), MathFunction("e", "exp"), Gain("g", 2.0),
          Switch("sw", ">=", threshold="=hi - 0.5"), FirstOrderLag("lag", tau=0.3),
          Relay("r", on_point="=on", off_point=0.0, sample_time=0.05))
    m.connect("s.out", "dz.in", "a.in", "sw.in2", "g.in")
    m.connect("dz.out", "rl.in")
    m.connect("rl.out", "sat.in")
    m.connect("sat.out", "mx.in1")
    m.connect("floor.out", "mx.in2")
    m.connect("mx.out", "map.in")
    m.connect("a.out", "neg.in")
    m.connect("neg.out", "e.in")
    m.connect("g.out", "sw.in1")
    m.connect("e.out", "sw.in3")
    m.connect("map.out", "lag.in")
    m.connect("lag.out", "r.in")
    return m


#: The zoo's runs: RK4, dt 0.01, 4 s (every nonlinearity acts for part of the run).
ZOO_CONFIG = SimulationConfig(dt=0.01, t_end=4.0, solver="RK4")


from cosim import Block as _Block, Kernel as _Kernel  # noqa: E402


class Ratio(_Block):
    """``out = a / b`` where ``b != 0``, else 0: a kernel whose branch raises for the
    members that do not take it (an ensemble must compute it only for those that do)."""

    input_ports = ("a", "b")

    def output_update(self, t, dt):
        import numpy as np
        a, b = float(self.inputs["a"][0]), float(self.inputs["b"][0])
        self.outputs["out"] = np.array([a / b if b != 0.0 else 0.0])

    def kernel(self):
        return _Kernel({"out": "(u_a / u_b if u_b != 0.0 else 0.0)"})


class Above(_Block):
    """``out = 1`` where ``b != 0 and a / b > 0.5``, else 0: the right operand of ``and``
    raises where its own run never evaluates it."""

    input_ports = ("a", "b")

    def output_update(self, t, dt):
        import numpy as np
        a, b = float(self.inputs["a"][0]), float(self.inputs["b"][0])
        self.outputs["out"] = np.array([1.0 if b != 0.0 and a / b > 0.5 else 0.0])

    def kernel(self):
        return _Kernel({"out": "(1.0 if u_b != 0.0 and u_a / u_b > 0.5 else 0.0)"})


def guarded():
    """A lag divided by a step to ``den`` at 0.1 s through :class:`Ratio` and compared by
    :class:`Above` (a member with ``den = 0`` takes the other branch: its own run never
    divides by zero), and a discrete
    PID (sample 50 ms) on the quotient whose derivative gain ``kd`` is structural (``kd =
    0`` drops the derivative's state)."""
    from blocks import DiscretePID
    m = lag()
    m.parameters.update({"den": 1.0, "kd": 0.0})
    m.add(Step("d", step_time=0.1, initial=1.0, final="=den"), Ratio("q"), Above("above"),
          DiscretePID("pid", kp=1.5, ki=0.5, kd="=kd", N=10.0, lower=-1.0, upper=1.0,
                      sample_time=0.05))
    m.connect("plant.out", "q.a", "above.a")
    m.connect("d.out", "q.b", "above.b")
    m.connect("q.out", "pid.in")
    return m


def thermostat():
    """A room heated by a relay thermostat (on below ``t_on``, off above ``t_off``) against
    the outside at ``t_out``, through a wall of conductance ``ua``; the relay reads the room's
    temperature (continuous state): its switches are located in time, per run."""
    from blocks import Constant, Gain, Integrator, Relay, Sum
    m = Model("thermostat", parameters={"t_on": 19.0, "t_off": 21.0, "ua": 0.2, "q": 6.0,
                                        "t_out": 5.0})
    m.add(Integrator("room", 15.0), Constant("outside", "=t_out"), Sum("d", "+-"),
          Gain("loss", "=ua"), Gain("neg", -1.0),
          Relay("r", on_point="=-t_on", off_point="=-t_off", on_value="=q", off_value=0.0),
          Sum("net", "+-"), Gain("cap", 0.5))
    m.connect("room.out", "d.in1", "neg.in")
    m.connect("outside.out", "d.in2")
    m.connect("d.out", "loss.in")
    m.connect("neg.out", "r.in")              # on when -T >= -t_on, i.e. T <= t_on
    m.connect("r.out", "net.in1")
    m.connect("loss.out", "net.in2")
    m.connect("net.out", "cap.in")
    m.connect("cap.out", "room.in")
    return m


#: The thermostat's runs: RK4, dt 0.01, 60 s (a few switches per run).
THERMOSTAT_CONFIG = SimulationConfig(dt=0.01, t_end=60.0, solver="RK4", log=["room.out"])


def bouncing(stop: bool = False):
    """A ball dropped from ``h0`` (thrown up at ``v0``) bouncing on a floor: a ZeroCrossing
    event of its height resetting its velocity (with ``stop``, ending the run instead)."""
    from blocks import Constant, Integrator
    from cosim.model.events import ZeroCrossing
    m = Model("bounce", parameters={"gain": 0.8, "h0": 1.0, "v0": 0.0})
    m.add(Constant("g", -9.81), Integrator("v", "=v0"), Integrator("x", "=h0"))
    m.connect("g.out", "v.in")
    m.connect("v.out", "x.in")
    m.add_event(ZeroCrossing("floor", "x", direction="falling", reset={"v": _bounce},
                             stop=stop))
    return m


def stopping():
    """:func:`bouncing` whose first impact ends the run."""
    return bouncing(stop=True)


def watching_signal():
    """:func:`bouncing` whose event watches the height's signal ``x.out`` (not the state)."""
    from cosim.model.events import ZeroCrossing
    m = Model("bounce_signal", parameters={"gain": 0.8, "h0": 1.0, "v0": 0.0})
    from blocks import Constant, Integrator
    m.add(Constant("g", -9.81), Integrator("v", "=v0"), Integrator("x", "=h0"))
    m.connect("g.out", "v.in")
    m.connect("v.out", "x.in")
    m.add_event(ZeroCrossing("floor", "x.out", direction="falling", reset={"v": _bounce}))
    return m


def kicked(callback: bool = False):
    """A damped oscillator kicked by scheduled events: its velocity reset to ``-0.5 *
    v`` at tick times (0.3 s and every 0.5 s from 1.0 s) and to 1.5 at 0.755 s (inside a
    step of 0.01 s); a ZeroCrossing of the position (rising) halves it. Parameters ``k``,
    ``c`` (stiffness, damping) and ``x0``. With ``callback``, the 0.3 s event also calls
    back (counting its calls in the model's ``calls``)."""
    from blocks import Gain, Integrator, Sum
    from cosim.model.events import Scheduled, ZeroCrossing
    m = Model("kicked", parameters={"k": 4.0, "c": 0.3, "x0": 1.0})
    m.add(Integrator("x", "=x0"), Integrator("v", 0.0), Gain("kx", "=-k"),
          Gain("cv", "=-c"), Sum("a", "++"))
    m.connect("x.out", "kx.in")
    m.connect("v.out", "x.in", "cv.in")
    m.connect("kx.out", "a.in1")
    m.connect("cv.out", "a.in2")
    m.connect("a.out", "v.in")
    m.add_event(Scheduled("kick", times=[0.3], period=0.5, start=1.0, reset={"v": _half_back},
                          callback=_count if callback else None))
    m.add_event(Scheduled("shove", times=[0.755], reset={"v": [1.5]}))
    m.add_event(ZeroCrossing("up", "x", direction="rising", reset={"v": _half}))
    return m


def kicked_resets():
    """:func:`kicked` without its zero crossing (resets alone: fired in the ensemble)."""
    m = kicked()
    m.events = [ev for ev in m.events if ev.name != "up"]
    return m


def kicked_callback():
    """:func:`kicked` whose 0.3 s event also calls back."""
    return kicked(callback=True)


def kicked_at_start():
    """:func:`kicked` whose position is reset below zero at the first tick (a run checks no
    crossing there) and above zero at 0.6 s (where it was below: a rising crossing of the
    watched position at a tick, fired there after the reset)."""
    from cosim.model.events import Scheduled
    m = kicked()
    m.add_event(Scheduled("drop", times=[0.0], reset={"x": _below}),
                Scheduled("lift", times=[0.6], reset={"x": _above}))
    return m


def _below(x):
    return -0.2 - 0.5 * abs(x)


def _above(x):
    return 0.3 + 0.5 * abs(x)


def kicked_stop():
    """:func:`kicked` ending at a scheduled stop at 1.234 s (inside a step)."""
    from cosim.model.events import Scheduled
    m = kicked()
    m.add_event(Scheduled("halt", times=[1.234], stop=True))
    return m


def kicked_resets_stop():
    """:func:`kicked_resets` ending at a scheduled stop at the tick 1.5 s."""
    from cosim.model.events import Scheduled
    m = kicked_resets()
    m.add_event(Scheduled("halt", times=[1.5], stop=True))
    return m


def kicked_lift_stop():
    """:func:`kicked_at_start` ending at a scheduled stop at 0.6 s, the tick whose reset
    makes the watched position cross: its run fires that crossing after the tick's outputs,
    then stops."""
    from cosim.model.events import Scheduled
    m = kicked_at_start()
    m.add_event(Scheduled("halt", times=[0.6], stop=True))
    return m


def _half_back(v):
    return -0.5 * v


def _half(v):
    return 0.5 * v


def _count(sim, t):
    sim.calls = getattr(sim, "calls", 0) + 1


def _bounce(v):
    return -0.8 * v


def zeros_and_nan():
    """Limits and extrema fed signed zeros (``-c`` for ``c = 0.0``) and NaN (``inf - inf``
    when ``g`` overflows ``1e308``): a run's ``min``/``max`` keep the first argument on ties
    and when a later one is NaN."""
    from blocks import Constant, Gain, MinMax, Saturation, Sum
    m = Model("zeros", parameters={"c": 0.0, "g": 0.5})
    m.add(Constant("c", "=c"), Gain("neg", -1.0), Constant("zero", 0.0),
          Constant("nzero", -0.0), Saturation("a", lower=0.0, upper=1.0),
          Saturation("b", lower=-1.0, upper=-0.0), MinMax("hi", "max"), MinMax("lo", "min"),
          Constant("big", 1e308), Gain("g", "=g"), Sum("nan", "+-"),
          Saturation("n", lower="=-c", upper=2.0), MinMax("nmax", "max"))
    m.connect("c.out", "neg.in")
    m.connect("neg.out", "a.in", "b.in", "hi.in1", "lo.in2")
    m.connect("zero.out", "hi.in2")
    m.connect("nzero.out", "lo.in1")
    m.connect("big.out", "g.in")
    m.connect("g.out", "nan.in1", "nan.in2")
    m.connect("nan.out", "n.in", "nmax.in2")
    m.connect("neg.out", "nmax.in1")
    return m


def paced_lag():
    """:func:`lag` taking ~0.1 s of wall time per run (a sweep slow enough to lose a node
    in; the numbers those of :func:`lag`)."""
    from tests.cluster.scenarios import Pace
    m = lag()
    m.add(Pace("pace", delay=0.002, every=0.02))
    m.connect("plant.out", "pace.in")
    return m
