"""Benchmark: the macro step of the shapes users build, per backend, against the wire's floor.

Shapes (8 units each, one server process / Ray actor per unit):

- ring of unit delays, Jacobi, extrapolation 0 (the old benchmarks' shape), 1, and
  Gauss–Seidel;
- a fan of 8 feedthrough units (a gain and a state each) fed by a top-level Sine and feeding a
  top-level sum: ``feedthrough="resolve"`` (refreshed at every macro point) and ``"delay"``;
- 4 controller/plant loops: a discrete controller with feedthrough (its output held over the
  step) coupled algebraically to a continuous plant with feedthrough, each loop iterated to a
  fixed point every macro step (the four in the same rounds); its floor is the rounds the
  run took done raw;
- the electric-vehicle showcase (examples/electric_vehicle.py, 10 s, Gauss–Seidel,
  extrapolation 1, battery <-> motor iterated every step).

References in the same run: a raw pyzmq fan-out round trip to 8 echo processes (the floor of a
Jacobi round), a raw pyzmq *sequential* chain of 8 round trips (the floor of a Gauss–Seidel
ring), both plain and with CURVE (the zmq backend's servers and Ray's data plane encrypt and
authenticate every message, issue 29: the raw exchange with the same security is the fair
floor; both ratios are printed), and each model in process. A shape's floor is its program's
round trips done raw; the EV's wire floor is its in-process run phase plus (round trips per
macro step x the raw round trip to the same number of processes). Columns: in process (the
default path: the compiled exchange where it applies), the macro-step engine, and the
protocol's separate requests (``engine=False``, the reference). The fan's top-level blocks
run beside the master (their unit ``main``, by default), so its feedthrough units get their
step and refresh in one message.

Run: python -m pytest -m bench -s tests/benchmarks/test_bench_shapes.py
"""

from __future__ import annotations

import multiprocessing as mp
import time

import numpy as np
import pytest

from blocks import Gain, Sine, Sum
from blocks.continuous import Integrator
from cluster.codec import encode_batch
from cosim import CoSimulation, CosimConfig, Inport, Model, Outport, SimulationConfig, Subsystem
from cosim.master import protocol as P
from tests.benchmarks.rings import ring
from tests.benchmarks.test_bench_backends import _echo
from tests.cosim.test_semantics_every_model import add_held_loop

N = 8
STEPS = 300
REPEAT = 3


def fan(n: int = N) -> Model:
    m = Model("fan")
    m.add(Sine("src", amplitude=1.0, frequency=1.3), Sum("s", "+" * n))
    for i in range(n):
        u = Subsystem(f"g{i}", atomic=True, dt=0.01)
        u.add(Inport("u"), Gain("k", 0.5 + i), Outport("y"))
        u.connect("u.out", "k.in")
        u.connect("k.out", "y.in")
        m.add(u)
        m.connect("src.out", f"g{i}.u")
        m.connect(f"g{i}.y", f"s.in{i + 1}")
    return m


def loops(n: int = N) -> Model:
    """``n // 2`` controller/plant loops, each an iterated algebraic coupling: a discrete
    controller ``y = 0.5 u + c`` (held over the step) and an RK4 plant ``y = -0.8 u + z``,
    ``z' = -z + u`` (the semantics tests' held coupling)."""
    m = Model("loops")
    for i in range(n // 2):
        add_held_loop(m, f"c{i}", f"p{i}", 0.01, offset=0.3 + i)
    return m


#: name -> (model of n units, co-simulation options)
SHAPES = {
    "ring e=0": (ring, {}),
    "ring e=1": (ring, {"extrapolation": 1}),
    "ring GS": (ring, {"scheme": "gauss-seidel"}),
    "fan resolve": (fan, {}),
    "fan delay": (fan, {"feedthrough": "delay"}),
    "loops": (loops, {}),
}
#: The shapes also run with 32 units (one process each: 32 servers / actors on this machine).
SHAPES_32 = ("ring e=0", "ring GS", "fan resolve", "loops")


#: The configurations compared: the macro-step engine alone; the default (the compiled
#: exchange in process where it applies); the protocol's separate requests (the reference,
#: before the engine).
PATHS = {"engine": dict(compiled=False),
         "default": dict(),
         "protocol": dict(engine=False, compiled=False)}


def macro_step_us(make, options, backend, path="engine", n=N) -> tuple[float, float]:
    """Best per-macro-step wall time (us) over REPEAT blocks of STEPS steps of the shape
    ``make(n)``, and its round trips per step: the program's, or for a shape that iterates
    couplings those the run took."""
    cfg = CosimConfig(H=0.01, backend=backend, log_every=10 * STEPS, **PATHS[path],
                      **options)
    sim = CoSimulation(make(n), SimulationConfig(dt=0.01, t_end=(REPEAT + 1) * STEPS * 0.01 + 1,
                                                log=[], cosim=cfg))
    try:
        m = sim.master
        m.initialize()
        m.advance(until=m.T + 10 * 0.01)            # warm-up
        best = float("inf")
        rounds = m.engine.transport.rounds if m.engine is not None else 0
        steps = m.stats["macro_steps"]
        for _ in range(REPEAT):
            t0 = time.perf_counter()
            m.advance(until=m.T + STEPS * 0.01 - 1e-9)
            best = min(best, time.perf_counter() - t0)
        if m.engine is None:
            return best / STEPS * 1e6, -1
        program = m.engine.program
        trips = program.round_trips
        if any(s.coupling for s in program.stages):
            trips = (m.engine.transport.rounds - rounds) / (m.stats["macro_steps"] - steps)
        return best / STEPS * 1e6, trips
    finally:
        sim.close()


class RawEchoes:
    """N echo processes answering ``reply`` to anything (``curve``: over CURVE)."""

    def __init__(self, n, reply, curve=False):
        import zmq
        server = client = None
        if curve:
            server, client = zmq.curve_keypair(), zmq.curve_keypair()
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        self.procs = [ctx.Process(target=_echo, args=(q, reply, server), daemon=True)
                      for _ in range(n)]
        for p in self.procs:
            p.start()
        self.socks = []
        for _ in self.procs:
            s = zmq.Context.instance().socket(zmq.REQ)
            if curve:
                s.curve_serverkey = server[0]
                s.curve_publickey, s.curve_secretkey = client
            s.connect(f"tcp://127.0.0.1:{q.get(timeout=60)}")
            self.socks.append(s)

    def fan_out_us(self, request, rounds=STEPS) -> float:
        return self._best(request, rounds, parallel=True)

    def chain_us(self, request, rounds=STEPS) -> float:
        return self._best(request, rounds, parallel=False)

    def _best(self, request, rounds, parallel):
        socks = self.socks
        best = float("inf")
        for _ in range(REPEAT):
            t0 = time.perf_counter()
            for _ in range(rounds):
                if parallel:
                    for s in socks:
                        s.send(request)
                    for s in socks:
                        s.recv()
                else:
                    for s in socks:
                        s.send(request)
                        s.recv()
            best = min(best, time.perf_counter() - t0)
        return best / rounds * 1e6

    def close(self):
        for s in self.socks:
            s.send(b"stop")
            s.recv()
            s.close()
        for p in self.procs:
            p.join(timeout=10)


def ev_run_s(backend, path="engine", t_end=10.0) -> tuple[float, object]:
    from dataclasses import replace

    from examples.electric_vehicle import build, config
    cfg = config(backend=backend, t_end=t_end)
    cfg = replace(cfg, cosim=replace(cfg.cosim, **PATHS[path]))
    sim = CoSimulation(build(), cfg)
    try:
        sim.master.initialize()
        t0 = time.perf_counter()
        sim.run()
        wall = time.perf_counter() - t0
        m = sim.master
        return wall, (m.engine.program if m.engine is not None else None,
                      m.stats["macro_steps"], m.stats["iterations"],
                      m.engine.transport.rounds if m.engine is not None else None)
    finally:
        sim.close()


def raw_floors(request, reply, n=N) -> dict:
    """Raw round trips (us) to ``n`` echo processes, plain and over CURVE: ``{(curve,
    "fan"|"chain"): us}``."""
    out = {}
    for curve in (False, True):
        echoes = RawEchoes(n, reply, curve)
        try:
            out[(curve, "fan")] = min(echoes.fan_out_us(request) for _ in range(2))
            out[(curve, "chain")] = min(echoes.chain_us(request) for _ in range(2))
        finally:
            echoes.close()
    return out


def shape_table(n: int, names, paths=("engine", "protocol")) -> None:
    """Print the shapes ``names`` with ``n`` units on zmq and Ray (each ``paths``) and in
    process, against the raw floors measured before and after them."""
    request = encode_batch([P.Step(("u",), (0,), 0, 0.0, 0.01, np.ones(1))])
    reply = encode_batch([P.Stepped(0.01, False, np.inf, np.ones(1))])
    raw = raw_floors(request, reply, n)
    rows = []
    for name in names:
        make, options = SHAPES[name]
        local, _ = macro_step_us(make, options, "local", "default", n)
        for backend in ("zmq", "ray"):
            got = {path: macro_step_us(make, options, backend, path, n) for path in paths}
            trips = got["engine"][1]
            rows.append((name, backend, trips, options.get("scheme") == "gauss-seidel", local,
                         got["engine"][0], got.get("protocol", (float("nan"),))[0]))
    # The raw references once more after the shapes (the best of both: load drifts).
    again = raw_floors(request, reply, n)
    raw = {k: min(v, again[k]) for k, v in raw.items()}
    print(f"\nmacro step, {n} units, one process each (us); raw pyzmq fan-out "
          f"{raw[(False, 'fan')]:.0f} (CURVE {raw[(True, 'fan')]:.0f}), sequential chain "
          f"{raw[(False, 'chain')]:.0f} (CURVE {raw[(True, 'chain')]:.0f}); floor = the "
          "program's round trips done raw (a Gauss-Seidel ring's: the chain)")
    print(f"{'shape':<12} {'backend':<7} {'trips':>5} {'local':>6} {'engine':>7} "
          f"{'protocol':>9} {'floor':>6} {'CURVE floor':>11} {'engine/floor':>12} "
          f"{'engine/CURVE':>12} {'protocol/floor':>14}")
    for name, backend, trips, gs, local, new, old in rows:
        plain = raw[(False, "chain")] if gs else trips * raw[(False, "fan")]
        curve = raw[(True, "chain")] if gs else trips * raw[(True, "fan")]
        print(f"{name:<12} {backend:<7} {trips:>5.3g} {local:6.0f} {new:7.0f} {old:9.0f} "
              f"{plain:6.0f} {curve:11.0f} {new / plain:12.2f} {new / curve:12.2f} "
              f"{old / plain:14.2f}")
    assert all(r[5] > 0 for r in rows)


@pytest.mark.bench
def test_bench_shapes_32(ray_session):
    """The issue's second size: 32 units, one process each (the engine only: the protocol
    path's figures at 8 units say what it costs)."""
    shape_table(32, SHAPES_32, paths=("engine",))
    print(f"load average (1 min): {__import__('os').getloadavg()[0]:.2f}")


@pytest.mark.bench
def test_bench_shapes(ray_session):
    request = encode_batch([P.Step(("u",), (0,), 0, 0.0, 0.01, np.ones(1))])
    reply = encode_batch([P.Stepped(0.01, False, np.inf, np.ones(1))])
    shape_table(N, SHAPES)
    print(f"load average (1 min): {__import__('os').getloadavg()[0]:.2f}")
    # The EV showcase: its wire floor from the in-process run and the raw round trip.
    ev_local, _ = ev_run_s("local", "default")
    raw5 = raw_floors(request, reply, 5)
    for backend in ("zmq", "ray"):
        new, (program, steps, iterations, rounds) = ev_run_s(backend)
        old, _ = ev_run_s(backend, "protocol")
        # Round trips per macro step: the one-step program's, each coupling iteration past
        # the first one more (iterations counts them all); and those the run took (windows
        # of macro steps send a later step's actions with an earlier one's rounds).
        couplings = sum(1 for s in program.stages if s.coupling)
        trips = program.round_trips + iterations / steps - couplings
        took = rounds / steps
        fan, fan_curve = raw5[(False, "fan")] * 1e-6, raw5[(True, "fan")] * 1e-6
        for what, n in (("the program's", trips), ("the run's", took)):
            floor = ev_local + steps * n * fan
            curve = ev_local + steps * n * fan_curve
            print(f"EV {backend}, 10 s ({steps} macro steps, {iterations / steps:.2f} coupling "
                  f"evaluations per step): engine {new:.2f} s, protocol {old:.2f} s, in "
                  f"process {ev_local:.2f} s; wire floor with {what} {n:.2f} round trips/step "
                  f"x raw {fan * 1e6:.0f} us + in process: {floor:.2f} s (CURVE {curve:.2f} s) "
                  f"-> engine/floor {new / floor:.2f} (CURVE {new / curve:.2f}), "
                  f"protocol/floor {old / floor:.2f}")
        print(program.table())
