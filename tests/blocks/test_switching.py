"""A relay in a continuous feedback loop switches where the analytic solution does.

The thermostat ``x' = -x + h``, ``h = Relay(x, on 0.6, off 0.4, on_value 0, off_value 2)``,
``x(0) = 0``: heating (``h = 2``) until ``x`` reaches 0.6, then cooling (``h = 0``) until it
falls to 0.4, and so on. Each phase is an exponential with a closed-form duration, so the
switch times are known exactly. Oracles: those times, the piecewise-exponential trajectory,
and an independent hand-written integration with scipy's ``solve_ivp`` and its own events.
"""

import math

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from blocks import Integrator, Relay, Sum
from cosim import Model, SimulationConfig, Simulator
from cosim.solvers import SOLVERS

ON, OFF, HEAT = 0.6, 0.4, 2.0
T_END = 3.0


def thermostat(x0=0.0, off_value=HEAT):
    m = Model("thermostat")
    m.add(Integrator("x", initial=x0))
    m.add(Relay("h", on_point=ON, off_point=OFF, on_value=0.0, off_value=off_value))
    m.add(Sum("s", signs="+-"))
    m.connect("h.out", "s.in1")
    m.connect("x.out", "s.in2")
    m.connect("s.out", "x.in")
    m.connect("x.out", "h.in")
    return m


def analytic_switches(t_end=T_END):
    """Switch times of the thermostat from x(0) = 0 (relay off, heating)."""
    heat_first = -math.log(1 - ON / HEAT)            # 0 -> 0.6 under x' = 2 - x
    cool = math.log(ON / OFF)                        # 0.6 -> 0.4 under x' = -x
    heat = math.log((HEAT - OFF) / (HEAT - ON))      # 0.4 -> 0.6 under x' = 2 - x
    times, t, cooling = [heat_first], heat_first, True
    while True:
        t += cool if cooling else heat
        cooling = not cooling
        if t > t_end:
            return np.array(times)
        times.append(t)


def analytic_x(t):
    """The piecewise-exponential trajectory at times ``t`` (array)."""
    sw = np.concatenate([[0.0], analytic_switches(t_end=float(np.max(t)) + 1.0)])
    out = np.empty_like(t)
    for n, tt in enumerate(t):
        j = np.searchsorted(sw, tt, side="right") - 1
        t_start = sw[j]
        x_start = 0.0 if j == 0 else (ON if j % 2 == 1 else OFF)
        heating = j % 2 == 0
        target = HEAT if heating else 0.0
        out[n] = target + (x_start - target) * math.exp(-(tt - t_start))
    return out


def run(solver, dt, **cfg):
    sim = Simulator(thermostat(), SimulationConfig(dt=dt, t_end=T_END, solver=solver,
                                                   log=["x.out", "h.out"], **cfg))
    logs = sim.run()
    return sim, logs


# Fixed-step solvers locate the crossing on their own dense output, so the switch time is as
# accurate as the solver: error ~ C * dt**order. The bounds are the solvers' orders with a
# generous constant (measured errors are 5-50x below them).
ORDER = {"Euler": 1, "BackwardEuler": 1, "SSPRK22": 2, "ESDIRK32Fixed": 2, "SSPRK33": 3,
         "RK4": 4}


@pytest.mark.parametrize("dt", [1e-2, 1e-3])
@pytest.mark.parametrize("solver", list(SOLVERS))
def test_thermostat_switches_ten_times_where_the_analytic_solution_does(solver, dt):
    sim, _ = run(solver, dt)
    times = np.array([t for t, _ in sim.switch_log])
    expected = analytic_switches()
    assert len(expected) == 10
    assert len(times) == 10, f"{solver}: {len(times)} switches, expected 10"
    assert all(path == "h" for _, path in sim.switch_log)
    bound = max(2.0 * dt ** ORDER[solver], 1e-10) if solver in ORDER else 1e-4
    assert np.max(np.abs(times - expected)) < bound


@pytest.mark.parametrize("solver", ["RK45", "Radau", "LSODA"])
def test_trajectory_matches_the_piecewise_exponential_at_tight_tolerance(solver):
    _, logs = run(solver, 1e-2, rtol=1e-10, atol=1e-12)
    t, x = logs.time_of("x.out"), logs["x.out"][:, 0]
    assert np.max(np.abs(x - analytic_x(t))) < 1e-7
    times = analytic_switches()
    h = logs["h.out"][:, 0]
    # Logged relay output at ticks: heating (2) before the first switch, cooling after it.
    assert np.all(h[t < times[0] - 1e-9] == HEAT)
    assert np.all(h[(t > times[0] + 1e-9) & (t < times[1] - 1e-9)] == 0.0)


def hand_integrated(t_end=T_END):
    """The loop integrated by hand: solve_ivp per mode, its own event finds each switch."""
    t, x, on, switches = 0.0, 0.0, False, []
    while True:
        level = OFF if on else ON
        ev = lambda _t, y, lv=level: y[0] - lv   # noqa: E731
        ev.terminal = True
        ev.direction = -1 if on else 1
        h = 0.0 if on else HEAT
        sol = solve_ivp(lambda _t, y, h=h: h - y, (t, t_end), [x], method="DOP853",
                        events=ev, rtol=1e-12, atol=1e-14)
        if sol.status != 1:
            return np.array(switches)
        t, x = float(sol.t_events[0][0]), float(sol.y_events[0][0][0])
        switches.append(t)
        on = not on


def test_switch_times_match_a_hand_integrated_loop():
    sim, _ = run("RK45", 1e-2, rtol=1e-10, atol=1e-12)
    ours = np.array([t for t, _ in sim.switch_log])
    theirs = hand_integrated()
    assert len(ours) == len(theirs) == 10
    assert np.max(np.abs(ours - theirs)) < 1e-8


def test_a_sampled_relay_keeps_its_tick_semantics():
    """A relay on a sine source (no continuous state) decides at ticks, as before."""
    from blocks import Sine
    m = Model("sampled")
    m.add(Sine("u", amplitude=1.0, frequency=1.0))
    m.add(Relay("r", on_point=0.5, off_point=-0.5, on_value=1.0, off_value=-1.0))
    m.connect("u.out", "r.in")
    logs = Simulator(m, SimulationConfig(dt=1e-3, t_end=2.0, log=["u.out", "r.out"])).run()
    u, r = logs["u.out"][:, 0], logs["r.out"][:, 0]
    on, expect = False, []
    for v in u:
        on = v >= 0.5 or (on and v > -0.5)
        expect.append(1.0 if on else -1.0)
    assert np.array_equal(r, expect)


def test_relay_mode_survives_a_checkpoint(tmp_path):
    """Stop mid-run (in the cooling phase), save, load, continue: identical to the
    uninterrupted run."""
    def sim():
        return Simulator(thermostat(), SimulationConfig(dt=1e-2, t_end=T_END, solver="RK4",
                                                        log=["x.out"]))
    full = sim()
    ref = full.run()
    a = sim()
    a.run(t_end=0.5)
    a.save_checkpoint(tmp_path / "ck")
    b = sim()
    b.load_checkpoint(tmp_path / "ck")
    logs = b.run()
    n = len(logs["x.out"])
    assert n >= 250
    assert np.array_equal(logs["x.out"], ref["x.out"][-n:])
    assert b.switch_log == [(t, p) for t, p in full.switch_log if t > 0.5]
