"""An electric vehicle owned by five teams, co-simulated: the showcase model.

Each team owns one atomic subsystem, which becomes one unit with its own step and solver:

==========  ===================================================  =====================
unit        what it models                                       step / solver
==========  ===================================================  =====================
cycle       drive cycle: the speed the driver asks for           10 ms, discrete
control     PI speed controller with torque limits               10 ms, discrete
motor       motor + inverter: torque response (first-order lag),  1 ms, RK4
            electrical power, current drawn from the battery
battery     state of charge, open-circuit voltage, internal R     1 ms, RK4
vehicle     longitudinal dynamics: drive force, drag, rolling     1 ms, RK4
==========  ===================================================  =====================

The motor draws ``I = P / V`` from the battery while the battery's terminal voltage is
``V = OCV(SOC) - R*I``: the two units are coupled algebraically (each output depends directly
on the other's), so the master iterates that coupling to a fixed point every macro step.

Run: python examples/electric_vehicle.py [--backend local|ray|zmq] [--plot ev.png]

A team serves its unit from its own machine (see the README's "Serve a unit to another
team" for the same with the model file ``examples/electric_vehicle.yaml`` and CURVE keys):

    python examples/electric_vehicle.py --export-unit battery battery.yaml
    cosim serve battery.yaml --bind tcp://127.0.0.1:5555
    python examples/electric_vehicle.py --remote battery=tcp://127.0.0.1:5555
"""

from __future__ import annotations

import argparse

import numpy as np

from blocks import (Constant, DiscretePID, FromArray, Gain, Lookup1D, Product, Saturation,
                    Sum)
from blocks.continuous import Integrator
from cosim import CoSimulation, CosimConfig, Inport, Model, Outport, SimulationConfig, Subsystem

PARAMETERS = {
    "mass": 1600.0,        # kg
    "wheel_r": 0.31,       # m
    "gear": 9.0,           # motor turns per wheel turn
    "cd_a": 0.65,          # drag coefficient x frontal area, m^2
    "c_roll": 0.012,       # rolling resistance coefficient
    "tau_m": 0.05,         # s, torque response of the motor + inverter
    "t_max": 250.0,        # N m
    "eta": 0.92,           # drive efficiency
    "capacity": 60.0,      # A h
    "r_int": 0.08,         # ohm
    "soc0": 0.9,
}


def drive_cycle():
    """A short urban cycle: accelerate, cruise, accelerate, brake, stop (speed in m/s)."""
    t = np.array([0, 2, 12, 22, 30, 40, 50, 58, 60.0])
    v = np.array([0, 0, 13.9, 13.9, 19.4, 19.4, 5.0, 0, 0])
    return t, v


def subsystem(name, atomic, dt, solver=None):
    if not atomic:
        return Subsystem(name)
    return Subsystem(name, atomic=True, dt=dt, solver=solver)


def build(atomic: bool = True) -> Model:
    """The vehicle model; ``atomic=False`` gives the same diagram as virtual subsystems."""
    m = Model("electric_vehicle", parameters=dict(PARAMETERS))

    cycle = subsystem("cycle", atomic, 0.01)
    t, v = drive_cycle()
    cycle.add(FromArray("profile", t, v, sample_time=0.01), Outport("v_ref"))
    cycle.connect("profile.out", "v_ref.in")

    control = subsystem("control", atomic, 0.01)
    control.add(Inport("v_ref"), Inport("v"), Sum("err", "+-"),
                DiscretePID("pi", kp=600.0, ki=60.0, lower="=-t_max", upper="=t_max",
                            anti_windup="clamping", sample_time=0.01),
                Outport("torque_demand"))
    control.connect("v_ref.out", "err.in1")
    control.connect("v.out", "err.in2")
    control.connect("err.out", "pi.in")
    control.connect("pi.out", "torque_demand.in")

    motor = subsystem("motor", atomic, 0.001, "RK4")
    motor.add(Inport("torque_demand"), Inport("w"), Inport("v_batt", initial=360.0),
              Saturation("limit", "=-t_max", "=t_max"), Sum("lag_err", "+-"),
              Gain("lag_k", "=1/tau_m"), Integrator("torque_state", 0.0),
              Product("p_mech", "**"), Gain("p_elec", "=1/eta"), Product("current_", "*/"),
              Outport("torque"), Outport("current"))
    motor.connect("torque_demand.out", "limit.in")
    motor.connect("limit.out", "lag_err.in1")
    motor.connect("torque_state.out", "lag_err.in2", "p_mech.in1", "torque.in")
    motor.connect("lag_err.out", "lag_k.in")
    motor.connect("lag_k.out", "torque_state.in")
    motor.connect("w.out", "p_mech.in2")
    motor.connect("p_mech.out", "p_elec.in")
    motor.connect("p_elec.out", "current_.in1")
    motor.connect("v_batt.out", "current_.in2")
    motor.connect("current_.out", "current.in")

    battery = subsystem("battery", atomic, 0.001, "RK4")
    battery.add(Inport("current"), Gain("drain", "=-1/(3600*capacity)"),
                Integrator("soc", "=soc0"),
                Lookup1D("ocv", [0.0, 0.1, 0.5, 0.9, 1.0], [300.0, 340.0, 360.0, 390.0, 400.0]),
                Gain("drop", "=-r_int"), Sum("v_term", "++"), Outport("v_batt"), Outport("soc_out"))
    battery.connect("current.out", "drain.in", "drop.in")
    battery.connect("drain.out", "soc.in")
    battery.connect("soc.out", "ocv.in", "soc_out.in")
    battery.connect("ocv.out", "v_term.in1")
    battery.connect("drop.out", "v_term.in2")
    battery.connect("v_term.out", "v_batt.in")

    vehicle = subsystem("vehicle", atomic, 0.001, "RK4")
    # A stopped vehicle is held by its brakes: its speed does not go below zero.
    vehicle.add(Inport("torque"), Gain("drive", "=gear/wheel_r"),
                Integrator("speed", 0.0, lower=0.0),
                Product("v2", "**"), Gain("aero", "=-0.5*1.2*cd_a"),
                Constant("roll", "=-c_roll*mass*9.81"), Sum("force", "+++"),
                Gain("accel", "=1/mass"), Gain("to_motor", "=gear/wheel_r"),
                Outport("v"), Outport("w"))
    vehicle.connect("torque.out", "drive.in")
    vehicle.connect("drive.out", "force.in1")
    vehicle.connect("speed.out", "v2.in1", "v2.in2", "v.in", "to_motor.in")
    vehicle.connect("v2.out", "aero.in")
    vehicle.connect("aero.out", "force.in2")
    vehicle.connect("roll.out", "force.in3")
    vehicle.connect("force.out", "accel.in")
    vehicle.connect("accel.out", "speed.in")
    vehicle.connect("to_motor.out", "w.in")

    m.add(cycle, control, motor, battery, vehicle)
    m.connect("cycle.v_ref", "control.v_ref")
    m.connect("vehicle.v", "control.v")
    m.connect("control.torque_demand", "motor.torque_demand")
    m.connect("vehicle.w", "motor.w")
    m.connect("battery.v_batt", "motor.v_batt")
    m.connect("motor.current", "battery.current")
    m.connect("motor.torque", "vehicle.torque")
    return m


def config(backend: str = "local", t_end: float = 60.0, remote: dict | None = None
           ) -> SimulationConfig:
    """10 ms macro steps, Gauss–Seidel, first-order extrapolation, iterated coupling.

    ``remote`` maps unit names to the addresses of servers that host them (``cosim serve``).
    """
    # Remote units are reached over ZeroMQ whatever the backend; the backend runs the rest.
    units = {name: {"address": addr} for name, addr in (remote or {}).items()}
    return SimulationConfig(dt=0.001, t_end=t_end, solver="RK4", cosim=CosimConfig(
        H=0.01, scheme="gauss-seidel", extrapolation=1, tolerance=1e-10, backend=backend,
        units=units))


def export_unit(name: str, path: str) -> None:
    """Write unit ``name`` as a unit file its team can serve with ``cosim serve`` (what
    ``cosim export-unit examples/electric_vehicle.yaml --subsystem NAME`` writes)."""
    from cosim.modelfile.unitfile import export_unit as write_unit
    model = build()
    model.simulation = config()
    write_unit(model, name, path)


SIGNALS = {"cycle/profile.out": "m/s", "vehicle/speed.out": "m/s",
           "control/pi.out": "N m", "motor/torque_state.out": "N m",
           "motor/current_.out": "A", "battery/v_term.out": "V"}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="local", help="where units run: local, ray, zmq")
    ap.add_argument("--t-end", type=float, default=60.0)
    ap.add_argument("--plot", help="save a plot of the main signals (PNG)")
    ap.add_argument("--remote", action="append", default=[], metavar="UNIT=ADDRESS",
                    help="a unit served elsewhere, e.g. battery=tcp://127.0.0.1:5555")
    ap.add_argument("--export-unit", nargs=2, metavar=("UNIT", "FILE"),
                    help="write UNIT as a model file for `cosim serve`, and stop")
    args = ap.parse_args(argv)
    if args.export_unit:
        export_unit(*args.export_unit)
        print(f"wrote {args.export_unit[1]}: serve it with "
              f"`cosim serve {args.export_unit[1]} --bind tcp://127.0.0.1:5555`")
        return
    remote = dict(r.split("=", 1) for r in args.remote)
    sim = CoSimulation(build(), config(args.backend, args.t_end, remote))
    logs = sim.run()
    sim.close()
    # (per macro step: the coupling's iteration over the step, then its solve at the macro
    # point for the control's and the vehicle's values there)
    iters = [r.iterations for r in sim.step_log if r.t > 0]
    steps = sim.stats["macro_steps"]
    v = logs["vehicle/speed.out"][:, 0]
    ref = logs["cycle/profile.out"][:, 0]
    print(f"units: {', '.join(sorted(u.name for u in sim.partition.units))}")
    print(f"{steps} macro steps; battery<->motor coupling evaluated "
          f"{sim.stats['iterations'] / steps:.1f} times per step (iterated over the step and "
          f"solved again at its end: up to {max(iters)} evaluations each)")
    print(f"final speed {v[-1]:.2f} m/s, max speed {v.max():.2f} m/s "
          f"(cycle max {ref.max():.2f}); final SOC {logs['battery/soc.out'][-1, 0]:.5f}")
    if args.plot:
        logs.plot(list(SIGNALS), path=args.plot, title="electric vehicle on an urban cycle",
                  units=SIGNALS)
        print(f"plot saved to {args.plot}")


if __name__ == "__main__":
    main()
