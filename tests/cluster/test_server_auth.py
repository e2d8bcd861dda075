"""Every server cosim starts is authenticated: the zmq backend's servers take a run's own
CURVE keys (handed over their standard input, never written to disk) and answer no other
client — no command of a plain client or of one with another key is accepted, Reload
included — while the run stays bit-identical; ``cosim serve`` refuses an address other
machines can reach without keys unless ``--insecure``."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zmq

from cluster.codec import encode_batch
from cosim import CoSimulation, CosimConfig, SimulationConfig
from cosim.master import protocol as P
from tests.cluster.scenarios import three_units
from tests.cluster.served import unit_file

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[2]
REQUESTS = [[P.Describe()], [P.GetState()], [P.Initialize(0.0)], [P.Heartbeat()],
            [P.Reload("model: {}")], [P.SetParameters({})], [P.Terminate()]]


def run(**cosim):
    config = SimulationConfig(dt=0.002, t_end=0.4, cosim=CosimConfig(
        H=0.02, scheme="gauss-seidel", extrapolation=1, **cosim))
    with CoSimulation(three_units(), config) as sim:
        return sim.run()


def intruders(address: str, server_public: bytes):
    """A plain client and one with a key of its own (the server's public key known)."""
    ctx = zmq.Context.instance()
    plain = ctx.socket(zmq.REQ)
    keyed = ctx.socket(zmq.REQ)
    keyed.curve_publickey, keyed.curve_secretkey = zmq.curve_keypair()
    keyed.curve_serverkey = server_public
    for s in (plain, keyed):
        s.setsockopt(zmq.LINGER, 0)
        s.SNDTIMEO = s.RCVTIMEO = 1000
        s.connect(address)
    return plain, keyed


def test_the_zmq_backends_servers_answer_only_their_master():
    ref = run()
    config = SimulationConfig(dt=0.002, t_end=0.4, cosim=CosimConfig(
        H=0.02, scheme="gauss-seidel", extrapolation=1, backend="zmq"))
    accepted, tried = 0, 0
    with CoSimulation(three_units(), config) as sim:
        sim.run(t_end=0.2)
        for server in sim.backend.servers:
            sockets = intruders(server.address, sim.backend.keys.server_public)
            for sock in sockets:
                for unit in ("a", "b"):
                    for requests in REQUESTS:
                        tried += 1
                        try:
                            sock.send_multipart([unit.encode(), encode_batch(requests)])
                            sock.recv_multipart()
                            accepted += 1
                        except zmq.Again:           # no handshake: nothing was delivered
                            sock.close(linger=0)
                            sock = intruders(server.address,
                                             sim.backend.keys.server_public)[0]
                sock.close(linger=0)
        logs = sim.run()
    print(f"{accepted} of {tried} unauthenticated commands answered")
    assert accepted == 0
    for key in ref:
        np.testing.assert_array_equal(ref[key], logs[key], err_msg=key)


def serve(*args):
    return subprocess.run([sys.executable, "-m", "cosim.cli", "serve", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


def test_cosim_serve_refuses_an_outside_address_without_keys(tmp_path):
    out = serve(str(unit_file(tmp_path)), "--bind", "tcp://0.0.0.0:0")
    assert out.returncode == 2
    assert "tcp://0.0.0.0:0 can be reached from other machines" in out.stderr
    assert "--insecure" in out.stderr and "--curve-secret" in out.stderr


def test_cosim_serve_on_an_outside_address_with_insecure_serves(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "cosim.cli", "serve", str(unit_file(tmp_path)),
                             "--bind", "tcp://0.0.0.0:0", "--insecure"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().startswith("serving a, b, c on tcp://0.0.0.0:")
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_a_masters_own_servers_take_its_output_paths(tmp_path):
    """A model from Python may give a Scope inside a unit any path: the server the zmq
    backend starts for it (with the run's keys) reads the unit file as the master's own,
    while a model file read by anyone else may write only inside the run's folder."""
    from blocks import Gain, Scope, Sine
    from cosim import Inport, Model, Outport, Subsystem
    m = Model("m")
    unit = Subsystem("u", atomic=True, dt=0.01)
    unit.add(Inport("i"), Gain("g", 2.0), Scope("sc", path=str(tmp_path / "u.png")),
             Outport("o"))
    unit.connect("i.out", "g.in")
    unit.connect("g.out", "o.in", "sc.in")
    m.add(Sine("src"), unit)
    m.connect("src.out", "u.i")
    config = SimulationConfig(dt=0.01, t_end=0.1, cosim=CosimConfig(H=0.01, backend="zmq"))
    with CoSimulation(m, config) as sim:
        logs = sim.run()
    assert len(logs["u/g.out"]) > 0
