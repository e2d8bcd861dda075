"""The master's side of the data plane (:mod:`cluster.dataplane`): :class:`Channel`, one
REQ socket to a unit server shared by the proxies of the units it hosts — batching, patient
waits, connection diagnosis from the socket monitor, a lane's messages and DEALER sockets
of their own (the liveness watch's heartbeats, :mod:`cluster.liveness`)."""

from __future__ import annotations

import itertools
import os
import time

import zmq

from cluster.codec import CodecError, decode_batch, encode_batch
from cluster.dataplane import RunKeys, watch
from cluster.owners import CHANNEL_PREFIX
from cluster.frames import SNDMORE, recv_frames, send, send_frames
from cluster.steplane import StepLane
from cosim.errors import TransportError

__all__ = ["Channel", "NoReplyYet"]

#: Connection events a channel watches until its first reply (see connection_trouble).
_WATCHED = (zmq.EVENT_CONNECTED | zmq.EVENT_HANDSHAKE_FAILED_AUTH
            | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL)


class NoReplyYet(TransportError):
    """A patient :class:`Channel` timed out; the request is still in flight."""


class Channel:
    """One REQ socket to a unit server, shared by the proxies of the units it hosts.

    Requests submitted for several of its units before any result is asked for go out as one
    message, ``[unit, batch, unit, batch, ...]``, answered by one message of reply batches in
    the same order: one round trip per server per Jacobi step, however many units it hosts.
    The master calls :meth:`flush` once it has submitted a call's requests to every unit, so
    that all servers work at once; a result asked for before sends what is queued.

    Parameters
    ----------
    address : str
        ``tcp://host:port`` of the unit server.
    timeout : float
        Seconds a message may take.
    curve_server_public, curve_client_keys : str, optional
        The server's public key file and this client's key file (with its secret), for a
        CURVE server.
    keys : RunKeys, optional
        Or the keys themselves (a run's own, see :func:`serve`).
    patient : bool
        After ``timeout`` s without a reply raise :class:`NoReplyYet` and keep the request in
        flight (the caller checks something else, e.g. that a Ray actor lives, and asks for
        the result again); otherwise raise TransportError and start a fresh socket.
    """

    def __init__(self, address: str, timeout: float = 60.0, *,
                 curve_server_public: str | None = None,
                 curve_client_keys: str | None = None, keys: RunKeys | None = None,
                 patient: bool = False):
        self.address = address
        self.timeout = timeout
        self.patient = patient
        self._curve = (curve_server_public, curve_client_keys)
        self._keys = keys
        self._ctx = zmq.Context.instance()
        self._queued: list[tuple[str, list]] = []     # submitted, not sent yet
        self._in_flight: list[tuple[str, list]] = []  # sent, reply awaited
        self._replies: dict[str, list] = {}
        self._sock = None
        self._monitor = None        # connection events, watched until the first reply
        self._events: set[int] = set()
        self._answered = False
        self._lane = None           # a StepLane, made on first use
        self._dealers: list = []    # see dealer
        # Every socket of this channel is known to the server as one master (see
        # cluster.owners): ``cosim:<tag>:<n>``.
        self._tag = CHANNEL_PREFIX + os.urandom(8).hex().encode() + b":"
        self._sockets = itertools.count()
        self._connect()

    def _connect(self) -> None:
        self._sock = self._socket(zmq.REQ)
        if not self._answered:
            self._monitor = watch(self._sock, _WATCHED)
        self._sock.connect(self.address)

    def _socket(self, kind: int) -> zmq.Socket:
        """A socket of ``kind`` with this channel's keys and timeouts, not connected."""
        sock = self._ctx.socket(kind)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.ROUTING_ID, self._tag + b"%d" % next(self._sockets))
        # A receive timeout rather than poll-then-recv: one call per reply, not two. A send
        # timeout too: a REQ socket whose handshake failed has no pipe, and a send then
        # blocks until one exists, i.e. forever for a refused key.
        sock.RCVTIMEO = sock.SNDTIMEO = int(self.timeout * 1000)
        server_pub, client_keys = self._curve
        if self._keys is not None:
            k = self._keys
            sock.curve_serverkey = k.server_public
            sock.curve_publickey, sock.curve_secretkey = k.client_public, k.client_secret
        elif server_pub:
            from zmq import auth
            sock.curve_serverkey = auth.load_certificate(server_pub)[0]
            pub, sec = auth.load_certificate(client_keys)
            sock.curve_publickey, sock.curve_secretkey = pub, sec
        return sock

    def dealer(self, heartbeat: tuple[float, float] | None = None) -> zmq.Socket:
        """A DEALER socket of its own to this channel's server, with the channel's keys and
        timeouts: several messages (each ``[b"", unit, batch, ...]``) may be in flight on
        it, answered in order. The channel closes it when it reconnects or closes (its
        owner then sees ``closed`` and asks for another). ``heartbeat``: ``(interval,
        timeout)`` s of ZeroMQ's own heartbeats on it (a connection whose PING is not
        answered within ``timeout`` is dropped, and made again)."""
        sock = self._socket(zmq.DEALER)
        if heartbeat is not None:
            interval, timeout = heartbeat
            sock.setsockopt(zmq.HEARTBEAT_IVL, int(interval * 1000))
            sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, int(timeout * 1000))
            sock.setsockopt(zmq.HEARTBEAT_TTL, int(timeout * 1000))
        sock.connect(self.address)
        self._dealers = [d for d in self._dealers if not d.closed] + [sock]
        return sock

    def connection_trouble(self, final: bool) -> str | None:
        """Why this channel's server has not answered yet, from its socket's connection
        events (watched until the first reply): a failed handshake at once; with ``final``
        (the caller gives up) also nothing listening, or connected but silent.

        Returns
        -------
        str or None
            The reason and a remedy, or None (no trouble seen yet, or the server answered).
        """
        if self._answered:
            return None             # it answered: whatever failed, the connection did not
        self._drain()
        ev = self._events
        if zmq.EVENT_HANDSHAKE_FAILED_AUTH in ev:
            return (f"{self.address} refused this client's CURVE key: give a key pair whose "
                    "public key the server authorizes (its --authorized directory) as "
                    "curve_client_keys")
        if ev & {zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL, zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL}:
            if self._keys is None and not self._curve[0]:
                return (f"the server at {self.address} uses CURVE encryption and this client "
                        "does not: give its public key as curve_server_public and an "
                        "authorized key pair as curve_client_keys")
            return (f"the CURVE handshake with {self.address} failed: check that "
                    "curve_server_public is that server's public key (and that the server "
                    "uses CURVE at all)")
        if not final:
            return None
        if zmq.EVENT_CONNECTED not in ev:
            return (f"nothing is listening at {self.address}: is `cosim serve` running "
                    "there, on that port, and reachable from here?")
        return (f"{self.address} accepted the connection but did not answer in time: it is "
                "busy or slow")

    def _drain(self) -> None:
        """Note the connection events seen so far."""
        from zmq.utils.monitor import recv_monitor_message
        while self._monitor is not None and self._monitor.poll(0):
            self._events.add(recv_monitor_message(self._monitor)["event"])

    def _unwatch(self) -> None:
        """Stop watching this socket's connection events (those seen are kept)."""
        if self._monitor is not None:
            self._drain()
            self._sock.disable_monitor()
            self._monitor.close(linger=0)
            self._monitor = None

    def reconnect(self, address: str | None = None) -> None:
        """A fresh socket (a REQ socket that lost its reply cannot send again); the dealers
        are closed (their replies are lost too)."""
        self._unwatch()
        self._sock.close(linger=0)
        self._close_dealers()
        self._queued, self._in_flight, self._replies = [], [], {}
        if address is not None:
            self.address = address
        self._connect()

    def submit(self, unit: str, requests: list) -> None:
        self._queued.append((unit, requests))

    def flush(self) -> None:
        """Send what is queued (one message), unless a message is still awaiting its reply."""
        if self._queued and not self._in_flight:
            self._send()

    def result(self, unit: str, requests: list) -> list:
        """The replies to ``unit``'s submitted ``requests`` (sending what is queued first)."""
        while unit not in self._replies:
            if not self._in_flight:
                if not self._queued:
                    raise TransportError(unit, type(requests[-1]).__name__,
                                         "no request of this unit is pending")
                self._send()
            else:
                self._receive(unit, requests)
        return self._replies.pop(unit)

    def result_watched(self, unit: str, requests: list, gone, timeout: float) -> list:
        """:meth:`result` on a ``patient`` channel, waiting at most ``timeout`` s and asking
        ``gone()`` at every poll interval why the peer can no longer answer (its process or
        actor died: a reason) or None; a reason fails the call at once, not at the timeout.

        Raises
        ------
        TransportError
            Naming the unit, the request and the reason (or the timeout).
        """
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.result(unit, requests)
            except NoReplyYet:
                why = gone()
                if why is None and time.monotonic() < deadline:
                    continue
                self.reconnect()            # the reply is lost: a fresh socket for later
                last = requests[-1]
                raise TransportError(unit, type(last).__name__,
                                     why or _silence(f"no reply from {self.address}", gone,
                                                     timeout),
                                     t=getattr(last, "t", None)) from None

    def _send(self) -> None:
        frames = []
        for unit, requests in self._queued:
            frames += [unit.encode(), encode_batch(requests)]
        self._in_flight, self._queued = self._queued, []
        try:
            self._sock.send_multipart(frames)
        except zmq.Again:
            # Not connected (yet, or the handshake was refused): nothing went out.
            self._queued, self._in_flight = self._in_flight, []
            unit, requests = self._queued[0]
            if self.patient:
                raise NoReplyYet(unit, type(requests[-1]).__name__, "not sent yet") from None
            self.reconnect()
            raise TransportError(unit, type(requests[-1]).__name__,
                                 f"cannot send to {self.address}: no connection within "
                                 f"{self.timeout:g} s", t=getattr(requests[-1], "t", None)) \
                from None
        except zmq.ZMQError as err:
            unit, requests = self._in_flight[0]
            self.reconnect()
            raise TransportError(unit, type(requests[-1]).__name__,
                                 f"cannot send to {self.address}: {err}",
                                 t=getattr(requests[-1], "t", None)) from err

    def _receive(self, unit: str, requests: list) -> None:
        try:
            frames = self._sock.recv_multipart()
        except zmq.Again:
            if self.patient:
                raise NoReplyYet(unit, type(requests[-1]).__name__, "no reply yet") from None
            others = [u for u, _ in self._in_flight if u != unit]
            self.reconnect()
            also = f" (also awaited: {', '.join(others)})" if others else ""
            raise TransportError(unit, type(requests[-1]).__name__,
                                 f"no reply from {self.address} within {self.timeout:g} s"
                                 f"{also}", t=getattr(requests[-1], "t", None)) from None
        in_flight, self._in_flight = self._in_flight, []
        if not self._answered:
            self._answered = True           # the connection works: stop watching it
            self._unwatch()
        if len(frames) == 1 and len(in_flight) > 1:
            frames = frames * len(in_flight)        # a message-level error answers all
        if len(frames) != len(in_flight):
            self.reconnect()
            raise TransportError(unit, type(requests[-1]).__name__,
                                 f"{self.address} answered {len(frames)} batches to "
                                 f"{len(in_flight)}", t=getattr(requests[-1], "t", None))
        for (u, reqs), data in zip(in_flight, frames):
            try:
                replies = decode_batch(data)
            except CodecError as err:       # a reply that is not one: who sent it, and why
                raise TransportError(u, type(reqs[-1]).__name__, f"{self.address} sent a "
                                     f"malformed reply: {err}",
                                     t=getattr(reqs[-1], "t", None)) from None
            if len(replies) == 1 and len(reqs) > 1:
                replies = replies * len(reqs)       # a batch-level error answers all
            self._replies[u] = replies

    def lane(self):
        """This channel's :class:`cluster.steplane.StepLane` (one per channel)."""
        if self._lane is None:
            self._lane = StepLane(self)
        return self._lane

    def post(self, frames: list, unit: str, gone, timeout: float, t: float) -> bool:
        """Send one message of ready ``[unit, batch, ...]`` frames outside the request queue
        (a lane's); False (nothing sent) while requests of the ordinary way are pending.
        Waits for a connection as :meth:`result_watched` waits for a reply.

        Raises
        ------
        TransportError
            Naming ``unit`` (a Step at ``t``): no connection in time, or the peer is gone.
        """
        if self._queued or self._in_flight:
            return False
        try:
            try:
                send_frames(self._sock, frames)
            except zmq.Again:               # not connected yet: waited for
                self._patiently(lambda: send_frames(self._sock, frames), unit, gone, timeout,
                                t, "cannot send to {address}: no connection")
        except zmq.ZMQError as err:     # (not Again: that is waited on)
            self.reconnect()
            raise TransportError(unit, "Step", f"cannot send to {self.address}: {err}",
                                 t=t) from err
        return True

    def collect(self, n: int, unit: str, gone, timeout: float, t: float) -> list[bytes]:
        """The ``n`` reply batches to the message :meth:`post` sent, awaited as
        :meth:`result_watched` awaits replies (a message-level error answers all).

        Raises
        ------
        TransportError
            Naming ``unit`` (a Step at ``t``): no reply in time, the peer is gone, or not
            ``n`` batches; the channel is then reset.
        """
        try:
            frames = recv_frames(self._sock)
        except zmq.Again:                   # not in yet (the socket waits one poll interval)
            frames = self._patiently(lambda: recv_frames(self._sock), unit, gone, timeout, t,
                                     "no reply from {address}")
        return self._batches(frames, n, unit, t)

    def exchange(self, key: bytes, batch: bytes, unit: str, gone, timeout: float,
                 t: float) -> bytes | None:
        """:meth:`post` of the one pair ``[key, batch]``, then :meth:`collect` of its reply
        batch, in one call (a lane of one unit; the same frames, waits and errors); None
        (nothing sent) while requests of the ordinary way are pending."""
        sock = self._sock
        if not self._answered or self._queued or self._in_flight:
            if not self.post([key, batch], unit, gone, timeout, t):
                return None
            return self.collect(1, unit, gone, timeout, t)[0]
        try:
            send(sock, key, SNDMORE)        # (the batch goes where the key went)
            send(sock, batch, 0)
        except zmq.Again:                   # nothing went out: post waits for a connection
            self.post([key, batch], unit, gone, timeout, t)
            return self.collect(1, unit, gone, timeout, t)[0]
        except zmq.ZMQError as err:
            self.reconnect()
            raise TransportError(unit, "Step", f"cannot send to {self.address}: {err}",
                                 t=t) from err
        try:
            f = sock.recv(0, False)
        except zmq.Again:
            return self.collect(1, unit, gone, timeout, t)[0]
        if f.more:
            return self._batches([f.bytes, *recv_frames(sock)], 1, unit, t)[0]
        return f.bytes

    def _batches(self, frames: list, n: int, unit: str, t: float) -> list[bytes]:
        """The ``n`` reply batches ``frames`` are (see :meth:`collect`)."""
        if not self._answered:
            self._answered = True
            self._unwatch()
        if len(frames) == 1 and n > 1:
            frames = frames * n
        if len(frames) != n:
            self.reconnect()
            raise TransportError(unit, "Step", f"{self.address} answered {len(frames)} "
                                 f"batches to {n}", t=t)
        return frames

    def _patiently(self, op, unit: str, gone, timeout: float, t: float, silence: str):
        """``op()`` (a send or receive of the lane's, which just raised ``zmq.Again`` once:
        the first try is the caller's, off this path's cost), tried again at every poll
        interval while the socket is not ready, until ``gone()`` gives why the peer cannot
        answer or ``timeout`` s passed: then the channel is reset and a TransportError names
        ``unit`` (a Step at ``t``) and the reason (``silence``: what did not happen in time,
        a format of ``address``; formatted only then)."""
        deadline = time.monotonic() + timeout
        while True:
            why = gone()
            if why is not None or time.monotonic() >= deadline:
                self.reconnect()
                why = why or _silence(silence.format(address=self.address), gone, timeout)
                raise TransportError(unit, "Step", why, t=t) from None
            try:
                return op()
            except zmq.Again:
                continue

    def _close_dealers(self) -> None:
        for d in self._dealers:
            d.close(linger=0)
        self._dealers = []

    def close(self) -> None:
        self._unwatch()
        self._sock.close(linger=0)
        self._close_dealers()


def _silence(what: str, gone, timeout: float) -> str:
    """``what`` (did not come) ``within timeout s``, and what the watch ``gone`` knows of the
    peer meanwhile (its ``report()``, when it has one: :class:`cluster.liveness.Watch`)."""
    report = getattr(gone, "report", None)
    return f"{what} within {timeout:g} s{report() if report is not None else ''}"
