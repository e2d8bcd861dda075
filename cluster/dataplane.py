"""The data plane: unit requests and replies over ZeroMQ, one message per server per call.

Framing: a client's REQ socket sends pairs of frames, ``[unit name, batch, unit name, batch,
...]`` (one pair per unit of that server the call involves), where ``batch`` is
:func:`cluster.codec.encode_batch` bytes; the server's REP socket answers one frame per pair,
the batch of that unit's replies, in order. A malformed, oversized or misaddressed pair is
answered with an ErrorReply. Never pickle.

:func:`answer` is the server side (used by ``cosim serve`` and by Ray unit actors, which serve
their units from a thread with :func:`serve`: a plain Ray actor call costs about 1 ms here, a
ZeroMQ round trip a few tenths of that), with :class:`cluster.lane.FusedLane` its fast lane
for fused steps; :class:`Channel` is the master's side.
"""

from __future__ import annotations

import logging
import socket
import itertools
import threading
import time
from dataclasses import dataclass

import zmq

from cluster.codec import DEFAULT_MAX_SIZE, CodecError, decode_batch, encode_batch, quote
from cluster.frames import recv_frames, send_frames
from cluster.steplane import StepLane
from cosim.master import protocol as P
from cosim.errors import ModelError, TransportError

__all__ = ["Channel", "NoReplyYet", "RunKeys", "Work", "answer", "guarded",
           "monitor_endpoint", "parse", "reply", "serve", "watch"]

log = logging.getLogger("cosim.server")


#: Connection events a channel watches until its first reply (see connection_trouble).
_WATCHED = (zmq.EVENT_CONNECTED | zmq.EVENT_HANDSHAKE_FAILED_AUTH
            | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL)


#: Monitor endpoints are named by this counter, not by pyzmq's default (the socket's file
#: descriptor): a closed socket's descriptor is reused at once while its monitor's inproc
#: endpoint may still be registered, and the new monitor then never sees an event.
_monitor_ids = itertools.count()


def monitor_endpoint() -> str:
    """A fresh inproc endpoint for a socket monitor, unique in this process."""
    return f"inproc://cosim-monitor-{next(_monitor_ids)}"


def watch(sock, events: int):
    """A PAIR socket receiving ``sock``'s connection ``events`` (a socket monitor).

    Its pipe has no high-water mark: libzmq emits monitor events from the context's I/O
    thread, which blocks once a monitor's pipe is full — and then no socket of the process
    connects any more. A client refused by a server retries every 100 ms, two events each;
    a monitor nobody reads for a minute filled the default 1,000 and stalled every later
    connection of the process (CI failed that way, order-dependently).
    """
    addr = monitor_endpoint()
    sock.monitor(addr, events)
    pair = sock.context.socket(zmq.PAIR)
    pair.rcvhwm = 0
    pair.connect(addr)
    return pair


class NoReplyYet(TransportError):
    """A patient :class:`Channel` timed out; the request is still in flight."""


def answer(units: dict, frames: list, max_size: int = DEFAULT_MAX_SIZE) -> list[bytes]:
    """One reply batch per ``[unit, batch]`` pair of ``frames``, in order.

    No message can make it raise: whatever fails while decoding, serving or encoding becomes
    an ErrorReply (client data quoted only in part), so a server answers and serves on.

    Parameters
    ----------
    units : dict of str to Unit
    frames : list of bytes
    max_size : int
        Larger messages are refused with an ErrorReply.
    """
    return guarded(lambda: reply(parse(units, frames, max_size), max_size))


def guarded(work) -> list[bytes]:
    """``work()``, or one ErrorReply frame if it raises anything at all."""
    try:
        return work()
    except Exception as err:  # noqa: BLE001 - one message must never end the server
        log.warning("request failed: %s: %s", type(err).__name__, quote(str(err)))
        return [_error(P.ErrorKind.INTERNAL, f"{type(err).__name__}: {quote(str(err))}")]


def _error(kind, message: str) -> bytes:
    return encode_batch([P.ErrorReply(kind, message)])


@dataclass(frozen=True)
class Work:
    """The decoded requests of one unit in a message."""

    name: str
    unit: object
    requests: list


def parse(units: dict, frames: list, max_size: int) -> list:
    """Each ``[unit, batch]`` pair of ``frames`` decoded: a :class:`Work`, or the encoded
    ErrorReply (bytes) that answers a malformed, oversized or misaddressed pair."""
    if not frames or len(frames) % 2:
        return [_error(P.ErrorKind.PROTOCOL, f"expected pairs of frames [unit, batch, ...], "
                                             f"got {len(frames)} frames")]
    total = sum(len(f) for f in frames[1::2])
    if total > max_size:
        return [_error(P.ErrorKind.CODEC, f"message of {total} bytes exceeds the limit of "
                                          f"{max_size}")]
    return [_parse_unit(units, frames[i], frames[i + 1], max_size)
            for i in range(0, len(frames), 2)]


def _parse_unit(units: dict, name: bytes, payload: bytes, max_size: int):
    name = name.decode("utf-8", "replace")
    unit = units.get(name)
    if unit is None:
        return _error(P.ErrorKind.PROTOCOL, f"no unit {quote(name)} here; this server has "
                                            f"{', '.join(units)}")
    try:
        requests = decode_batch(payload, max_size=max_size)
    except CodecError as err:
        log.warning("malformed request for %s: %s", name, err)
        return _error(P.ErrorKind.CODEC, str(err))
    return Work(name, unit, requests)


def reply(items: list, max_size: int) -> list[bytes]:
    """Serve the parsed ``items`` (see :func:`parse`): one reply batch each, in order."""
    return [item if isinstance(item, bytes) else _serve(item, max_size) for item in items]


def _serve(work: Work, max_size: int) -> bytes:
    name, requests = work.name, work.requests
    for r in requests:
        if type(r) is P.Hello:                          # who came: in the server's log
            log.info("hello from a master (session %s, protocol v%s) for unit %s",
                     quote(r.session), r.protocol_version, name)
        elif type(r) is P.Terminate:
            log.info("unit %s terminated by its master", name)
    replies = [work.unit.handle(r) for r in requests]
    try:
        return encode_batch(replies, max_size=max_size)
    except (CodecError, ModelError) as err:           # e.g. a reply over the size limit
        return _error(P.ErrorKind.CODEC, f"the reply to {len(requests)} request(s) of unit "
                                         f"{name!r} cannot be sent: {quote(str(err))}")



def _host() -> str:
    """An address other hosts can reach this one at (loopback on a single machine)."""
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


@dataclass(frozen=True)
class RunKeys:
    """CURVE keys made for one run (Z85 bytes): the data-plane servers' key pair and the
    master's. They travel to the servers inside the run (e.g. through Ray's control plane)
    and are never written to disk; a client without the master's key pair is refused."""

    server_public: bytes
    server_secret: bytes
    client_public: bytes
    client_secret: bytes

    @classmethod
    def new(cls) -> RunKeys:
        return cls(*zmq.curve_keypair(), *zmq.curve_keypair())


class _AllowedKeys:
    """ZAP credentials: the client public keys this process's servers accept."""

    def __init__(self):
        self.keys: set[bytes] = set()

    def callback(self, domain: str, key: bytes) -> bool:
        return key in self.keys


_ZAP: tuple | None = None           # (authenticator, allowed keys): one per process context


def _allow(ctx: zmq.Context, client_public: bytes) -> None:
    """Let ``client_public`` in to this process's CURVE servers (a ZAP handler, started once)."""
    global _ZAP
    if _ZAP is None:
        from zmq.auth.thread import ThreadAuthenticator
        allowed = _AllowedKeys()
        auth = ThreadAuthenticator(ctx)
        auth.start()
        auth.configure_curve_callback(domain="*", credentials_provider=allowed)
        _ZAP = (auth, allowed)
    _ZAP[1].keys.add(client_public)             # ZAP hands the callback Z85 keys too


def serve(units: dict, host: str | None = None,
          keys: RunKeys | None = None) -> tuple[str, threading.Thread]:
    """Serve ``units`` (name -> Unit) on a REP socket bound to a free port, from a thread.

    Parameters
    ----------
    units : dict of str to Unit
    host : str, optional
        Interface to bind (default: this host's address).
    keys : RunKeys, optional
        Encrypt with CURVE and accept only the master's key; None serves plain.

    Returns
    -------
    endpoint : str
        ``tcp://host:port`` to connect to.
    thread : threading.Thread
        A daemon thread.
    """
    ctx = zmq.Context.instance()
    sock = ctx.socket(zmq.REP)
    sock.setsockopt(zmq.LINGER, 0)
    if keys is not None:
        _allow(ctx, keys.client_public)
        sock.curve_secretkey = keys.server_secret
        sock.curve_publickey = keys.server_public
        sock.curve_server = True
    host = host or _host()
    port = sock.bind_to_random_port(f"tcp://{host}")

    from cluster.lane import FusedLane
    lane = FusedLane(units, DEFAULT_MAX_SIZE)

    def loop():
        while True:
            frames = recv_frames(sock)
            fast = lane.replies(frames, 0)
            send_frames(sock, fast if fast is not None else answer(units, frames))

    thread = threading.Thread(target=loop, name=f"cosim-units-{','.join(units)}", daemon=True)
    thread.start()
    return f"tcp://{host}:{port}", thread


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

    def dealer(self) -> zmq.Socket:
        """A DEALER socket of its own to this channel's server, with the channel's keys and
        timeouts: several messages (each ``[b"", unit, batch, ...]``) may be in flight on
        it, answered in order. The channel closes it when it reconnects or closes (its
        owner then sees ``closed`` and asks for another)."""
        sock = self._socket(zmq.DEALER)
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
            The reason and a remedy, or None (no trouble seen yet).
        """
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

    def set_timeout(self, timeout: float) -> None:
        self.timeout = timeout
        self._sock.RCVTIMEO = self._sock.SNDTIMEO = int(timeout * 1000)

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
                                     why or f"no reply from {self.address} within "
                                            f"{timeout:g} s",
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
            replies = decode_batch(data)
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
                why = why or f"{silence.format(address=self.address)} within {timeout:g} s"
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
