"""The master's side of fused steps over a :class:`~cluster.channel.Channel`: a
:class:`~cosim.master.proxy.Lane` writing every unit's ``Step`` from a prepared header.

Per macro step and server: one message ``[unit, batch, unit, batch, ...]`` whose batches are
``encode_batch([Step(...)])`` bytes, written as ``head + t, h + tail + values`` (the
:class:`cluster.prepared.StepWriter` of the unit's layout, the times packed once for all
units), and one reply message whose plain ``Stepped`` batches are read in place
(:class:`cluster.prepared.SteppedReader`); anything else is decoded strictly. The wire
format is the ordinary path's, byte for byte.

A unit given several Steps in one round (a unit of a coupling through a held output: its step,
then a refresh setting a part of its inputs) has them in its one batch
(:class:`cluster.prepared.StepsWriter`), answered by as many ``Stepped``.

A unit alone on its server (a process per unit: the zmq backend's and Ray's placement) is a
batch of one: its step and reply go without the loops over units, and a round of that one
unit is one call (:meth:`StepBatch.exchange`, :meth:`Channel.exchange
<cluster.channel.Channel.exchange>`).
"""

from __future__ import annotations

from cluster import prepared
from cluster.codec import DEFAULT_LIMITS, CodecError, decode_batch
from cosim.errors import TransportError
from cosim.master.proxy import Lane, LaneBatch

__all__ = ["StepBatch", "StepLane"]


class StepLane(Lane):
    """The lane of the units served over one channel.

    Parameters
    ----------
    channel : Channel
    """

    def __init__(self, channel):
        self.channel = channel
        self.watch = None           # (gone, timeout) of the channel's units, see watched

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


class StepBatch(LaneBatch):
    """The message of one macro step to some units of a channel (see :class:`StepLane`)."""

    def __init__(self, channel, units: list, gone, timeout: float):
        limit = DEFAULT_LIMITS.max_elements
        if any(n_in > limit or n_out > limit for _, steps in units
               for *_, n_in, n_out in steps) or any(len(steps) > 15 for _, steps in units):
            raise CodecError("more values than a message may carry")
        self.channel = channel
        self.gone, self.timeout = gone, timeout
        self.names = [name for name, _ in units]
        self.first = self.names[0]
        self.keys = [name.encode() for name in self.names]
        self.writers = [prepared.StepWriter(*steps[0][:4]) if len(steps) == 1 else
                        prepared.StepsWriter([layout[:4] for layout in steps])
                        for _, steps in units]
        self.readers = [prepared.SteppedReader(steps[0][4]) if len(steps) == 1 else
                        prepared.SteppedsReader([layout[4] for layout in steps])
                        for _, steps in units]
        # A batch of one unit with one Step: its key, writer and reader (None otherwise).
        self.alone = (self.keys[0], self.writers[0], self.readers[0]) \
            if len(units) == 1 and len(units[0][1]) == 1 else None

    def send(self, T: float, H: float, payloads: list, times: list | None = None) -> None:
        alone = self.alone
        if alone is not None:
            if times is not None:
                T, H = times[0]
            frames = [alone[0], alone[1].write(T, H, payloads[0])]
        else:
            frames = self._frames(T, H, payloads, times)
        if not self.channel.post(frames, self.first, self.gone, self.timeout, T):
            raise self._pending(T)

    def receive(self, T: float) -> list:
        frames = self.channel.collect(len(self.keys), self.first, self.gone, self.timeout, T)
        alone = self.alone
        if alone is not None:
            got = alone[2].read(frames[0])
            if got is not None:
                return [got]
        return self._read(frames, T)

    def exchange(self, T: float, H: float, payload) -> tuple:
        alone = self.alone
        if alone is None:
            return super().exchange(T, H, payload)
        key, writer, reader = alone
        data = self.channel.exchange(key, writer.write(T, H, payload), self.first, self.gone,
                                     self.timeout, T)
        if data is None:
            raise self._pending(T)
        got = reader.read(data)
        return got if got is not None else self._read([data], T)[0]

    def _pending(self, T: float) -> TransportError:
        return TransportError(self.first, "Step", f"{self.channel.address}: requests of the "
                              "ordinary way are still pending", t=T)

    def _frames(self, T: float, H: float, payloads: list, times: list | None = None) -> list:
        frames = []
        if times is not None:
            for key, w, values, (t, h) in zip(self.keys, self.writers, payloads, times):
                frames.append(key)
                frames.append(b"".join((w.head, prepared.pack_times(t, h), w.tail, values))
                              if type(w) is _ONE else w.write(values))
            return frames
        packed = prepared.pack_times(T, H)
        for key, w, values in zip(self.keys, self.writers, payloads):
            frames.append(key)
            frames.append(b"".join((w.head, packed, w.tail, values)) if type(w) is _ONE
                          else w.write(values))
        return frames

    def _read(self, frames: list, T: float) -> list:
        out = []
        for name, reader, data in zip(self.names, self.readers, frames):
            got = reader.read(data)
            if got is None:
                replies = decode_batch(data)
                n = 1 if type(reader) is _ONE_REPLY else reader.steps
                if len(replies) == 1 and n > 1:
                    replies = replies * n       # a batch-level error answers all
                if len(replies) != n:
                    raise TransportError(name, "Step", f"{len(replies)} replies to {n} "
                                         "Steps", t=T)
                got = replies[0] if n == 1 else replies
            out.append(got)
        return out


_ONE = prepared.StepWriter
_ONE_REPLY = prepared.SteppedReader
