"""A unit server's answers to heartbeats: at once, with each unit's progress, paced per client.

A :class:`~cosim.master.protocol.Heartbeat` is answered by the server's own loop, beside a
step running on its worker thread, with :class:`~cosim.master.protocol.Alive`: the unit's
time now (it advances while the step runs) and whether it is stepping. A master waiting for
a long step thus tells a slow unit from a stuck step (answered, the time still) and from a
frozen or lost process (no answer at all; see :class:`cluster.liveness.Pulse`).

A message of nothing but heartbeats is recognised by its bytes (one prepared batch), with
no decoding, no owner bookkeeping beyond the owner's sign of life and no work for the unit.
Each client is answered at most once per :attr:`Beats.INTERVAL`: a client that asks faster
waits for its reply, so that a crowd of heartbeat clients, however fast they ask, cannot
take the server's time from the masters that drive its units (50 clients in a closed loop
answered at once made a master's run 3× slower; see
``tests/benchmarks/test_bench_server_clients.py``). The server paces its replies to readers
the same way (:meth:`Beats.pace`: read-only requests of units another master drives).
"""

from __future__ import annotations

import heapq
import itertools
import time

from cluster.codec import encode_batch
from cosim.master import protocol as P

__all__ = ["Beats"]

#: The batch of one Heartbeat, as every client encodes it.
BEAT = encode_batch([P.Heartbeat()])


class Beats:
    """The heartbeat answers of one server.

    Parameters
    ----------
    units : dict of str to Unit
        The units served (the dict itself: a reload replaces its contents).
    owners : Owners
        Told of the sign of life a heartbeat of a unit's owner is
        (:meth:`cluster.owners.Owners.alive`).
    """

    #: Least seconds between two replies to one client.
    INTERVAL = 0.02
    #: Most replies held back; past it, a reply goes at once (the cost of no pacing).
    MAX_LATER = 1024
    #: Most clients whose pace is remembered (those not heard from lately are forgotten).
    MAX_CLIENTS = 4096

    def __init__(self, units: dict, owners):
        self.units = units
        self.owners = owners
        self._next: dict[bytes, float] = {}        # client -> earliest time of its next reply
        self._later: list = []                      # heap of (due, sequence, frames)
        self._order = itertools.count()
        self._said: dict[str, tuple] = {}           # unit -> (t, stepping, its reply batch)

    def answer(self, sock, env: list, payload: list, busy) -> bool:
        """Answer the message ``env + payload`` on ``sock`` (now, or at the client's pace)
        if it is nothing but single Heartbeats of units served here; False (nothing done)
        otherwise. ``busy``: the names of the units stepping now."""
        n = len(payload)
        if n < 2 or n % 2:
            return False
        for i in range(1, n, 2):
            if payload[i] != BEAT:
                return False
        replies = []
        for i in range(0, n, 2):
            name = payload[i].decode("utf-8", "replace")
            unit = self.units.get(name)
            if unit is None:
                return False            # the ordinary way names what is served here
            replies.append(self.alive(env[0], name, unit, name in busy))
        self.pace(sock, env + replies)
        return True

    def alive(self, peer: bytes, name: str, unit, stepping: bool) -> bytes:
        """The reply batch to one Heartbeat of unit ``name`` from ``peer``."""
        t = getattr(unit, "t", None)
        self.owners.alive(peer, name, t, stepping)
        said = self._said.get(name)
        if said is None or said[0] != t or said[1] != stepping:
            if len(self._said) > 4 * len(self.units):
                self._said.clear()
            said = self._said[name] = (t, stepping, encode_batch([P.Alive(t, stepping)]))
        return said[2]

    def pace(self, sock, frames: list, interval: float | None = None) -> None:
        """Send the reply ``frames`` (its client's envelope first) on ``sock`` now, or once
        ``interval`` s (default :attr:`INTERVAL`) have passed since that client's last paced
        reply: a client asking faster waits (held back, sent by :meth:`flush`)."""
        now = time.monotonic()
        peer = frames[0]
        due = self._next.get(peer, 0.0)
        if due <= now or len(self._later) >= self.MAX_LATER:
            sock.send_multipart(frames)
            due = now
        else:
            heapq.heappush(self._later, (due, next(self._order), frames))
        if len(self._next) >= self.MAX_CLIENTS and peer not in self._next:
            self._next = {p: d for p, d in self._next.items() if d > now}
        self._next[peer] = due + (self.INTERVAL if interval is None else interval)

    def wait(self, longest: float) -> float:
        """Seconds until the next held-back reply is due, at most ``longest``."""
        if not self._later:
            return longest
        return min(longest, max(0.0, self._later[0][0] - time.monotonic()))

    def flush(self, sock) -> None:
        """Send the held-back replies that are due."""
        later = self._later
        if not later:
            return
        now = time.monotonic()
        while later and later[0][0] <= now:
            sock.send_multipart(heapq.heappop(later)[2])
