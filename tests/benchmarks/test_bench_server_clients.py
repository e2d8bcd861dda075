"""A legitimate master's run on a `cosim serve` alone and beside other clients: 50
heartbeat-only clients asking as fast as they are answered, and 10 and 50 readers
(``Describe``). Best of interleaved repeats; the ratio to the run alone is printed (opt-in:
``-m bench``).

Heartbeats are answered by their bytes, without touching the unit, and each client at most
every 20 ms (cluster/beats.py): answered at once, 50 such clients kept the server busy
answering them (~19,000 a second, ~50 us each) and every request of the master queued behind
about half of them, in the socket's fair queue: x3.1 of the run alone. Readers of a unit
that a master drives are paced likewise (each at most every 50 ms, UnitServer.read_interval):
answered at once, 10 readers made the run x2.0 and 50 readers x5.3 slower (load 9-11); paced,
x0.93 and x1.12 (load 9.5)."""

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import zmq

from cluster.codec import encode_batch
from cosim.master import protocol as P
from tests.cluster.served import run, serve, stop, unit_file

pytestmark = pytest.mark.bench
REPEATS = 3


def crowd(address, n, requests, stop_flag, answered=None):
    ctx = zmq.Context.instance()
    answered = answered if answered is not None else [0]

    def client():
        s = ctx.socket(zmq.REQ)
        s.setsockopt(zmq.LINGER, 0)
        s.RCVTIMEO = 10_000
        s.connect(address)
        msg = [b"a", encode_batch(requests)]
        while not stop_flag.is_set():
            s.send_multipart(msg)
            s.recv_multipart()
            answered[0] += 1
        s.close()
    threads = [threading.Thread(target=client, daemon=True) for _ in range(n)]
    for t in threads:
        t.start()
    return threads


def timed(address) -> float:
    t0 = time.perf_counter()
    run(address, t_end=10.0)
    return time.perf_counter() - t0


def test_a_master_beside_heartbeat_clients(tmp_path):
    proc, address = serve(unit_file(tmp_path))
    try:
        best = {"alone": [], "50 heartbeat clients": [], "10 readers": [], "50 readers": []}
        timed(address)                                    # warm up
        for _ in range(REPEATS):
            for kind, (n, req) in (("alone", (0, None)),
                                   ("50 heartbeat clients", (50, [P.Heartbeat()])),
                                   ("10 readers", (10, [P.Describe()])),
                                   ("50 readers", (50, [P.Describe()]))):
                flag = threading.Event()
                # (the clients live in a child process: not this master's GIL)
                child = None
                if n:
                    child = subprocess.Popen(
                        [sys.executable, "-c", _CHILD, address, str(n), req[0].__class__.__name__],
                        cwd=Path(__file__).resolve().parents[2], stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE, text=True)
                    assert child.stdout.readline().strip() == "ready"    # all answered once
                try:
                    best[kind].append(timed(address))
                finally:
                    flag.set()
                    if child is not None:
                        child.stdin.close()
                        print(child.stdout.read().rstrip())
                        child.wait(timeout=60)
        alone = min(best["alone"])
        for kind, times in best.items():
            print(f"{kind}: {min(times):.2f} s (x{min(times) / alone:.2f} of alone)")
    finally:
        stop(proc)


_CHILD = """
import sys, threading
from cosim.master import protocol as P
from tests.benchmarks.test_bench_server_clients import crowd
flag = threading.Event()
answered = [0]
threads = crowd(sys.argv[1], int(sys.argv[2]), [getattr(P, sys.argv[3])()], flag, answered)
import time
while answered[0] < 10 * int(sys.argv[2]):
    time.sleep(0.01)
print("ready", flush=True)
answered[0] = 0
sys.stdin.read()
flag.set()
for t in threads:
    t.join()
print(f"  ({answered[0]} {sys.argv[3]} requests answered meanwhile)", flush=True)
"""
