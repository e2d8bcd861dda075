"""Who may drive each unit of a unit server: one master at a time.

Several clients may talk to one ``cosim serve`` at once (a team's server is reachable by
everyone the network lets in). A unit is *owned* by the master that first drives it (a
``Hello``, or any request that changes it) until that master terminates it (``Terminate``),
its last connection closes (it crashed or left), or it goes silent: its unit has not
advanced and it has sent nothing for ``lease`` seconds (a master frozen, or a connection
that is not closed). Meanwhile another client's requests that would
change the unit are refused with an ErrorReply naming the owner, and its read-only requests
(:data:`READ_ONLY`) are answered. A master whose silent unit was taken over is refused on it
from then on, so that it never goes on with a state another master changed.

A master is known by the routing identity of its sockets: a master's
:class:`~cluster.channel.Channel` names each socket it opens ``cosim:<tag>:<n>`` (one random
tag per channel, a number per socket), so its request socket, its reconnections and the
DEALER socket of its liveness watch count as one master. Any other client (a plain REQ socket)
is one master per connection. Connections are known by their socket descriptors (a
message's ``SRCFD``, the socket monitor's disconnections).
"""

from __future__ import annotations

import logging
import socket
import time
from dataclasses import dataclass

from cluster.codec import quote
from cosim.master import protocol as P

__all__ = ["CHANNEL_PREFIX", "READ_ONLY", "Owners", "address_of", "master_of"]

log = logging.getLogger("cosim.server")

#: The prefix of the routing identity of a master's channel sockets (see the module notes).
CHANNEL_PREFIX = b"cosim:"

#: Requests any client may send to any unit: they change nothing the owner relies on.
READ_ONLY = frozenset({P.Describe, P.Heartbeat, P.GetOutputs, P.GetState})


def master_of(peer: bytes) -> bytes:
    """The master a connection (ROUTER routing identity ``peer``) belongs to."""
    if peer.startswith(CHANNEL_PREFIX):
        return peer.rpartition(b":")[0]
    return peer


@dataclass
class _Owner:
    master: bytes
    session: str
    since: float            # wall clock (s since the epoch)
    seen: float             # monotonic time of its latest sign of life
    mark: object            # the unit's time then (it advances while the master steps it)

    def __str__(self) -> str:
        when = time.strftime("%H:%M:%S", time.gmtime(self.since))
        who = f"session {self.session}" if self.session else "a client without a Hello"
        return f"another master ({who}, since {when} UTC)"


class Owners:
    """The owners of a server's units.

    Parameters
    ----------
    lease : float
        Seconds of silence after which another master may take a unit over.

    Attributes
    ----------
    lane : dict of bytes to set of bytes
        Per owned unit (its name as the wire names it), the routing identities of its
        owner's connections seen so far: the fast lane serves a fused step only from one of
        those, and hands any other to the server's ordinary way (which asks
        :meth:`refusal`).
    """

    #: Most (unit, master) pairs remembered as taken over (the oldest are forgotten).
    MAX_LOST = 4096

    def __init__(self, lease: float = 60.0):
        self.lease = lease
        self.units: dict[str, _Owner] = {}
        self.lane: dict[bytes, set[bytes]] = {}
        self.last: dict[str, tuple] = {}      # unit -> (its last master, seen then)
        self.connections: dict[bytes, set] = {}   # master -> its connections (socket fds)
        self.master_on: dict[int, bytes] = {}     # connection -> its master
        self.address: dict[int, str] = {}         # connection -> its peer's address
        self.lost: dict[tuple, None] = {}     # (unit, master) taken over, oldest first

    def refusal(self, peer: bytes, name: str, requests: list, t=None,
                busy: bool = False) -> str | None:
        """Why ``peer`` may not send ``requests`` to unit ``name`` now, or None.

        ``t`` is the unit's time now, ``busy`` whether it is stepping for its owner."""
        master = master_of(peer)
        if (name, master) in self.lost and not all(type(r) in READ_ONLY for r in requests):
            return (f"unit {name!r} was taken over by another master after this master sent "
                    f"nothing for {self.lease:g} s; its state is no longer this run's: start "
                    "the run again")
        owner = self.units.get(name)
        if owner is None:
            return None
        now = self._alive(owner, master, t, busy)
        if owner.master == master or all(type(r) in READ_ONLY for r in requests):
            return None
        if not busy and not self._connected(owner.master):
            # Its connections closed (the monitor may not have said so yet): it left.
            log.info("unit %s is free: the connections of its master (%s) are closed", name,
                     owner.session or "no Hello")
            for fd in list(self.connections.get(owner.master, ())):
                self.disconnected(fd)
            self._release(name)
            return None
        silent = now - owner.seen
        if silent > self.lease:
            log.warning("unit %s: its master (%s) sent nothing for %.0f s; another master "
                        "takes it over", name, owner.session or "no Hello", silent)
            self.lost[(name, owner.master)] = None
            if len(self.lost) > self.MAX_LOST:
                del self.lost[next(iter(self.lost))]
            self._release(name)
            return None
        return (f"unit {name!r} is busy: it is driven by {owner}; it is free again once "
                f"that master terminates it or disconnects, or after {self.lease:g} s "
                f"without a sign of life from it (now {silent:.0f} s); or serve another copy "
                "of the unit")

    def beside(self, peer: bytes, names) -> bool:
        """True if a unit of ``names`` is driven by a master other than ``peer``'s (whose
        read-only requests then read beside that master's run: paced by the server)."""
        master = master_of(peer)
        for name in names:
            owner = self.units.get(name)
            if owner is not None and owner.master != master:
                return True
        return False

    def may_free(self, peer: bytes, name: str) -> bool:
        """True if unit ``name`` is driven by a master other than ``peer``'s whose
        connections are known: it is freed when they are reported closed."""
        owner = self.units.get(name)
        return owner is not None and owner.master != master_of(peer) \
            and bool(self.connections.get(owner.master))

    def alive(self, peer: bytes, name: str, t=None, busy: bool = False) -> None:
        """``peer`` sent a read-only request (a heartbeat) to unit ``name`` (at time ``t``,
        ``busy`` stepping): a sign of life of the unit's owner if it is that owner's, or
        if the unit is stepping or has advanced since."""
        owner = self.units.get(name)
        if owner is not None:
            self._alive(owner, master_of(peer), t, busy)

    @staticmethod
    def _alive(owner: _Owner, master: bytes, t, busy: bool) -> float:
        now = time.monotonic()
        if owner.master == master or busy or t != owner.mark:
            owner.seen, owner.mark = now, t          # a sign of life of the owner
        return now

    def claim(self, peer: bytes, name: str, requests: list, t=None,
              fd: int | None = None) -> None:
        """``peer`` (on connection ``fd``) sends ``requests`` to unit ``name``
        (:meth:`refusal` said None): its master owns the unit from now if they change it,
        until a Terminate among them or the master's last connection closes."""
        if all(type(r) in READ_ONLY for r in requests):
            return
        master = master_of(peer)
        if fd is not None and fd >= 0 and self.master_on.get(fd) != master:
            self.disconnected(fd)                   # (a descriptor reused)
            self.master_on[fd] = master
            self.address[fd] = address_of(fd)
            self.connections.setdefault(master, set()).add(fd)
        owner = self.units.get(name)
        if owner is None:
            owner = self.units[name] = _Owner(master, "", time.time(), time.monotonic(), t)
        for r in requests:
            if type(r) is P.Hello:
                owner.session = quote(str(r.session))[:40]
        self.lane.setdefault(name.encode(), set()).add(peer)
        if type(requests[-1]) is P.Terminate:
            self._release(name)

    def disconnected(self, fd: int, reported: bool = False) -> None:
        """Connection ``fd`` closed: a master whose last connection it was owns nothing
        any more (a master that crashed or left frees its units at once).

        ``reported``: the socket monitor says so. It names the connection by its
        descriptor, some time after it closed: by then the number may be another
        connection's (a client left, and a master connected on the same number and claimed
        a unit before the report was read; under load, the fuzz's master lost its units
        that way). A report while the connection claimed on ``fd`` is still open (the same
        peer, no end of stream) is such a late one, and ignored.
        """
        if reported and fd in self.master_on and _open(fd, self.address.get(fd)):
            return
        master = self.master_on.pop(fd, None)
        self.address.pop(fd, None)
        if master is None:
            return
        fds = self.connections.get(master, set())
        fds.discard(fd)
        if fds:
            return
        self.connections.pop(master, None)
        for name in [n for n, o in self.units.items() if o.master == master]:
            log.info("unit %s is free: its master (%s) disconnected", name,
                     self.units[name].session or "no Hello")
            self._release(name)

    def _connected(self, master: bytes) -> bool:
        """True unless every known connection of ``master`` is closed (its descriptor
        closed, reused by another peer, or closed by the peer); True when none is known."""
        fds = self.connections.get(master)
        if not fds:
            return True
        return any(_open(fd, self.address.get(fd)) for fd in fds)

    def touch(self, names, times: dict) -> None:
        """The units ``names`` just finished a step for their owners (at ``times``)."""
        now = time.monotonic()
        for name in names:
            owner = self.units.get(name)
            if owner is not None:
                owner.seen, owner.mark = now, times.get(name)

    def reload_refusal(self, peer: bytes, names) -> str | None:
        """Why ``peer`` may not replace the units ``names`` (a Reload or SetParameters), or
        None: no other master owns one, and none was last driven by another master less
        than ``lease`` seconds ago (the master of a run reloads its servers between runs)."""
        master = master_of(peer)
        now = time.monotonic()
        for name in names:
            owner = self.units.get(name)
            if owner is not None and owner.master != master:
                return f"unit {name!r} is driven by {owner}; only its master may reload it"
            last, seen = self.last.get(name, (master, 0.0))
            if last != master and now - seen <= self.lease:
                return (f"unit {name!r} was driven by another master {now - seen:.0f} s "
                        f"ago; only that master may reload it (or anyone after "
                        f"{self.lease:g} s)")
        return None

    def _release(self, name: str) -> None:
        owner = self.units.pop(name, None)
        if owner is not None:
            self.last[name] = (owner.master, owner.seen)
        self.lane.pop(name.encode(), None)


def address_of(fd: int) -> str | None:
    """``host:port`` of the peer on socket ``fd`` (a duplicate is read), or None."""
    try:
        with socket.fromfd(fd, socket.AF_INET, socket.SOCK_STREAM) as s:
            return _text(s.getpeername())
    except OSError:
        return None


def _text(peer) -> str | None:
    # The descriptor may already be closed and reused by the time it is read (then the
    # address is of another family, or empty).
    return f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else None


def _open(fd: int, address) -> bool:
    """True if socket ``fd`` is still the connection to ``address`` and its peer has not
    closed it (a peek sees no end of stream)."""
    try:
        with socket.fromfd(fd, socket.AF_INET, socket.SOCK_STREAM) as s:
            if address is not None and _text(s.getpeername()) != address:
                return False
            try:
                return s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b""
            except BlockingIOError:
                return True
    except OSError:
        return False
