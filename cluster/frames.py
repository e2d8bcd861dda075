"""Multipart ZeroMQ messages sent and received with less Python per frame than pyzmq's
``send_multipart`` / ``recv_multipart``.

pyzmq's multipart helpers are Python: every frame costs a flag computed as an ``enum.Flag``
(``SNDMORE | flags``) and, when receiving, a ``RCVMORE`` socket option looked up through an
``enum`` (about 1.5 µs a frame on this machine, more than the frame's own I/O). The fused
macro step sends 2 to 4 small frames per unit and message, so both sides of the data plane
use these instead: the same frames on the wire, the same exceptions (``zmq.Again`` on a
timeout, ``zmq.ZMQError``), only plain ``int`` flags and the socket's own (Cython) methods.
Whether more frames follow is read from the received frame itself (``Frame.more``, a field of
the message) rather than asked of the socket (``getsockopt(RCVMORE)``, ~0.5 µs more a frame).
"""

from __future__ import annotations

import zmq
import zmq.backend

__all__ = ["SNDMORE", "recv_frames", "send", "send_frames"]

#: ``send(sock, frame, flags)``: the socket's Cython method, not pyzmq's Python override.
send = _send = zmq.backend.Socket.send
#: The flag of a frame that more frames follow, as a plain int.
SNDMORE = _SNDMORE = int(zmq.SNDMORE)


def send_frames(sock: zmq.Socket, frames: list) -> None:
    """``sock.send_multipart(frames)`` (frames: bytes-like, copied)."""
    for f in frames[:-1]:
        _send(sock, f, _SNDMORE)
    _send(sock, frames[-1], 0)


def recv_frames(sock: zmq.Socket, flags: int = 0) -> list[bytes]:
    """``sock.recv_multipart(flags)``."""
    recv = sock.recv
    f = recv(flags, False)
    frames = [f.bytes]
    while f.more:
        f = recv(0, False)
        frames.append(f.bytes)
    return frames
