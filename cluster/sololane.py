"""The lane of a connection that carries one unit: its macro step exchanged in one call.

A unit alone on its server (a process per unit, or one unit in all) needs none of the
bookkeeping of a message to several units: :class:`SoloBatch` writes its ``Step`` batch, and
:meth:`Channel.exchange <cluster.channel.Channel.exchange>` sends the ``[unit, batch]``
pair and receives the one reply batch, read in place; sent and received apart (several
connections stepped at once) likewise without the loops over units. The same bytes, waits
and errors as :class:`~cluster.steplane.StepBatch`, which it is for everything else.
"""

from __future__ import annotations

from cluster.codec import CodecError
from cluster.steplane import StepBatch, StepLane
from cosim.errors import TransportError

__all__ = ["SoloBatch", "SoloLane"]


class SoloLane(StepLane):
    """A :class:`~cluster.steplane.StepLane` whose batch of one unit is a
    :class:`SoloBatch`."""

    def batch(self, units: list) -> StepBatch | None:
        if len(units) != 1:
            return super().batch(units)
        gone, timeout = self.watch or (lambda: None, 60.0)
        try:
            return SoloBatch(self.channel, units, gone, timeout)
        except CodecError:
            return None                 # a layout only the strict encoder can refuse


class SoloBatch(StepBatch):
    """The message of one macro step to one unit (see the module notes)."""

    def __init__(self, channel, units: list, gone, timeout: float):
        super().__init__(channel, units, gone, timeout)
        (self.key,), (self.writer,), (self.reader,) = self.keys, self.writers, self.readers

    def send(self, T: float, H: float, payloads: list, times: list | None = None) -> None:
        if times is not None:
            T, H = times[0]
        if not self.channel.post([self.key, self.writer.write(T, H, payloads[0])], self.first,
                                 self.gone, self.timeout, T):
            raise TransportError(self.first, "Step", f"{self.channel.address}: requests of "
                                 "the ordinary way are still pending", t=T)

    def receive(self, T: float) -> list:
        (data,) = self.channel.collect(1, self.first, self.gone, self.timeout, T)
        got = self.reader.read(data)
        return [got if got is not None else self._read([data], T)[0]]

    def exchange(self, T: float, H: float, payload) -> tuple:
        data = self.channel.exchange(self.key, self.writer.write(T, H, payload), self.first,
                                     self.gone, self.timeout, T)
        if data is None:
            raise TransportError(self.first, "Step", f"{self.channel.address}: requests of "
                                 "the ordinary way are still pending", t=T)
        got = self.reader.read(data)
        return got if got is not None else self._read([data], T)[0]
