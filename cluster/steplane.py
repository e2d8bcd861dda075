"""The master's side of fused steps over a :class:`~cluster.channel.Channel`: a
:class:`~cosim.master.proxy.Lane` writing every unit's ``Step`` from a prepared header.

Per macro step and server: one message ``[unit, batch, unit, batch, ...]`` whose batches are
``encode_batch([Step(...)])`` bytes, written as ``head + t, h + tail + values`` (the
:class:`cluster.prepared.StepWriter` of the unit's layout, the times packed once for all
units), and one reply message whose plain ``Stepped`` batches are read in place
(:class:`cluster.prepared.SteppedReader`); anything else is decoded strictly. The wire
format is the ordinary path's, byte for byte.

:class:`StepStream` sends the same messages on a DEALER socket of its own (the channel's
:meth:`~cluster.channel.Channel.dealer`), so that the next macro step's message can wait
at the server while it serves the current one (the pipeline's, :mod:`cosim.master.pipeline`).
"""

from __future__ import annotations

import time

import zmq

from cluster import prepared
from cluster.codec import DEFAULT_LIMITS, CodecError, decode_batch
from cluster.frames import recv_frames, send_frames
from cosim.errors import TransportError
from cosim.master.proxy import Lane, LaneBatch

__all__ = ["StepBatch", "StepLane", "StepStream"]


class StepLane(Lane):
    """The lane of the units served over one channel.

    Parameters
    ----------
    channel : Channel
    """

    def __init__(self, channel):
        self.channel = channel
        self.watch = None           # (gone, timeout) of the channel's units, see watched
        self.streams: dict = {}     # unit names -> the latest StepStream stepping them

    def watched(self, gone, timeout: float) -> StepLane:
        """This lane, awaiting replies for ``timeout`` s and asking ``gone()`` why the peer
        cannot answer (as the units' proxies await theirs); the first proxy's are kept."""
        if self.watch is None:
            self.watch = (gone, timeout)
        return self

    def batch(self, units: list) -> StepBatch | None:
        gone, timeout = self.watch or (lambda: None, 60.0)
        try:
            return StepBatch(self.channel, units, gone, timeout)
        except CodecError:
            return None                 # a layout only the strict encoder can refuse

    def stream(self, units: list, depth: int) -> StepStream | None:
        """See :meth:`Lane.stream <cosim.master.proxy.Lane.stream>`; a stream made before for
        the same units (the last run's, when a study reuses the units' hosts) is closed."""
        gone, timeout = self.watch or (lambda: None, 60.0)
        try:
            stream = StepStream(self.channel, units, gone, timeout, depth)
        except CodecError:
            return None
        old = self.streams.pop(tuple(stream.names), None)
        if old is not None:
            old.close()
        self.streams[tuple(stream.names)] = stream
        return stream


class StepBatch(LaneBatch):
    """The message of one macro step to some units of a channel (see :class:`StepLane`)."""

    def __init__(self, channel, units: list, gone, timeout: float):
        limit = DEFAULT_LIMITS.max_elements
        if any(n_in > limit or n_out > limit for *_, n_in, n_out in units):
            raise CodecError("more values than a message may carry")
        self.channel = channel
        self.gone, self.timeout = gone, timeout
        self.names = [name for name, *_ in units]
        self.first = self.names[0]
        self.keys = [name.encode() for name in self.names]
        self.writers = [prepared.StepWriter(inputs, orders, mode, n_in)
                        for _, inputs, orders, mode, n_in, _ in units]
        self.readers = [prepared.SteppedReader(n_out) for *_, n_out in units]

    def send(self, T: float, H: float, payloads: list, times: list | None = None) -> None:
        frames = self._frames(T, H, payloads, times)
        if not self.channel.post(frames, self.first, self.gone, self.timeout, T):
            raise TransportError(self.first, "Step", f"{self.channel.address}: requests of "
                                 "the ordinary way are still pending", t=T)

    def receive(self, T: float) -> list:
        return self._read(self.channel.collect(len(self.keys), self.first, self.gone,
                                               self.timeout, T), T)

    def _frames(self, T: float, H: float, payloads: list, times: list | None = None) -> list:
        frames = []
        if times is not None:
            for key, w, values, (t, h) in zip(self.keys, self.writers, payloads, times):
                frames.append(key)
                frames.append(b"".join((w.head, prepared.pack_times(t, h), w.tail, values)))
            return frames
        packed = prepared.pack_times(T, H)
        for key, w, values in zip(self.keys, self.writers, payloads):
            frames.append(key)
            frames.append(b"".join((w.head, packed, w.tail, values)))
        return frames

    def _read(self, frames: list, T: float) -> list:
        out = []
        for name, reader, data in zip(self.names, self.readers, frames):
            got = reader.read(data)
            if got is None:
                replies = decode_batch(data)
                if len(replies) != 1:
                    raise TransportError(name, "Step", f"{len(replies)} replies to one Step",
                                         t=T)
                got = replies[0]
            out.append(got)
        return out


class StepStream(StepBatch):
    """:class:`StepBatch`'s messages on a DEALER socket of their own: up to ``depth`` sent
    before the first reply is received, answered in order (the server serves them one after
    the other). The ordinary requests of the channel must not be in flight meanwhile (the
    server takes messages of its two peers in either order): the caller receives every
    reply before it uses the channel again. A failure (no reply in time, the peer gone)
    drops the socket and the messages in flight; the next send opens another."""

    def __init__(self, channel, units: list, gone, timeout: float, depth: int):
        super().__init__(channel, units, gone, timeout)
        self.depth = depth
        self.sock = None
        self.pending = 0                # messages sent, replies not received yet

    def send(self, T: float, H: float, payloads: list, times: list | None = None) -> None:
        if self.sock is None or self.sock.closed:   # (closed by a channel reconnect)
            self.sock, self.pending = self.channel.dealer(), 0
        frames = [b"", *self._frames(T, H, payloads, times)]
        self._patiently(lambda: send_frames(self.sock, frames), T, "cannot send to {}: no "
                        "connection")
        self.pending += 1

    def receive(self, T: float) -> list:
        if self.sock is None or self.sock.closed or not self.pending:
            raise TransportError(self.first, "Step", "no Step of this unit is in flight", t=T)
        frames = self._patiently(lambda: recv_frames(self.sock), T, "no reply from {}")
        self.pending -= 1
        if not frames or frames[0]:
            self._drop()
            raise TransportError(self.first, "Step", f"{self.channel.address} answered "
                                 "without the envelope delimiter", t=T)
        frames = frames[1:]
        n = len(self.keys)
        if len(frames) == 1 and n > 1:
            frames = frames * n             # a message-level error answers all
        if len(frames) != n:
            self._drop()
            raise TransportError(self.first, "Step", f"{self.channel.address} answered "
                                 f"{len(frames)} batches to {n}", t=T)
        return self._read(frames, T)

    def _patiently(self, op, T: float, silence: str):
        """``op()``, tried again at every poll interval (the socket's timeout) until
        ``gone()`` gives why the peer cannot answer or the batch's timeout passed: then the
        socket is dropped and a TransportError names the reason."""
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                return op()
            except zmq.Again:
                why = self.gone()
                if why is None and time.monotonic() < deadline:
                    continue
            except zmq.ZMQError as err:
                why = f"{silence.format(self.channel.address)}: {err}"
            self._drop()
            why = why or f"{silence.format(self.channel.address)} within {self.timeout:g} s"
            raise TransportError(self.first, "Step", why, t=T) from None

    def close(self) -> None:
        """Close the socket (messages in flight are dropped); a later send opens another."""
        self._drop()

    def _drop(self) -> None:
        if self.sock is not None:
            self.sock.close(linger=0)
        self.sock, self.pending = None, 0
