"""A live `cosim serve` process against 20,000 mutated messages and 3,000 fused steps (half
of them mutated) at the unit's time: it answers every one (an error reply or a result),
never exits, never hangs, and serves a legitimate master afterwards bit for bit as a unit
run in process."""

import subprocess
import sys
from collections import Counter
from pathlib import Path

import msgpack
import numpy as np
import pytest
import zmq

from cluster.codec import decode_batch, encode_batch
from cosim import CoSimulation, CosimConfig, SimulationConfig
from cosim.master import protocol as P
from tests.cluster.scenarios import three_units

pytestmark = [pytest.mark.cluster, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
N = 20_000


def seeds() -> list[bytes]:
    """Real request batches of a session, as a master sends them."""
    return [encode_batch(b) for b in (
        [P.Hello(P.PROTOCOL_VERSION, "fuzz")], [P.Initialize(0.0), P.Describe()],
        [P.SetInputs({"u": np.ones(1)}, {"u": (np.zeros(1),)}), P.DoStep(0.0, 0.002),
         P.GetOutputs()],
        [P.RefreshOutputs(), P.GetOutputs()], [P.GetState()], [P.CollectLogs()],
        [P.Heartbeat()], [P.Terminate()],
        # Fused steps (the server's fast lane): held, with derivatives, refreshed.
        [P.Step(("u",), (0,), 0, 0.0, 0.002, np.ones(1))],
        [P.Step(("u",), (2,), 1, 0.0, 0.004, np.array([1.0, 0.5, -0.25]))],
        [P.Step(("u",), (1,), 0, 0.0, 0.002, np.array([1.0, 0.5]))],
        # A unit of a held coupling: its step kept, then its held input refreshed at T+H.
        [P.Step(("u",), (0,), P.STEP_KEEP, 0.0, 0.002, np.ones(1)),
         P.Step(("u",), (0,), P.STEP_REFRESH, 0.002, 0.0, np.ones(1))])]


def mutations(rng, seeds):
    """(kind, frames) of N mutated messages."""
    kinds = ["bitflip", "truncate", "extend", "nest", "length", "ext", "oversize", "unit",
             "frames"]
    for i in range(N):
        kind = kinds[i % len(kinds)]
        data = bytearray(seeds[rng.integers(len(seeds))])
        unit = b"a"
        if kind == "bitflip":
            for _ in range(rng.integers(1, 9)):
                j = rng.integers(len(data))
                data[j] ^= 1 << rng.integers(8)
        elif kind == "truncate":
            data = data[:rng.integers(len(data))]
        elif kind == "extend":
            data += rng.bytes(int(rng.integers(1, 64)))
        elif kind == "nest":
            depth = int(rng.integers(100, 3000))
            data = bytearray(b"\x91" * depth + b"\x90")         # arrays of one array ...
        elif kind == "length":                                    # headers that lie
            data = bytearray(rng.choice([b"\xdd\x7f\xff\xff\xff", b"\xdf\x7f\xff\xff\xff",
                                         b"\xdb\x7f\xff\xff\xff", b"\xc6\x7f\xff\xff\xff"]))
            data += rng.bytes(8)
        elif kind == "ext":                                       # bogus array extensions
            data = bytearray(msgpack.packb([[int(rng.integers(0, 20)),
                                             msgpack.ExtType(int(rng.integers(0, 128)),
                                                             rng.bytes(int(rng.integers(0, 40))))]]))
        elif kind == "oversize":
            data = bytearray(rng.bytes(1_000_001))
        elif kind == "unit":
            unit = rng.bytes(int(rng.integers(0, 20)))
        yield kind, ([unit, bytes(data)] if kind != "frames" else
                     [bytes(data)] * int(rng.choice([1, 3])))


def test_twenty_thousand_mutated_messages_kill_nothing(tmp_path):
    model = three_units()
    model.blocks = [model["a"]]
    model.connections = []
    path = tmp_path / "a.yaml"
    model.to_yaml(path, simulation=SimulationConfig(dt=0.002, t_end=0.0))
    proc = subprocess.Popen([sys.executable, "-m", "cosim.cli", "serve", str(path), "--bind",
                             "tcp://127.0.0.1:0", "--max-message-size", "1000000",
                             "--max-ticks", "5000", "--log-level", "ERROR"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        address = proc.stdout.readline().strip().rsplit(" on ", 1)[1]
        ctx = zmq.Context.instance()

        def client():
            s = ctx.socket(zmq.REQ)
            s.setsockopt(zmq.LINGER, 0)
            s.RCVTIMEO = 60_000                  # generous: a hang, not a slow machine
            s.connect(address)
            return s

        sock = client()
        outcome = Counter()
        rng = np.random.default_rng(7)
        for kind, frames in mutations(rng, seeds()):
            sock.send_multipart(frames)
            try:
                reply = sock.recv_multipart()
            except zmq.Again:
                outcome["no reply"] += 1
                sock.close(linger=0)
                sock = client()
                continue
            assert proc.poll() is None, f"the server exited after a {kind} message"
            errors = [r for frame in reply for r in decode_batch(frame)
                      if isinstance(r, P.ErrorReply)]
            outcome[f"{kind}: error reply" if errors else f"{kind}: served"] += 1
        # The fast lane: fused steps at the unit's own time (so that they are served there),
        # every other one with bits flipped.
        sock.send_multipart([b"a", encode_batch([P.Initialize(0.0)])])
        sock.recv_multipart()
        t, lane = 0.0, Counter()
        for i in range(3000):
            order = i % 3
            messages = [[P.Step(("u",), (order,), int(i % 4 == 0), t, 0.002,
                                rng.normal(size=1 + order))]]
            if i % 5 == 1:      # a held coupling's pairs: kept, then rolled back to it
                messages = [[P.Step(("u",), (0,), hold, t, 0.002, rng.normal(size=1)),
                             P.Step(("u",), (0,), P.STEP_REFRESH, round(t + 0.002, 12), 0.0,
                                    rng.normal(size=1))]
                            for hold in (P.STEP_KEEP, P.STEP_ROLLBACK)]
            for reqs in messages:
                data = bytearray(encode_batch(reqs))
                if i % 2:
                    for _ in range(rng.integers(1, 4)):
                        j = rng.integers(len(data))
                        data[j] ^= 1 << rng.integers(8)
                sock.send_multipart([b"a", bytes(data)])
                (reply,) = sock.recv_multipart()        # a hang fails here (RCVTIMEO)
                assert proc.poll() is None, "the server exited after a fused step"
                reps = decode_batch(reply)
                assert len(reps) in (1, len(reqs))
                rep = reps[0]
                lane[type(rep).__name__] += 1
                if type(rep) is not P.Stepped:
                    # A flipped bit may make another valid Step (its mode rolling the unit
                    # back to a kept state, another h): go on from where the unit is.
                    sock.send_multipart([b"a", encode_batch([P.GetState()])])
                    t = decode_batch(sock.recv_multipart()[0])[0].t
                    break
                if reqs is messages[-1]:        # (a kept pair's rollback starts at t)
                    t = rep.t_reached
        assert lane["Stepped"] > 1500, lane
        sock.close(linger=0)
        print("\n" + ", ".join(f"{k} {v}" for k, v in sorted(outcome.items())), dict(lane))
        assert outcome["no reply"] == 0 and proc.poll() is None
        assert sum(outcome.values()) == N
        # A legitimate master afterwards: bit for bit the unit run in process.
        cosim = dict(H=0.02, scheme="gauss-seidel", extrapolation=1)
        cfg = SimulationConfig(dt=0.002, t_end=0.4, cosim=CosimConfig(**cosim))
        ref = CoSimulation(three_units(), cfg).run()
        remote = CoSimulation(three_units(), SimulationConfig(
            dt=0.002, t_end=0.4, cosim=CosimConfig(units={"a": {"address": address}},
                                                   **cosim)))
        try:
            logs = remote.run()
        finally:
            remote.close()
        # Column for column (a served unit logs its ports: tests/cluster/test_remote_columns).
        assert sorted(logs) == sorted(ref)
        for key in logs:
            np.testing.assert_array_equal(logs[key], ref[key], err_msg=key)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
