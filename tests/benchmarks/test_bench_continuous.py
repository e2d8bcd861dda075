"""Benchmarks (issue: continuous-time simulation): cosim vs PathSim, bdsim and numpy RK4.

1. Mass–spring–damper (m=1, c=0.5, k=2) with a PID (kp=20, ki=10, kd=5, derivative filter
   N=100) tracking a unit step; RK4, dt=1e-3, 10 s. The PID is built from elementary blocks in
   every tool, so all compute the same equations (final positions are compared).
2. A chain of N first-order lags (tau_i = 0.1 + 0.01 i) driven by sin(2 pi t), RK4, dt=1e-2,
   10 s, N = 10, 100, 1000.

Run: python -m pytest -m bench -s tests/benchmarks/test_bench_continuous.py
bdsim integrates with scipy's RK45 (it has no fixed-step RK4), limited to max_step = dt.
"""

from __future__ import annotations

import contextlib
import io
import math
import sys

import numpy as np
import pytest

from blocks import FirstOrderLag, Gain, Integrator, Sine, Step, Sum
from cosim import Model, SimulationConfig, Simulator

from tests.benchmarks.timing import best_us_per_step, table

KP, KI, KD, NF = 20.0, 10.0, 5.0, 100.0
MASS, DAMP, SPRING = 1.0, 0.5, 2.0


# -- 1. mass-spring-damper + PID ---------------------------------------------------------------

def msd_cosim(fast=True, t_end=10.0):
    m = Model("msd")
    m.add(Step("ref", step_time=0.0, final=1.0), Sum("e", "+-"), Gain("kp", KP),
          Integrator("ie", 0.0), Gain("ki", KI), Sum("dfe", "+-"), Gain("kdn", KD * NF),
          Gain("nf", NF), Integrator("xf", 0.0), Sum("u", "+++"), Sum("f", "+--"),
          Gain("inv_m", 1.0 / MASS), Integrator("v", 0.0), Integrator("x", 0.0),
          Gain("c", DAMP), Gain("k", SPRING))
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
    sim = Simulator(m, SimulationConfig(dt=1e-3, t_end=t_end, solver="RK4", fast=fast,
                                        log=["x.out"]))
    sim.initialize()
    return sim


def msd_numpy(t_end=10.0, dt=1e-3):
    """Hand-written RK4 of the same ODE, state (ie, xf, v, x)."""
    def f(z):
        ie, xf, v, x = z
        e = 1.0 - x
        u = KP * e + KI * ie + KD * NF * (e - xf)
        return np.array([e, NF * (e - xf), (u - DAMP * v - SPRING * x) / MASS, v])
    z = np.zeros(4)
    for _ in range(int(round(t_end / dt))):
        k1 = f(z)
        k2 = f(z + 0.5 * dt * k1)
        k3 = f(z + 0.5 * dt * k2)
        k4 = f(z + dt * k3)
        z = z + dt / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)
    return z[3]


def msd_pathsim(t_end):
    from pathsim import Connection, Simulation
    from pathsim import blocks as pb
    from pathsim.solvers import RK4
    ref = pb.Constant(1.0)
    e, u, f = pb.Adder("+-"), pb.Adder("+++"), pb.Adder("+--")
    kp, ki, kdn, nf = pb.Amplifier(KP), pb.Amplifier(KI), pb.Amplifier(KD * NF), pb.Amplifier(NF)
    ie, xf, v, x = pb.Integrator(0.0), pb.Integrator(0.0), pb.Integrator(0.0), pb.Integrator(0.0)
    dfe = pb.Adder("+-")
    inv_m, c, k = pb.Amplifier(1.0 / MASS), pb.Amplifier(DAMP), pb.Amplifier(SPRING)
    sc = pb.Scope()
    blocks = [ref, e, u, f, kp, ki, kdn, nf, ie, xf, v, x, dfe, inv_m, c, k, sc]
    cons = [Connection(ref, e[0]), Connection(x, e[1], k, sc), Connection(e, kp, ie, dfe[0]),
            Connection(ie, ki), Connection(xf, dfe[1]), Connection(dfe, kdn, nf),
            Connection(nf, xf), Connection(kp, u[0]), Connection(ki, u[1]),
            Connection(kdn, u[2]), Connection(u, f[0]), Connection(c, f[1]),
            Connection(k, f[2]), Connection(f, inv_m), Connection(inv_m, v),
            Connection(v, x, c)]
    sim = Simulation(blocks, cons, dt=1e-3, Solver=RK4, log=False)
    return sim, sc


@contextlib.contextmanager
def quiet_bdsim():
    """bdsim parses sys.argv for its own options and prints: give it neither."""
    argv, sys.argv = sys.argv, sys.argv[:1]
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            yield
    finally:
        sys.argv = argv


def msd_bdsim(t_end):
    import bdsim
    with quiet_bdsim():
        sim = bdsim.BDSim(animation=False, graphics=False, progress=False, verbose=False)
        bd = sim.blockdiagram()
        ref = bd.CONSTANT(1.0)
        e, u, f, dfe = bd.SUM("+-"), bd.SUM("+++"), bd.SUM("+--"), bd.SUM("+-")
        kp, ki, kdn, nf = bd.GAIN(KP), bd.GAIN(KI), bd.GAIN(KD * NF), bd.GAIN(NF)
        ie, xf = bd.INTEGRATOR(x0=0.0), bd.INTEGRATOR(x0=0.0)
        v, x = bd.INTEGRATOR(x0=0.0), bd.INTEGRATOR(x0=0.0)
        inv_m, c, k = bd.GAIN(1.0 / MASS), bd.GAIN(DAMP), bd.GAIN(SPRING)
        bd.connect(ref, e[0])
        bd.connect(x, e[1], k)
        bd.connect(e, kp, ie, dfe[0])
        bd.connect(ie, ki)
        bd.connect(xf, dfe[1])
        bd.connect(dfe, kdn, nf)
        bd.connect(nf, xf)
        bd.connect(kp, u[0])
        bd.connect(ki, u[1])
        bd.connect(kdn, u[2])
        bd.connect(u, f[0])
        bd.connect(c, f[1])
        bd.connect(k, f[2])
        bd.connect(f, inv_m)
        bd.connect(inv_m, v)
        bd.connect(v, x, c)
        bd.compile(verbose=False)
    return sim, bd


@pytest.mark.bench
def test_bench_mass_spring_damper_pid():
    steps = 10_000
    fast = msd_cosim(True)
    x_fast = fast.run()["x.out"][-1, 0]
    assert fast.fast_path is not None
    x_np = msd_numpy()
    # Same equations, same RK4: equal to rounding (the operation order differs).
    assert abs(x_fast - x_np) < 1e-10
    rows = [("cosim (generated step function)",
             best_us_per_step(lambda: msd_cosim(True).run, steps)),
            ("cosim (reference interpreter)",
             best_us_per_step(lambda: msd_cosim(False, 1.0).run, 1000, repeat=1)),
            ("numpy RK4 (hand-written)", best_us_per_step(lambda: msd_numpy, steps))]
    ps_steps = 1000                   # 1 s of the 10 s: PathSim is slow
    sim, sc = msd_pathsim(1.0)
    ps_us = best_us_per_step(lambda: (lambda: sim.run(1.0, adaptive=False)), ps_steps, repeat=1)
    x_ps = sc.read()[1][0][-1]
    x_1s = msd_cosim(True, 1.0).run()["x.out"][-1, 0]
    assert abs(x_ps - x_1s) < 1e-9, (x_ps, x_1s)
    rows.append(("PathSim (RK4)", ps_us))
    bsim, bd = msd_bdsim(1.0)

    def run_bdsim():
        with quiet_bdsim():
            return bsim.run(bd, T=1.0, dt=1e-3, max_step=1e-3)
    bd_us = best_us_per_step(lambda: run_bdsim, ps_steps, repeat=1)
    rows.append(("bdsim (scipy RK45, max_step=dt)", bd_us))
    table("mass-spring-damper + PID, RK4, dt=1e-3 (us per step)", rows,
          reference="cosim (generated step function)")
    cos = rows[0][1]
    print(f"PathSim / cosim = {ps_us / cos:.0f}x, bdsim / cosim = {bd_us / cos:.0f}x, "
          f"cosim / numpy = {cos / rows[2][1]:.2f}x")


# -- 2. chain of N continuous lags ------------------------------------------------------------

def taus(n):
    return 0.1 + 0.01 * np.arange(n)


def lags_cosim(n, fast=True, t_end=10.0):
    m = Model("lags")
    m.add(Sine("src", 1.0, 1.0))
    prev = "src.out"
    for i, tau in enumerate(taus(n)):
        m.add(FirstOrderLag(f"l{i}", tau=float(tau)))
        m.connect(prev, f"l{i}.in")
        prev = f"l{i}.out"
    sim = Simulator(m, SimulationConfig(dt=1e-2, t_end=t_end, solver="RK4", fast=fast,
                                        log=[prev]))
    sim.initialize()
    return sim


def lags_numpy(n, t_end=10.0, dt=1e-2):
    tau = taus(n)
    x = np.zeros(n)
    u = np.empty(n)

    def f(t, x):
        u[0] = math.sin(2 * math.pi * t)
        u[1:] = x[:-1]
        return (u - x) / tau
    for k in range(int(round(t_end / dt))):
        t = k * dt
        k1 = f(t, x)
        k2 = f(t + dt / 2, x + dt / 2 * k1)
        k3 = f(t + dt / 2, x + dt / 2 * k2)
        k4 = f(t + dt, x + dt * k3)
        x = x + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return x[-1]


def lags_pathsim(n):
    from pathsim import Connection, Simulation
    from pathsim import blocks as pb
    from pathsim.solvers import RK4
    src = pb.Source(lambda t: math.sin(2 * math.pi * t))
    lags = [pb.PT1(K=1.0, T=float(tau)) for tau in taus(n)]
    sc = pb.Scope()
    cons = [Connection(src, lags[0])] + [Connection(a, b) for a, b in zip(lags, lags[1:])]
    cons.append(Connection(lags[-1], sc))
    return Simulation([src, *lags, sc], cons, dt=1e-2, Solver=RK4, log=False), sc


def lags_bdsim(n):
    import bdsim
    with quiet_bdsim():
        sim = bdsim.BDSim(animation=False, graphics=False, progress=False, verbose=False)
        bd = sim.blockdiagram()
        src = bd.WAVEFORM(wave="sine", freq=1.0, amplitude=1.0)
        prev = src
        for tau in taus(n):
            lag = bd.LTI_SISO(N=[1.0], D=[float(tau), 1.0])
            bd.connect(prev, lag)
            prev = lag
        bd.compile(verbose=False)
    return sim, bd


@pytest.mark.bench
@pytest.mark.parametrize("n", [10, 100, 1000])
def test_bench_lag_chain(n):
    steps = 1000
    sim = lags_cosim(n)
    y = sim.run()[f"l{n - 1}.out"][-1, 0]
    assert sim.fast_path is not None
    # Same RK4 and equations; the numpy reference orders its sums differently.
    assert abs(y - lags_numpy(n)) < 1e-12
    rows = [("cosim (fast path)", best_us_per_step(lambda: lags_cosim(n).run, steps)),
            ("numpy RK4 (vectorised)", best_us_per_step(lambda: (lambda: lags_numpy(n)),
                                                           steps))]
    if n <= 100:
        rows.append(("cosim (reference interpreter)",
                     best_us_per_step(lambda: lags_cosim(n, False, 1.0).run, 100, repeat=1)))
    ps_steps = 100 if n < 1000 else 5          # PathSim takes ~0.1 s per step at n = 1000
    ps, sc = lags_pathsim(n)
    ps_us = best_us_per_step(lambda: (lambda: ps.run(ps_steps * 1e-2, adaptive=False)),
                             ps_steps, repeat=1)
    y_ps = sc.read()[1][0][-1]
    y_cos = lags_cosim(n, t_end=ps_steps * 1e-2).run()[f"l{n - 1}.out"][-1, 0]
    assert abs(y_ps - y_cos) < 1e-9 * max(1.0, abs(y_cos)) + 1e-12, (y_ps, y_cos)
    rows.append(("PathSim (RK4)", ps_us))
    if n <= 100:
        bsim, bd = lags_bdsim(n)

        def run_bdsim():
            with quiet_bdsim():
                bsim.run(bd, T=1.0, dt=1e-2, max_step=1e-2)
        rows.append(("bdsim (scipy RK45, max_step=dt)",
                     best_us_per_step(lambda: run_bdsim, 100, repeat=1)))
    table(f"chain of {n} continuous lags, RK4, dt=1e-2 (us per step)", rows,
          reference="cosim (fast path)")
    cos, npy = rows[0][1], rows[1][1]
    print(f"n={n}: PathSim / cosim = {ps_us / cos:.0f}x; cosim / numpy RK4 = {cos / npy:.2f}x")
