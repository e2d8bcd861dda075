"""Benchmark: the co-simulation master's own overhead per unit per macro step (in process).

Trivial units (Inport -> UnitDelay -> Outport, a ring) isolate the master's work: building
inputs, calling units, exchanging outputs, bookkeeping — through the compiled exchange (the
default in process) and through the protocol. Reference measured in the same run:
mosaik (if installed) running a two-simulator chain in process, the figure the issue quotes
(91-140 us per step measured here). Run: python -m pytest -m bench -s tests/benchmarks
"""

import time

import pytest

from cosim import CoSimulation, CosimConfig, SimulationConfig

from tests.benchmarks.rings import ring

STEPS = 2000


def cosim_us_per_step(n, scheme, compiled):
    best = float("inf")
    for _ in range(3):
        sim = CoSimulation(ring(n), SimulationConfig(
            dt=0.01, t_end=STEPS * 0.01, log=[],
            cosim=CosimConfig(H=0.01, scheme=scheme, log_every=10 * STEPS,
                              compiled=compiled)))
        sim.initialize()
        t0 = time.perf_counter()
        sim.run()
        best = min(best, (time.perf_counter() - t0) / STEPS)
    return best * 1e6


def unit_only_us_per_step():
    """What one trivial unit costs by itself per macro step (its own simulator step)."""
    from cosim.master import protocol as P
    from cosim.master.local_unit import LocalUnit
    import numpy as np
    sub = ring(1)["u0"]
    unit = LocalUnit(sub, SimulationConfig(dt=0.01, t_end=STEPS * 0.01, log=[]))
    best = float("inf")
    for _ in range(3):
        unit.initialize(0.0)
        reqs = [P.SetInputs({"u": np.ones(1)}), None, P.GetOutputs()]
        t0 = time.perf_counter()
        for k in range(STEPS):
            reqs[1] = P.DoStep(k * 0.01, 0.01)
            for r in reqs:
                unit.handle(r)
        best = min(best, (time.perf_counter() - t0) / STEPS * 1e6)
    return best


def mosaik_us_per_step():
    mosaik = pytest.importorskip("mosaik")
    config = {"A": {"python": "tests.benchmarks.mosaik_chain:ChainSim"},
              "B": {"python": "tests.benchmarks.mosaik_chain:ChainSim"}}
    world = mosaik.World(config, debug=False)
    a = world.start("A").Node()
    b = world.start("B").Node()
    world.connect(a, b, ("val", "inp"))
    t0 = time.perf_counter()
    world.run(until=STEPS, print_progress=False)
    return (time.perf_counter() - t0) / STEPS * 1e6


@pytest.mark.bench
def test_master_overhead_per_unit_per_macro_step():
    rows = []
    unit = unit_only_us_per_step()
    for n in (2, 8):
        for scheme in ("jacobi", "gauss-seidel"):
            for compiled in (True, False):
                us = cosim_us_per_step(n, scheme, compiled)
                rows.append((n, scheme, compiled, us, us / n, us / n - unit))
    try:
        ref = mosaik_us_per_step()
    except Exception as err:  # noqa: BLE001 - the reference is optional
        ref = None
        print(f"mosaik reference unavailable: {err}")
    print(f"\none trivial unit alone (SetInputs+DoStep+GetOutputs, no master): {unit:.1f} us")
    print("(the compiled exchange skips the protocol: its units cost less than one unit alone "
          "through the protocol, so 'master' is negative there)")
    print(f"{'units':>5} {'scheme':>13} {'exchange':>9} {'us/step':>9} {'us/unit/step':>13} "
          f"{'master us/unit/step':>20}")
    for n, scheme, compiled, us, per_unit, master in rows:
        how = "compiled" if compiled else "protocol"
        print(f"{n:>5} {scheme:>13} {how:>9} {us:9.1f} {per_unit:13.1f} {master:20.1f}")
    if ref is not None:
        for compiled in (True, False):
            two = next(r[3] for r in rows if r[0] == 2 and r[1] == "gauss-seidel"
                       and r[2] == compiled)
            print(f"mosaik, 2-simulator chain in process: {ref:.1f} us/step -> cosim 2 units "
                  f"({'compiled' if compiled else 'protocol'}) is {ref / two:.1f}x faster")
    assert all(r[3] > 0 for r in rows)
