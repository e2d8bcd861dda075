"""Benchmark: per-macro-step exchange overhead with 1 and 8 trivial units, per backend.

References measured in the same run with the same payloads (the encoded batch of one unit's
[SetInputs, DoStep, GetOutputs] and its replies): a raw pyzmq REQ/REP round trip to an echo
server in another process, a raw 8-way pyzmq fan-out, and a raw Ray actor call (1 and 8-way).
Run: python -m pytest -m bench -s tests/benchmarks/test_bench_backends.py
"""

from __future__ import annotations

import multiprocessing as mp
import time

import numpy as np
import pytest

from cluster.codec import encode_batch
from cosim import CoSimulation, CosimConfig, SimulationConfig

from tests.benchmarks.rings import ring
from cosim.master import protocol as P

STEPS = 400
#: Every figure is the best of this many blocks of rounds (the machine's speed drifts).
REPEAT = 3


def cosim_us(n, backend, units=None, processes=None):
    sim = CoSimulation(ring(n), SimulationConfig(dt=0.01, t_end=(REPEAT * STEPS + 1) * 0.01,
                                              log=[],
                                              cosim=CosimConfig(H=0.01, backend=backend,
                                                                units=units or {},
                                                                processes=processes,
                                                                log_every=10 * STEPS)))
    try:
        sim.master.initialize()
        sim.master.step()                      # warm-up
        best = float("inf")
        for _ in range(REPEAT):
            t0 = time.perf_counter()
            for _ in range(STEPS):
                sim.master.step()
            best = min(best, time.perf_counter() - t0)
        return best / STEPS * 1e6
    finally:
        sim.close()


def _echo(port_queue, reply, keys=None):
    """An echo server answering ``reply``; with ``keys`` (public, secret), a CURVE server."""
    import zmq
    sock = zmq.Context.instance().socket(zmq.REP)
    if keys is not None:
        sock.curve_server = True
        sock.curve_publickey, sock.curve_secretkey = keys
    port = sock.bind_to_random_port("tcp://127.0.0.1")
    port_queue.put(port)
    while True:
        msg = sock.recv()
        if msg == b"stop":
            sock.send(b"")
            return
        sock.send(reply)


def raw_zmq_us(n_servers, request, reply, rounds=600):
    import zmq
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_echo, args=(q, reply), daemon=True) for _ in range(n_servers)]
    for p in procs:
        p.start()
    socks = []
    for _ in procs:
        s = zmq.Context.instance().socket(zmq.REQ)
        s.connect(f"tcp://127.0.0.1:{q.get(timeout=30)}")
        socks.append(s)
    for s in socks:
        s.send(request)
        s.recv()
    best = float("inf")
    for _ in range(REPEAT):
        t0 = time.perf_counter()
        for _ in range(rounds):
            for s in socks:
                s.send(request)
            for s in socks:
                s.recv()
        best = min(best, time.perf_counter() - t0)
    us = best / rounds * 1e6
    for s in socks:
        s.send(b"stop")
        s.recv()
        s.close()
    for p in procs:
        p.join(timeout=5)
    return us


def raw_ray_us(n_actors, request, rounds=150):
    import ray

    @ray.remote(num_cpus=0)
    class Echo:
        def call(self, data):
            return data
    actors = [Echo.remote() for _ in range(n_actors)]
    ray.get([a.call.remote(request) for a in actors])
    best = float("inf")
    for _ in range(REPEAT):
        t0 = time.perf_counter()
        for _ in range(rounds):
            ray.get([a.call.remote(request) for a in actors])
        best = min(best, time.perf_counter() - t0)
    us = best / rounds * 1e6
    for a in actors:
        ray.kill(a)
    return us


@pytest.mark.bench
def test_bench_exchange_overhead_per_backend(ray_session):
    request = encode_batch([P.SetInputs({"u": np.ones(1)}), P.DoStep(0.0, 0.01),
                            P.GetOutputs()])
    reply = encode_batch([P.Ok(), P.StepDone(0.01, False), P.Outputs({"y": np.ones(1)})])
    rows = []
    for n in (1, 8):
        raw_z = raw_zmq_us(n, request, reply)
        raw_r = raw_ray_us(n, request)
        # The same units hosted by 2 server processes (one per core) instead of n.
        two = {f"u{i}": {"process": f"p{i % 2}"} for i in range(n)}
        rows.append((n, raw_z, raw_r, cosim_us(n, "local"), cosim_us(n, "ray"),
                     cosim_us(n, "ray", two), cosim_us(n, "zmq"), cosim_us(n, "zmq", two)))
    print("\nper-macro-step exchange, trivial units (us per step; '2 procs': the units "
          "hosted by 2 actors / server processes)")
    print(f"{'units':>5} {'raw pyzmq':>10} {'raw Ray call':>13} {'cosim local':>12} "
          f"{'cosim ray':>10} {'ray 2 procs':>12} {'cosim zmq':>10} {'zmq 2 procs':>12}")
    for n, z, r, loc, rb, r2, zb, z2 in rows:
        print(f"{n:>5} {z:10.1f} {r:13.1f} {loc:12.1f} {rb:10.1f} {r2:12.1f} {zb:10.1f} "
              f"{z2:12.1f}")
    print("ratios to raw pyzmq: " + "; ".join(
        f"{n} units: ray {rb / z:.2f}, ray 2 procs {r2 / z:.2f}, zmq {zb / z:.2f}, "
        f"zmq 2 procs {z2 / z:.2f}, raw Ray call / cosim ray {r / rb:.2f}"
        for n, z, r, _, rb, r2, zb, z2 in rows))
    assert all(r[1] > 0 for r in rows)


def heavy_pair():
    """Two compute-heavy units (each 60 lags on the interpreter), coupled both ways."""
    from blocks import FirstOrderLag
    from cosim import Inport, Model, Outport, Subsystem
    m = Model("heavy")
    for name in ("a", "b"):
        s = Subsystem(name, atomic=True, dt=0.001, solver="RK4", options={"fast": False})
        s.add(Inport("u"))
        prev = "u.out"
        for i in range(60):
            s.add(FirstOrderLag(f"l{i}", tau=0.05 + 0.001 * i))
            s.connect(prev, f"l{i}.in")
            prev = f"l{i}.out"
        s.add(Outport("y"))
        s.connect(prev, "y.in")
        m.add(s)
    m.connect("a.y", "b.u")
    m.connect("b.y", "a.u")
    return m


@pytest.mark.bench
def test_bench_two_heavy_units_in_parallel(ray_session):
    # Interleaved repeats, best of each: this machine's speed drifts by up to 1.5x between
    # runs a few seconds apart, which one run per backend would report as the speed-up.
    times = {"local": [], "ray": []}
    for _ in range(3):
        for backend in times:
            sim = CoSimulation(heavy_pair(), SimulationConfig(
                dt=0.001, t_end=1.0, log=[], cosim=CosimConfig(H=0.02, backend=backend)))
            try:
                sim.master.initialize()
                t0 = time.perf_counter()
                sim.run()
                times[backend].append(time.perf_counter() - t0)
            finally:
                sim.close()
    best = {b: min(ts) for b, ts in times.items()}
    print(f"\ntwo compute-heavy units, Jacobi (best of 3): in process {best['local']:.2f} s, "
          f"Ray actors {best['ray']:.2f} s, speed-up {best['local'] / best['ray']:.2f}x")
    assert all(t > 0 for ts in times.values() for t in ts)


#: A raw pyzmq echo server: a process with nothing but zmq imported (the reference a unit
#: server is measured against), answering every request with the reply it was started with.
_ECHO = """
import sys, zmq
sock = zmq.Context.instance().socket(zmq.REP)
print(sock.bind_to_random_port("tcp://127.0.0.1"), flush=True)
reply = bytes.fromhex(sys.argv[1])
while True:
    frames = sock.recv_multipart()
    sock.send_multipart([reply] * (len(frames) // 2))
"""


class RawFanout:
    """A raw pyzmq fan-out: ``n_units`` [name, request] pairs spread over ``n_procs`` echo
    processes (one message per process), every reply awaited; :meth:`block` times rounds."""

    def __init__(self, n_procs, n_units, request, reply):
        import subprocess
        import sys

        import zmq
        self.procs = [subprocess.Popen([sys.executable, "-c", _ECHO, reply.hex()],
                                       stdout=subprocess.PIPE, text=True)
                      for _ in range(n_procs)]
        self.socks = []
        try:
            for p in self.procs:
                s = zmq.Context.instance().socket(zmq.REQ)
                s.RCVTIMEO = s.SNDTIMEO = 60_000
                s.setsockopt(zmq.LINGER, 0)
                s.connect(f"tcp://127.0.0.1:{int(p.stdout.readline())}")
                self.socks.append(s)
            self.msgs = [[f for u in range(i, n_units, n_procs)
                          for f in (f"u{u}".encode(), request)] for i in range(n_procs)]
            self.block(1)
        except BaseException:
            self.close()
            raise

    def block(self, rounds: int) -> float:
        """Seconds for ``rounds`` rounds."""
        socks, msgs = self.socks, self.msgs
        t0 = time.perf_counter()
        for _ in range(rounds):
            for s, m in zip(socks, msgs):
                s.send_multipart(m)
            for s in socks:
                s.recv_multipart()
        return time.perf_counter() - t0

    def close(self) -> None:
        for s in self.socks:
            s.close()
        for p in self.procs:        # echo servers are this benchmark's own children
            p.kill()
            p.wait()


class CosimSteps:
    """Trivial units in a ring on ``backend`` (see :func:`cosim_us`); :meth:`block` times
    macro steps."""

    def __init__(self, n, backend, processes=None):
        self.sim = CoSimulation(ring(n), SimulationConfig(
            dt=0.01, t_end=1e3, log=[],
            cosim=CosimConfig(H=0.01, backend=backend, processes=processes,
                              log_every=10 ** 9)))
        try:
            self.sim.master.initialize()
            self.block(1)
        except BaseException:
            self.sim.close()
            raise

    def block(self, steps: int) -> float:
        step = self.sim.master.step
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        return time.perf_counter() - t0

    def close(self) -> None:
        self.sim.close()


def interleaved_us(contenders: dict, steps: int, repeat: int) -> dict:
    """Best µs per step of each contender over ``repeat`` rounds of blocks of ``steps``,
    the contenders taking turns in every round: the machine's drift (others share it) then
    reaches all of them alike, not the one measured last."""
    best = dict.fromkeys(contenders, float("inf"))
    for _ in range(repeat):
        for name, c in contenders.items():
            best[name] = min(best[name], c.block(steps))
    return {name: t / steps * 1e6 for name, t in best.items()}


@pytest.mark.bench
def test_bench_many_units(ray_session):
    """1 / 8 / 32 / 64 trivial units on the zmq and Ray backends against a raw pyzmq fan-out
    of the same payloads in the same run: to as many processes as units (what a process per
    unit costs at best) and to one process per core (what grouped units cost at best). The
    backends host the units one per process (n <= 8) and spread over the cores
    (``CosimConfig(processes="cores")``)."""
    import os
    cores = os.cpu_count()
    request = encode_batch([P.SetInputs({"u": np.ones(1)}), P.DoStep(0.0, 0.01),
                            P.GetOutputs()])
    reply = encode_batch([P.Ok(), P.StepDone(0.01, False), P.Outputs({"y": np.ones(1)})])
    rows = []
    print(f"\nmany trivial units, us per macro step ({cores} cores; 'grouped': "
          "processes='cores'; best of interleaved blocks)")
    print(f"{'units':>5} {'raw n procs':>12} {'raw cores':>10} {'zmq each':>9} "
          f"{'zmq grouped':>12} {'ray each':>9} {'ray grouped':>12}   ratios to raw n procs",
          flush=True)
    for n in (1, 8, 32, 64):
        makers = {"raw n": lambda: RawFanout(n, n, request, reply),
                  "raw cores": lambda: RawFanout(min(n, cores), n, request, reply)}
        for b in ("zmq", "ray"):
            if n <= 8:
                makers[f"{b} each"] = lambda b=b: CosimSteps(n, b)
            makers[f"{b} grouped"] = lambda b=b: CosimSteps(n, b, processes="cores")
        contenders = {}
        try:
            for name, make in makers.items():
                contenders[name] = make()
            us = interleaved_us(contenders, steps=max(40, 1600 // n), repeat=7)
        finally:
            for c in contenders.values():
                c.close()
        raw_n = us["raw n"]
        each = {b: us[f"{b} each"] for b in ("zmq", "ray") if f"{b} each" in us}
        grouped = {b: us[f"{b} grouped"] for b in ("zmq", "ray")}
        rows.append((n, raw_n, us["raw cores"], each, grouped))
        e = {b: f"{each[b]:9.1f}" if b in each else f"{'-':>9}" for b in ("zmq", "ray")}
        print(f"{n:>5} {raw_n:12.1f} {us['raw cores']:10.1f} {e['zmq']} "
              f"{grouped['zmq']:12.1f} {e['ray']} {grouped['ray']:12.1f}   zmq grouped "
              f"{grouped['zmq'] / raw_n:.2f}, ray grouped {grouped['ray'] / raw_n:.2f}"
              + "".join(f", {b} each {each[b] / raw_n:.2f}" for b in each), flush=True)
    # Targets (issue 17): <= 1.5x raw pyzmq on zmq, <= 2x on Ray, every column.
    missed = [f"{n} units {b} {how} {us / raw_n:.2f}x" for n, raw_n, _, each, grouped in rows
              for how, runs in (("each", each), ("grouped", grouped))
              for b, us in runs.items() if us / raw_n > (1.5 if b == "zmq" else 2.0)]
    print("targets (zmq <= 1.5x, ray <= 2x raw n procs): "
          + ("all met" if not missed else "missed: " + "; ".join(missed)), flush=True)
    assert all(r[1] > 0 for r in rows)
