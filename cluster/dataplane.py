"""The fast data plane: a unit's requests and replies over one ZeroMQ REQ/REP pair.

A plain Ray actor call costs about 1 ms here; a ZeroMQ round trip a few tenths of that. So a
Ray actor serves its unit on a ZeroMQ socket from a thread (:func:`serve`), and the master
talks to it directly (:class:`DataClient`), one batch per unit per macro step, all units'
batches in flight at once; Ray keeps placement, life cycle and failure detection. Payloads
are :func:`cluster.codec.encode_batch` bytes: never pickle.
"""

from __future__ import annotations

import socket
import threading

import zmq

from cluster.codec import CodecError, decode_batch, encode_batch
from cosim import protocol as P
from cosim.errors import TransportError

__all__ = ["DataClient", "serve"]


def _host() -> str:
    """An address other hosts can reach this one at (loopback on a single machine)."""
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def serve(unit, host: str | None = None) -> tuple[str, threading.Thread]:
    """Serve ``unit`` on a REP socket bound to a free port, from a daemon thread.

    Returns
    -------
    endpoint : str
        ``tcp://host:port`` to connect to.
    thread : threading.Thread
    """
    ctx = zmq.Context.instance()
    sock = ctx.socket(zmq.REP)
    sock.setsockopt(zmq.LINGER, 0)
    host = host or _host()
    port = sock.bind_to_random_port(f"tcp://{host}")
    ready = threading.Event()

    def loop():
        ready.set()
        while True:
            data = sock.recv()
            try:
                replies = [unit.handle(r) for r in decode_batch(data)]
            except CodecError as err:
                replies = [P.ErrorReply(P.ErrorKind.CODEC, str(err))]
            sock.send(encode_batch(replies))

    thread = threading.Thread(target=loop, name=f"cosim-unit-{unit.name}", daemon=True)
    thread.start()
    ready.wait()
    return f"tcp://{host}:{port}", thread


class DataClient:
    """The master's end of one unit's data plane (a REQ socket).

    Parameters
    ----------
    name : str
        Unit name (for error messages).
    endpoint : str
        The unit's ``tcp://host:port``.
    timeout : float
        Seconds to wait for a batch's replies.
    """

    def __init__(self, name: str, endpoint: str, timeout: float):
        self.name = name
        self.timeout_ms = int(timeout * 1000)
        self._ctx = zmq.Context.instance()
        self._connect(endpoint)

    def _connect(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self._sock = self._ctx.socket(zmq.REQ)
        self._sock.setsockopt(zmq.LINGER, 0)
        # A receive timeout rather than poll-then-recv: one call per reply, not two.
        self._sock.RCVTIMEO = self.timeout_ms
        self._sock.connect(endpoint)

    def reconnect(self, endpoint: str) -> None:
        """Talk to a recreated unit (a REQ socket is unusable after a lost reply)."""
        self._sock.close(linger=0)
        self._connect(endpoint)

    def submit(self, requests):
        try:
            self._sock.send(encode_batch(requests))
        except zmq.ZMQError as err:
            last = requests[-1]
            raise TransportError(self.name, type(last).__name__, f"cannot send to "
                                 f"{self.endpoint}: {err}", t=getattr(last, "t", None)) from err
        return requests

    def result(self, requests):
        try:
            data = self._sock.recv()
        except zmq.Again:
            last = requests[-1]
            raise TransportError(self.name, type(last).__name__,
                                 f"no reply from {self.endpoint} within "
                                 f"{self.timeout_ms / 1000:g} s", t=getattr(last, "t", None)) \
                from None
        replies = decode_batch(data)
        if len(replies) == 1 and len(requests) > 1:
            return replies * len(requests)          # a batch-level error answers all
        return replies

    def close(self) -> None:
        self._sock.close(linger=0)
