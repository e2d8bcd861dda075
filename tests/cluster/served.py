"""A ``cosim serve`` for the server tests: its unit files, the process, and plain clients.

One set-up shared by the tests of a served unit (many clients, long steps, budgets,
authentication, frozen servers) and their benchmarks.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import zmq

from cluster.codec import decode_batch, encode_batch
from cosim import CoSimulation, CosimConfig, SimulationConfig
from cosim.master import protocol as P
from tests.cluster.scenarios import three_units

ROOT = Path(__file__).resolve().parents[2]
DT = 0.002


def unit_file(tmp_path, model=None, spare: bool = True) -> Path:
    """A unit file of units a and b of ``model`` (default :func:`three_units`) and, with
    ``spare``, c (a copy of a, for clients to drive)."""
    model = model if model is not None else three_units()
    blocks = [model["a"], model["b"]]
    if spare:
        copy = three_units()["a"]
        copy.name = "c"
        blocks.append(copy)
    model.blocks = blocks
    model.connections = []
    path = tmp_path / ("abc.yaml" if spare else "ab.yaml")
    model.to_yaml(path, simulation=SimulationConfig(dt=DT, t_end=0.0))
    return path


def serve(path, *extra, bind: str = "tcp://127.0.0.1:0"):
    """``cosim serve path *extra``: the process and the address it serves on."""
    proc = subprocess.Popen([sys.executable, "-m", "cosim.cli", "serve", str(path), "--bind",
                             bind, "--log-level", "ERROR", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    line = proc.stdout.readline()
    assert " on " in line, proc.stderr.read()
    return proc, line.strip().rsplit(" on ", 1)[1]


def stop(proc) -> None:
    proc.terminate()
    proc.wait(timeout=60)


def client(address):
    """A plain REQ client of the server."""
    s = zmq.Context.instance().socket(zmq.REQ)
    s.setsockopt(zmq.LINGER, 0)
    s.RCVTIMEO = 120_000          # a hang, not a slow machine
    s.connect(address)
    return s


def ask(sock, unit, requests):
    sock.send_multipart([unit.encode(), encode_batch(requests)])
    return decode_batch(sock.recv_multipart()[0])


def start(sock, unit, session):
    """A session of ``unit``: Hello, Initialize, its input set."""
    replies = ask(sock, unit, [P.Hello(P.PROTOCOL_VERSION, session), P.Initialize(0.0),
                               P.SetInputs({"u": np.ones(1)})])
    assert not any(isinstance(r, P.ErrorReply) for r in replies), replies


def config(address, t_end=2.0, **cosim) -> SimulationConfig:
    """A legitimate master's run of :func:`three_units`, units a and b at ``address``."""
    options = dict(H=0.02, scheme="gauss-seidel", extrapolation=1, timeout=120.0,
                   units={"a": {"address": address}, "b": {"address": address}})
    options.update(cosim)
    return SimulationConfig(dt=DT, t_end=t_end, cosim=CosimConfig(**options))


def run(address, t_end=2.0, done=None, model=None, **cosim):
    """The legitimate master's run (``done``: a file made when it has run, before it ends
    its units' sessions)."""
    sim = CoSimulation(model if model is not None else three_units(),
                       config(address, t_end, **cosim))
    try:
        return sim.run()
    finally:
        if done is not None:
            done.touch()
        sim.close()
