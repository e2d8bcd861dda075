"""The data plane: unit requests and replies over ZeroMQ, one message per server per call.

Framing: a client's REQ socket sends pairs of frames, ``[unit name, batch, unit name, batch,
...]`` (one pair per unit of that server the call involves), where ``batch`` is
:func:`cluster.codec.encode_batch` bytes; the server's REP socket answers one frame per pair,
the batch of that unit's replies, in order. A malformed, oversized or misaddressed pair is
answered with an ErrorReply. Never pickle.

:func:`answer` is the server side (used by ``cosim serve`` and by Ray unit actors, which serve
their units from a thread with :func:`serve`: a plain Ray actor call costs about 1 ms here, a
ZeroMQ round trip a few tenths of that), with :class:`cluster.lane.FusedLane` its fast lane
for fused steps; :class:`cluster.channel.Channel` is the master's side.
"""

from __future__ import annotations

import logging
import socket
import itertools
import threading
from dataclasses import dataclass

import zmq

from cluster.codec import DEFAULT_MAX_SIZE, CodecError, decode_batch, encode_batch, quote
from cluster.frames import recv_frames, send_frames
from cosim.master import protocol as P
from cosim.errors import ModelError

__all__ = ["RunKeys", "Work", "answer", "bind_port", "guarded", "monitor_endpoint", "parse",
           "reply", "serve", "watch"]

log = logging.getLogger("cosim.server")


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


def bind_port(sock, host: str, ports: tuple[int, int] | None) -> int:
    """Bind ``sock`` to a free port of ``host``, in ``ports = (low, high)`` when given.

    Raises
    ------
    ModelError
        No port of the range is free on this host (naming the range and the host).
    """
    if ports is None:
        return sock.bind_to_random_port(f"tcp://{host}")
    lo, hi = ports
    try:
        return sock.bind_to_random_port(f"tcp://{host}", min_port=lo, max_port=hi + 1,
                                        max_tries=4 * (hi - lo + 1))
    except zmq.ZMQBindError:
        raise ModelError(f"no free port in the range {lo}-{hi} on {host}: widen the range "
                         "(ports=(low, high), --ports LOW-HIGH)") from None


def serve(units: dict, host: str | None = None, keys: RunKeys | None = None,
          ports: tuple[int, int] | None = None) -> tuple[str, threading.Thread]:
    """Serve ``units`` (name -> Unit) on a REP socket bound to a free port, from a thread.

    Parameters
    ----------
    units : dict of str to Unit
    host : str, optional
        Interface to bind (default: this host's address).
    keys : RunKeys, optional
        Encrypt with CURVE and accept only the master's key; None serves plain.
    ports : (int, int), optional
        Bind a free port in ``[low, high]`` (a firewall's open range); default any.

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
    port = bind_port(sock, host, ports)

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
