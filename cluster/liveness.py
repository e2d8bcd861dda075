"""A master's watch over a unit server it does not run: frozen or gone, told from slow.

A unit another team serves (``cosim serve``, reached by address) may take minutes for one
step, so the step timeout cannot be short; but a server that was stopped (SIGSTOP, a
debugger), died, or whose machine or network hangs must not make the run wait that long.
While the master waits for one of its replies, :class:`Pulse` sends the server a
:class:`~cosim.master.protocol.Heartbeat` every :attr:`Pulse.INTERVAL` s on a socket of its
own. The server's loop answers it beside the running step with
:class:`~cosim.master.protocol.Alive`: the unit's time so far, so the master knows how the
step progresses (a slow step advances; a stuck one is answered, its time still). The socket
also keeps ZeroMQ's own heartbeats (answered by the server's I/O thread even while its
Python code is busy), so a server busy in its loop is not taken for a stopped one.

The verdict, *frozen or gone*, needs both: no Alive for :attr:`Pulse.FROZEN` s, and the
connection lost (no ZeroMQ heartbeat answered for :attr:`Pulse.LINK_TIMEOUT` s, closed, or
not made again since).
"""

from __future__ import annotations

import collections
import time

import zmq

from cluster.beats import BEAT
from cluster.codec import CodecError, decode_batch
from cluster.dataplane import watch
from cosim.master import protocol as P

__all__ = ["Pulse", "Watch"]


class Pulse:
    """The liveness of one unit server, watched while a reply from it is awaited.

    Parameters
    ----------
    channel : Channel
        The master's channel to the server: the watch's socket is one of its dealers (its
        keys, and its identity, so the server counts it as the same master).
    """

    #: Seconds between heartbeats while a reply is awaited.
    INTERVAL = 0.25
    #: Seconds a ZeroMQ heartbeat may stay unanswered before the connection counts as lost.
    LINK_TIMEOUT = 1.0
    #: Seconds without an answer (the connection lost) after which the server is frozen or
    #: gone.
    FROZEN = 2.0
    #: A gap this long between two looks (:meth:`gone`) starts a new wait: silence counts
    #: from then, not from the last wait's answers.
    NEW_WAIT = 1.0

    def __init__(self, channel):
        self.channel = channel
        self.sock = None
        self.monitor = None
        self.heard = 0.0            # monotonic time of the latest answer (or wait's start)
        self.answered = 0.0         # of the latest answer
        self.sent = 0.0             # of the latest heartbeat
        self.looked = 0.0           # of the latest look
        self.lost = None            # since when the connection is lost, or None
        #: unit -> (t, stepping, since): its latest reported time, and since when it is so.
        self.progress: dict[str, tuple] = {}
        self._asked: collections.deque = collections.deque(maxlen=64)  # units, in order

    def watch(self, unit: str) -> Watch:
        """The watch of a wait for ``unit``'s replies (see :class:`Watch`)."""
        return Watch(self, unit)

    def _connect(self) -> None:
        if self.sock is not None and not self.sock.closed:
            return
        self._close()
        self.sock = self.channel.dealer(heartbeat=(self.INTERVAL, self.LINK_TIMEOUT))
        self.monitor = watch(self.sock, zmq.EVENT_DISCONNECTED | zmq.EVENT_HANDSHAKE_SUCCEEDED)
        # Not connected until its handshake succeeds (a stopped server accepts the
        # connection in its kernel, but never shakes hands); silence counts from here.
        self.lost = self.heard = time.monotonic()
        self._asked.clear()

    def gone(self, unit: str) -> str | None:
        """Why the server cannot answer (frozen or gone, with what is known of ``unit``'s
        step), or None; a heartbeat is sent when one is due. Called at every poll of a
        wait for a reply."""
        now = time.monotonic()
        self._connect()
        if now - self.looked > self.NEW_WAIT:
            self.heard = now                # a new wait: silence counts from here
            self.sent = 0.0
        self.looked = now
        self._read(now)
        if now - self.sent >= self.INTERVAL:
            try:
                self.sock.send_multipart([b"", unit.encode(), BEAT], zmq.NOBLOCK)
                self._asked.append(unit)    # (answered in order)
            except zmq.ZMQError:
                pass                        # not connected: the silence tells
            self.sent = now
        silent = now - self.heard
        if silent < self.FROZEN or self.lost is None:
            return None
        return (f"the server at {self.channel.address} is frozen or gone: it answered no "
                f"heartbeat for {silent:.1f} s and its connection is lost (its process is "
                "stopped by SIGSTOP or a debugger, or died, or its machine or the network "
                f"to it hangs){self._reached(unit, now)}; resume it (kill -CONT) or start "
                "`cosim serve` there again: a run with checkpoint_every set recovers from "
                "its last checkpoint once the server answers (within its timeout)")

    def report(self, unit: str) -> str:
        """What the heartbeats tell of ``unit`` (for an error after a timeout), or ``""``."""
        now = time.monotonic()
        if self.sock is None or now - self.looked > self.NEW_WAIT:
            return ""                       # not watched lately
        if now - self.answered <= self.FROZEN:
            return (f"; the server still answers heartbeats{self._reached(unit, now)}: a "
                    "step that advances is only slow (raise timeout), one that does not is "
                    "stuck")
        if self.lost is None:
            return (f"; the server's connection holds (its process runs) but it answered no "
                    f"heartbeat for {now - self.heard:.1f} s: it is busy serving a request "
                    "(raise timeout if that is expected)")
        return ""

    def _reached(self, unit: str, now: float) -> str:
        got = self.progress.get(unit)
        if got is None or got[0] is None:
            return ""
        t, stepping, since = got
        doing = "its step had reached" if stepping else "it was at"
        return f" (unit {unit!r}: {doing} t={t:.9g}, unchanged for {now - since:.1f} s)"

    def _read(self, now: float) -> None:
        """Take the answers and connection events that came."""
        from zmq.utils.monitor import recv_monitor_message
        while self.monitor.poll(0):
            event = recv_monitor_message(self.monitor)["event"]
            if event == zmq.EVENT_DISCONNECTED:
                self.lost = self.lost or now
            elif event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                self.lost = None
        sock = self.sock
        while True:
            try:
                frames = sock.recv_multipart(zmq.NOBLOCK)
            except zmq.ZMQError:
                return
            self.heard = self.answered = now
            self.lost = None                # it answered: the connection holds
            unit = self._asked.popleft() if self._asked else None
            try:
                (alive,) = decode_batch(frames[-1])
            except (CodecError, ValueError):
                continue
            if type(alive) is P.Alive and unit is not None:
                old = self.progress.get(unit)
                if old is None or old[0] != alive.t or old[1] != alive.stepping:
                    self.progress[unit] = (alive.t, alive.stepping, now)

    def _close(self) -> None:
        if self.monitor is not None:
            if self.sock is not None and not self.sock.closed:
                self.sock.disable_monitor()
            self.monitor.close(linger=0)
            self.monitor = None

    def close(self) -> None:
        self._close()
        if self.sock is not None:
            self.sock.close(linger=0)


class Watch:
    """The ``gone`` of a wait for one unit's replies (see
    :meth:`cluster.channel.Channel.result_watched`): called at every poll, why the server is
    frozen or gone, or None; :meth:`report`: what a timeout's error adds."""

    __slots__ = ("pulse", "unit")

    def __init__(self, pulse: Pulse, unit: str):
        self.pulse, self.unit = pulse, unit

    def __call__(self) -> str | None:
        return self.pulse.gone(self.unit)

    def report(self) -> str:
        return self.pulse.report(self.unit)
