"""Many clients of one ``cosim serve`` at once, for the multi-client fuzz
(tests/cluster/test_server_clients.py): ``python -m tests.cluster.rogues ADDRESS N SEED
DONE_FILE`` runs N client threads until DONE_FILE exists (printing ``ready`` once they are
at work), then prints one JSON line of counts.

Kinds of client (chosen by thread number):

- *reader*: read-only requests (Describe, Heartbeat, GetState, GetOutputs) to every unit;
- *intruder*: requests that would change units ``a`` and ``b`` (Hello, Initialize, SetInputs,
  DoStep, SetState, Terminate, Reload, fused Steps), sent once the legitimate master has
  stepped them (GetState shows it): each must be refused while that master runs;
- *leaver*: drives the spare unit ``c`` (Hello, Initialize, a long DoStep) and leaves in
  the middle of the step (closes its socket); the next leaver waits for the lease;
- *flooder*: a DEALER sending bursts of read-only requests to every unit and closing
  without reading every reply;
- *garbage*: malformed frames.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np
import zmq

from cluster.codec import CodecError, decode_batch, encode_batch
from cosim.master import protocol as P

KINDS = ("reader", "intruder", "leaver", "flooder", "garbage")
TIMEOUT_MS = 120_000            # a hang, not a slow machine


def _req(ctx, address):
    s = ctx.socket(zmq.REQ)
    s.setsockopt(zmq.LINGER, 0)
    s.RCVTIMEO = s.SNDTIMEO = TIMEOUT_MS
    s.connect(address)
    return s


def _ask(sock, frames) -> list:
    sock.send_multipart(frames)
    return sock.recv_multipart()


def _replies(frame: bytes) -> list:
    try:
        return decode_batch(frame)
    except CodecError:
        return ["undecodable"]


class Client(threading.Thread):
    def __init__(self, ctx, address, kind, seed, done: Path, counts: Counter, lock):
        super().__init__(daemon=True)
        self.ctx, self.address, self.kind = ctx, address, kind
        self.rng = np.random.default_rng(seed)
        self.done, self.counts, self.lock = done, counts, lock

    def count(self, key):
        with self.lock:
            self.counts[key] += 1

    def run(self):
        try:
            getattr(self, self.kind)()
        except zmq.Again:
            self.count("hang")
        except Exception as err:  # noqa: BLE001 - reported, the test fails on it
            self.count(f"client error {type(err).__name__}: {err}")

    def _time(self, sock):
        """Unit a's time (None before it is initialized)."""
        (state,) = _replies(_ask(sock, [b"a", encode_batch([P.GetState()])])[0])
        return state.t if isinstance(state, P.UnitState) else None

    def reader(self):
        sock = _req(self.ctx, self.address)
        reads = [P.Describe(), P.Heartbeat(), P.GetState(), P.GetOutputs()]
        while not self.done.exists():
            unit = self.rng.choice([b"a", b"b", b"c"])
            req = reads[self.rng.integers(len(reads))]
            (rep,) = _replies(_ask(sock, [unit, encode_batch([req])])[0])
            # (GetOutputs of a unit nobody initialized is a protocol error: answered.)
            ok = not isinstance(rep, P.ErrorReply) or (
                rep.kind == P.ErrorKind.PROTOCOL and "busy" not in rep.message)
            self.count("read answered" if ok else f"read refused: {rep.message[:80]}")
        sock.close()

    def intruder(self):
        sock = _req(self.ctx, self.address)
        # Once the legitimate master drives a and b: a's time changed (its Initialize) and
        # is past 0 (its steps).
        first, changed = self._time(sock), False
        while True:
            if self.done.exists():
                return
            t = self._time(sock)
            changed = changed or t != first
            if changed and t is not None and t > 0:
                break
            time.sleep(0.01)
        changes = [
            [P.Hello(P.PROTOCOL_VERSION, "intruder")], [P.Initialize(0.0)],
            [P.SetInputs({"u": np.ones(1)})], [P.DoStep(0.0, 0.002)],
            [P.SetState(P.UnitState(0.0, {}))], [P.Terminate()],
            [P.Reload("model: {}")], [P.Step(("u",), (0,), 0, 0.0, 0.002, np.ones(1))],
            [P.Describe(), P.Initialize(0.0)]]
        while not self.done.exists():
            unit = self.rng.choice([b"a", b"b"])
            batch = changes[self.rng.integers(len(changes))]
            frames = _ask(sock, [unit, encode_batch(batch)])
            done = self.done.exists()       # the run may have ended (units released)
            (rep, *_) = _replies(frames[0])
            if isinstance(rep, P.ErrorReply) and ("busy" in rep.message
                                                  or "reload" in rep.message.lower()):
                self.count("change refused")
            elif not done:
                self.count(f"change ACCEPTED during the run: {type(batch[-1]).__name__} "
                           f"-> {rep!r:.100}")
        sock.close()

    def leaver(self):
        while not self.done.exists():
            sock = _req(self.ctx, self.address)
            (rep, *_) = _replies(_ask(sock, [b"c", encode_batch(
                [P.Hello(P.PROTOCOL_VERSION, "leaver"), P.Initialize(0.0),
                 P.SetInputs({"u": np.ones(1)})])])[0])
            if isinstance(rep, P.ErrorReply):
                self.count("leaver refused (busy)" if "busy" in rep.message
                           else f"leaver error: {rep.message[:80]}")
                sock.close()
                time.sleep(0.1)
                continue
            self.count("leaver drives c")
            # A long step (offloaded), and away before its reply.
            sock.send_multipart([b"c", encode_batch([P.DoStep(0.0, float(
                self.rng.choice([2.0, 4.0, 8.0])))])])
            time.sleep(float(self.rng.uniform(0.0, 0.05)))
            sock.close()
            self.count("left mid-step")

    def flooder(self):
        while not self.done.exists():
            d = self.ctx.socket(zmq.DEALER)
            d.setsockopt(zmq.LINGER, 0)
            d.RCVTIMEO = 2000
            d.connect(self.address)
            sent = 0
            for _ in range(int(self.rng.integers(5, 40))):
                unit = self.rng.choice([b"a", b"b", b"c"])
                req = self.rng.choice([P.Heartbeat(), P.Describe(), P.GetState()])
                d.send_multipart([b"", unit, encode_batch([req])])
                sent += 1
            got = 0
            for _ in range(int(self.rng.integers(0, sent + 1))):
                try:
                    d.recv_multipart()
                    got += 1
                except zmq.Again:
                    self.count("flood reply late")
                    break
            self.count("flood bursts")
            d.close()

    def garbage(self):
        sock = _req(self.ctx, self.address)
        while not self.done.exists():
            frames = [self.rng.bytes(int(self.rng.integers(0, 30)))
                      for _ in range(int(self.rng.integers(1, 5)))]
            replies = _ask(sock, frames)
            self.count("garbage answered" if replies else "garbage unanswered")
        sock.close()


def main(address: str, n: int, seed: int, done: str) -> None:
    ctx = zmq.Context()
    counts, lock = Counter(), threading.Lock()
    clients = [Client(ctx, address, KINDS[i % len(KINDS)], seed + i, Path(done), counts,
                      lock) for i in range(n)]
    for c in clients:
        c.start()
    end = time.monotonic() + 60
    while sum(counts.values()) < n and time.monotonic() < end:
        time.sleep(0.01)
    print("ready", flush=True)          # at work: the legitimate master may start
    for c in clients:
        c.join(timeout=TIMEOUT_MS / 1000 + 30)
        if c.is_alive():
            counts["client still running"] += 1
    print(json.dumps(dict(counts)), flush=True)
    ctx.term() if not any(c.is_alive() for c in clients) else None


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
