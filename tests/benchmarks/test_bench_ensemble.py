"""Benchmark (issue 36): ensembles of the models people sweep, against the same runs one by
one, in the same process and run, best of interleaved repeats.

- the two-node thermal zone with a saturated heater and a discrete PI with limits (16
  blocks, RK4, dt 0.01, 20 s), 1,000 Latin-hypercube points;
- the mass-spring-damper + PID with output limits and a Lookup1D friction map whose table
  is each member's own (18 blocks, RK4, dt 1e-3, 10 s: the ensemble benchmark's length),
  1,000 points;
- a relay thermostat whose relay reads a continuous state (switches located per run).

Targets: >= 1,000 runs/s and >= 10x one by one for the first two, >= 5x for the relay with
each member's switch times its own run's. Printed with the path each ensemble took, not
asserted; every run's metrics are compared with its own run's (the tests compare every
signal). The last test prints the three as one table (the figures of the tests that ran
before it in this session). Run:
python -m pytest -m bench -s tests/benchmarks/test_bench_ensemble.py
"""

from dataclasses import replace

import pytest

from cluster.sweep import final, lhs, maximum, sweep
from cosim import Simulator
from tests.benchmarks.test_bench_sweep import interleaved, load
from tests.cluster import sweep_models as sm

CASES = {
    "thermal zone, saturated heater + discrete PI (16 blocks, RK4, dt 0.01, 20 s)": (
        sm.thermal_zone, sm.ZONE_CONFIG, "t1.out", 1000,
        {"kp": (2.0, 20.0), "ki": (0.5, 5.0), "q_max": (3.0, 10.0), "r12": (0.3, 1.0),
         "c1": (0.5, 2.0)}),
    "MSD + PID, output limits, Lookup1D friction (18 blocks, RK4, dt 1e-3, 10 s)": (
        sm.msd_friction, sm.MSD_CONFIG, "x.out", 1000,
        {"kp": (5.0, 40.0), "ki": (1.0, 20.0), "kd": (1.0, 10.0), "u_max": (3.0, 10.0),
         "mu": (0.5, 3.0)}),
}


@pytest.mark.bench
@pytest.mark.parametrize("case", list(CASES))
def test_bench_ensemble_of_a_swept_model(case):
    factory, config, key, n, box = CASES[case]
    points = lhs(box, n, seed=1)
    reducers = {"end": final(key), "peak": maximum(key)}
    rows, cpu = {}, {}

    def alone():
        rows["alone"] = sweep(factory, config, points, reducers, backend="serial")

    def together():
        rows["ensemble"] = sweep(factory, config, points, reducers, backend="serial",
                                 ensemble=n)
    best = interleaved({"one by one": alone, f"ensemble={n}": together}, 2, cpu)
    same = [(r["end"], r["peak"]) for r in rows["alone"]] == \
        [(r["end"], r["peak"]) for r in rows["ensemble"]]
    paths = [f"{e['path']}{': ' + e['reason'] if e['reason'] else ''}"
             for e in rows["ensemble"].ensembles]
    print(f"\n{case}, {n} runs, one process, best of 2 interleaved ({load()}):")
    for name, t in best.items():
        print(f"  {name:<16} {n / t:8.1f} runs/s wall  {n / cpu[name]:8.1f} runs/s CPU")
    print(f"  ensemble vs one by one: {best['one by one'] / best[f'ensemble={n}']:.1f}x wall, "
          f"{cpu['one by one'] / cpu[f'ensemble={n}']:.1f}x CPU; path: {', '.join(paths)}; "
          f"every run's metrics equal to its own run's: {same}")
    TABLE[case.split(" (")[0]] = (n, n / best["one by one"], n / cpu["one by one"],
                                  n / best[f"ensemble={n}"], n / cpu[f"ensemble={n}"],
                                  ", ".join(paths))
    assert same


#: Each model's figures for the closing table: name -> (runs, runs/s wall and CPU one by one
#: and in the ensemble, the path the ensemble took).
TABLE: dict = {}


#: Relay thermostat runs: 20 s at dt 0.01 (RK4), about 15 switches each.
RELAY_RUNS = 200


@pytest.mark.bench
def test_bench_ensemble_of_a_relay_thermostat():
    """Switches located per member: each member's step that switches runs on its own
    interpreter, the others vectorised. Every member's switch times and logs are compared
    with its own run's."""
    from cosim.fastpath.ensemble_run import run_members
    n = RELAY_RUNS
    config = replace(sm.THERMOSTAT_CONFIG, t_end=20.0)
    points = lhs({"t_on": (18.0, 20.0), "t_off": (20.5, 22.0), "ua": (0.1, 0.25),
                  "q": (6.0, 9.0)}, n, seed=1)
    out, cpu = {}, {}

    def alone():
        runs = []
        for p in points:
            m = sm.thermostat()
            m.parameters.update(p)
            sim = Simulator(m, config)
            runs.append((sim.run(), list(sim.switch_log)))
        out["alone"] = runs

    def together():
        m = sm.thermostat()
        m.parameters.update(points[0])
        sim = Simulator(m, config)
        sim.initialize()
        switches: list = []
        logs = run_members(sim, m, points, switches=switches)
        out["ensemble"] = list(zip(logs, switches))
    best = interleaved({"one by one": alone, f"ensemble={n}": together}, 2, cpu)
    same = all(s == s2 and all(a[k].tobytes() == b[k].tobytes() for k in a)
               for (a, s), (b, s2) in zip(out["alone"], out["ensemble"]))
    n_switch = sum(len(s) for _, s in out["alone"])
    print(f"\nrelay thermostat (8 blocks, relay on the room's continuous temperature, RK4, "
          f"dt 0.01, 20 s), {n} runs, {n_switch} located switches, best of 2 interleaved "
          f"({load()}):")
    for name, t in best.items():
        print(f"  {name:<16} {n / t:8.1f} runs/s wall  {n / cpu[name]:8.1f} runs/s CPU")
    print(f"  ensemble vs one by one: {best['one by one'] / best[f'ensemble={n}']:.1f}x wall, "
          f"{cpu['one by one'] / cpu[f'ensemble={n}']:.1f}x CPU; path: translated, "
          f"switching steps on each member's interpreter; every member's logs and switch "
          f"times equal to its own run's: {same}")
    TABLE["relay thermostat, switches per member"] = (
        n, n / best["one by one"], n / cpu["one by one"], n / best[f"ensemble={n}"],
        n / cpu[f"ensemble={n}"], "translated, switching steps on each member's interpreter")
    assert same


@pytest.mark.bench
def test_bench_ensemble_table():
    """The closing table of the models above (those run in this session)."""
    print(f"\nensembles vs one by one, one process ({load()}):")
    print(f"  {'model':<44} {'runs':>5} {'one by one':>17} {'ensemble':>17} {'ratio':>11}  path")
    print(f"  {'':<44} {'':>5} {'wall/s':>8} {'CPU/s':>8} {'wall/s':>8} {'CPU/s':>8} "
          f"{'wall':>5} {'CPU':>5}")
    for name, (n, a_w, a_c, e_w, e_c, path) in TABLE.items():
        print(f"  {name:<44} {n:>5} {a_w:>8.1f} {a_c:>8.1f} {e_w:>8.1f} {e_c:>8.1f} "
              f"{e_w / a_w:>4.1f}x {e_c / a_c:>4.1f}x  {path}")


#: Lookup models of the ensemble tests: members' own tables and breakpoints.
LOOKUPS = {
    "Lookup1D, members' own breakpoints and table": ("map1d_breakpoints", {
        "a": (0.3, 1.5), "w": (0.5, 1.5), "g": (-1.0, 2.0)}),
    "Lookup2D 5x5, members' own table and a breakpoint": ("map2d", {
        "a1": (0.5, 1.6), "a2": (0.5, 2.0), "g": (-1.0, 2.0), "bp": (-0.2, 0.5),
        "tau": (0.1, 0.5)}),
}


@pytest.mark.bench
@pytest.mark.parametrize("case", list(LOOKUPS))
def test_bench_ensemble_of_lookups(case):
    """Per-member lookups (the cell found on the whole member vector, constants gathered):
    500 runs of 2 s at dt 0.01 (RK4), ensemble vs one by one, every run's metrics equal."""
    from tests.cluster import test_ensemble_lookups as tl
    name, box = LOOKUPS[case]
    factory, n = getattr(tl, name), 500
    points = lhs(box, n, seed=4)
    reducers = {"end": final("lag.out"), "peak": maximum("lag.out")}
    rows, cpu = {}, {}

    def alone():
        rows["alone"] = sweep(factory, tl.CONFIG, points, reducers, backend="serial")

    def together():
        rows["ensemble"] = sweep(factory, tl.CONFIG, points, reducers, backend="serial",
                                 ensemble=n)
    best = interleaved({"one by one": alone, f"ensemble={n}": together}, 2, cpu)
    same = [(r["end"], r["peak"]) for r in rows["alone"]] == \
        [(r["end"], r["peak"]) for r in rows["ensemble"]]
    paths = [e["path"] for e in rows["ensemble"].ensembles]
    print(f"\n{case} (4 blocks, RK4, dt 0.01, 2 s), {n} runs ({load()}):")
    for label, t in best.items():
        print(f"  {label:<16} {n / t:8.1f} runs/s wall  {n / cpu[label]:8.1f} runs/s CPU")
    print(f"  ensemble vs one by one: {best['one by one'] / best[f'ensemble={n}']:.1f}x wall, "
          f"{cpu['one by one'] / cpu[f'ensemble={n}']:.1f}x CPU; path: {', '.join(paths)}; "
          f"every run's metrics equal to its own run's: {same}")
    assert same
