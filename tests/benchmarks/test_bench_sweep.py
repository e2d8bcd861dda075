"""Benchmark: sweep throughput, serial and on 2 Ray workers, and the per-run overhead.

Targets (issue 18): >= 250 runs/s serial for 1,000 RK4 steps of a 10-block loop (PI + plant,
fast path); per-run overhead beyond the run's own stepping <= 1 ms; Ray on 2 workers >= 1.8x
serial; ensembles of the mass-spring-damper + PID (RK4, dt 1e-3, 10 s) >= 1,000 runs/s for
N = 1,000 on one core. Measured, printed, not asserted.
Run: python -m pytest -m bench -s tests/benchmarks/test_bench_sweep.py
"""

import os
import time

import pytest

from cluster.sweep import final, lhs, sweep
from cosim import SimulationConfig, Simulator

from tests.benchmarks.timing import cpu_used, process_tree_cpu
from tests.cluster import sweep_models as sm

#: A short run on the interpreter: 2 s at 1 ms, tens of milliseconds each.
SLOW = SimulationConfig(dt=1e-3, t_end=2.0, solver="RK4", fast=False)


def interleaved(fns: dict, repeat: int, cpu: dict | None = None,
                tree: dict | None = None) -> dict:
    """Best wall time of each callable, the callables interleaved (the machine drifts);
    with ``cpu``, also the best CPU time of this process in it (the machine is shared: a
    serial run's CPU time is what it costs on a core of its own); with ``tree``, the CPU
    time of this process and its descendants (Ray's workers and daemons) by role
    (:func:`~tests.benchmarks.timing.cpu_used`), of the repeat that used least in all."""
    best = dict.fromkeys(fns, float("inf"))
    if cpu is not None:
        cpu.update(dict.fromkeys(fns, float("inf")))
    for _ in range(repeat):
        for name, fn in fns.items():
            before = process_tree_cpu() if tree is not None else None
            t0, c0 = time.perf_counter(), time.process_time()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
            if cpu is not None:
                cpu[name] = min(cpu[name], time.process_time() - c0)
            if tree is not None:
                used = cpu_used(before, process_tree_cpu())
                if name not in tree or sum(used.values()) < sum(tree[name].values()):
                    tree[name] = used
    return best


def load() -> str:
    """The machine's load averages (1, 5, 15 min), printed with the figures."""
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def stepping_per_run(points) -> tuple[float, float]:
    """Mean ``(wall, CPU)`` time of the runs' own stepping (1,000 ticks on a built,
    initialized simulator), best of three per point."""
    wall = cpu = 0.0
    for p in points:
        best, best_cpu = float("inf"), float("inf")
        for _ in range(3):
            m = sm.pi_loop()
            m.parameters.update(p)
            sim = Simulator(m, sm.PI_CONFIG)
            sim.initialize()
            t0, c0 = time.perf_counter(), time.process_time()
            sim.advance_to(1000)
            best = min(best, time.perf_counter() - t0)
            best_cpu = min(best_cpu, time.process_time() - c0)
        wall += best
        cpu += best_cpu
    return wall / len(points), cpu / len(points)


@pytest.mark.bench
def test_bench_sweep_of_a_pi_loop(ray_session, tmp_path):
    points = lhs({"kp": (0.5, 4.0), "ki": (0.1, 2.0), "tau": (0.2, 1.0)}, 400, seed=1)
    reducers = {"y_end": final("plant.out"), "area": final("area.out")}
    sweep(sm.pi_loop, sm.PI_CONFIG, points[:20], reducers, backend="ray")        # warm-up
    dirs = iter(range(10 ** 6))
    rows = {}

    def serial():
        rows["serial"] = sweep(sm.pi_loop, sm.PI_CONFIG, points, reducers, backend="serial",
                               out_dir=tmp_path / f"s{next(dirs)}")

    def ray():
        rows["ray"] = sweep(sm.pi_loop, sm.PI_CONFIG, points, reducers, backend="ray",
                            out_dir=tmp_path / f"r{next(dirs)}")

    def ensemble():
        rows["ensemble"] = sweep(sm.pi_loop, sm.PI_CONFIG, points, reducers, backend="serial",
                                 ensemble=100, out_dir=tmp_path / f"e{next(dirs)}")

    def one_by_one():                     # the same runs without the sweep's bookkeeping
        for p in points:
            m = sm.pi_loop()
            m.parameters.update(p)
            logs = Simulator(m, sm.PI_CONFIG).run()
            [f(logs) for f in reducers.values()]

    cpu, tree = {}, {}
    best = interleaved({"serial": serial, "ray": ray, "ensemble=100": ensemble,
                        "one by one": one_by_one}, 3, cpu, tree)
    assert [r["y_end"] for r in rows["serial"]] == [r["y_end"] for r in rows["ray"]] == \
        [r["y_end"] for r in rows["ensemble"]]
    n = len(points)
    step, step_cpu = stepping_per_run(points[:20])
    per_run = best["serial"] / n
    cpu_run = cpu["serial"] / n
    print(f"\nsweep of {n} runs of a 10-block PI loop (1,000 RK4 steps, fast path), "
          f"best of 3 interleaved ({load()}):")
    for name, t in best.items():
        extra = "" if name == "ray" else f"  (CPU {n / cpu[name]:8.1f} runs/s)"
        print(f"  {name:<14} {n / t:8.1f} runs/s  {t / n * 1e3:6.2f} ms/run{extra}")
    print(f"  Ray (2 workers) vs serial: {best['serial'] / best['ray']:.2f}x")
    print(f"  stepping alone {step * 1e3:.2f} ms/run wall, {step_cpu * 1e3:.2f} ms CPU; "
          f"per-run overhead of the serial sweep {(per_run - step) * 1e3:.2f} ms wall, "
          f"{(cpu_run - step_cpu) * 1e3:.2f} ms CPU "
          f"(one by one without the sweep, built per run: "
          f"{(best['one by one'] / n - step) * 1e3:.2f} ms wall)")
    # CPU time is far less sensitive to the other loads of a shared machine than wall time:
    # what the Ray study costs in all its processes against the serial one bounds the
    # speed-up that 2 free cores could give (the driver's share runs beside the workers).
    if tree.get("ray") and tree.get("serial"):
        ray_cpu = sum(tree["ray"].values())
        parts = ", ".join(f"{k} {v / n * 1e3:.3f}" for k, v in
                          sorted(tree["ray"].items(), key=lambda kv: -kv[1]) if v > 5e-5 * n)
        print(f"  CPU per run: serial {cpu['serial'] / n * 1e3:.3f} ms (its process), Ray "
              f"{ray_cpu / n * 1e3:.3f} ms in all processes ({parts}); "
              f"2 x serial / Ray = {2 * cpu['serial'] / ray_cpu:.2f}x")


@pytest.mark.bench
def test_bench_sweep_on_the_interpreter(ray_session, tmp_path):
    points = lhs({"gain": (0.5, 2.0), "tau": (0.05, 0.5)}, 60, seed=1)
    reducers = {"y_end": final("plant.out")}
    sweep(sm.lag, SLOW, points[:4], reducers, backend="ray")  # warm-up
    rows = {}
    best = interleaved({
        "serial": lambda: rows.__setitem__("serial", sweep(sm.lag, SLOW, points, reducers,
                                                           backend="serial")),
        "ray": lambda: rows.__setitem__("ray", sweep(sm.lag, SLOW, points, reducers,
                                                     backend="ray"))}, 2)
    assert [r["y_end"] for r in rows["serial"]] == [r["y_end"] for r in rows["ray"]]
    n = len(points)
    print(f"\nsweep of {n} short interpreter runs (best of 2): serial "
          f"{n / best['serial']:.1f} runs/s, Ray (2 workers) {n / best['ray']:.1f} runs/s, "
          f"speed-up {best['serial'] / best['ray']:.2f}x")


#: Runs per ensemble in the mass-spring-damper benchmark (the issue's N).
ENSEMBLE = 1000


@pytest.mark.bench
def test_bench_ensemble_of_a_mass_spring_damper_with_pid():
    points = lhs({"kp": (5.0, 40.0), "ki": (1.0, 20.0), "kd": (1.0, 10.0)}, 1000, seed=1)
    reducers = {"x_end": final("x.out")}
    rows = {}
    cpu = {}
    best = interleaved({
        "one by one": lambda: rows.__setitem__("alone", sweep(
            sm.msd_pid, sm.MSD_CONFIG, points, reducers, backend="serial")),
        f"ensemble={ENSEMBLE}": lambda: rows.__setitem__("together", sweep(
            sm.msd_pid, sm.MSD_CONFIG, points, reducers, backend="serial", ensemble=ENSEMBLE)),
    }, 2, cpu)
    assert [r["x_end"] for r in rows["alone"]] == [r["x_end"] for r in rows["together"]]
    n = len(points)
    print(f"\n{n} runs of the mass-spring-damper + PID (RK4, dt 1e-3, 10 s), one core, "
          f"best of 2 interleaved ({load()}):")
    for name, t in best.items():
        print(f"  {name:<14} {n / t:8.1f} runs/s wall  {n / cpu[name]:8.1f} runs/s CPU")
    print(f"  ensemble vs one by one: {best['one by one'] / best[f'ensemble={ENSEMBLE}']:.2f}x")


@pytest.mark.bench
@pytest.mark.parametrize("units", ["zmq", "ray"])
def test_bench_sweep_of_a_cosimulation_reusing_its_units(ray_session, units):
    """A study of a co-simulation (3 units in a loop, 60 macro steps) on server processes or
    Ray actors: units reloaded into the hosts of the run before vs new hosts every run."""
    points = lhs({"k": (0.5, 3.0), "freq": (0.1, 0.7)}, 8, seed=1)
    config = sm.cosim_loop_config(units)
    reducers = {"x_end": final("a/x.out")}
    sweep(sm.cosim_loop, config, points[:2], reducers, backend="serial")     # warm-up
    rows = {}

    def study(reuse):
        return lambda: rows.__setitem__(reuse, sweep(sm.cosim_loop, config, points, reducers,
                                                     backend="serial", reuse_units=reuse))
    best = interleaved({"new units": study(False), "reused units": study(True)}, 2)
    assert [r["x_end"] for r in rows[True]] == [r["x_end"] for r in rows[False]]
    assert all(r["status"] == "ok" for r in rows[True])
    n = len(points)
    print(f"\nsweep of {n} co-simulated runs (3 units on {units}, 60 macro steps each), "
          f"serial, best of 2 interleaved ({load()}):")
    for name, t in best.items():
        print(f"  {name:<14} {n / t:8.2f} runs/s  {t / n * 1e3:8.1f} ms/run")
    print(f"  reused vs new: {best['new units'] / best['reused units']:.1f}x")
