"""A unit server's fast lane: messages of fused steps answered from plain floats.

A message whose every ``[unit, batch]`` pair is one fused :class:`~cosim.master.protocol.Step`
in the layout that unit's previous Step had is read with one prepared form per unit
(:class:`cluster.prepared.StepForm`: a length, two prefixes and two ``struct`` reads), stepped
on the unit's generated path (``LocalUnit.step_packed``) and answered with a prepared
``Stepped`` (:class:`cluster.prepared.SteppedForm`): no message object, no numpy array and
no dictionary of layouts in between. A pair of several Steps (a unit of a coupling through a
held output: its step, then a refresh setting a part of its inputs) is read likewise
(:class:`cluster.prepared.StepsForm`) and its Steps taken in order. A pair in any other form
is learnt from (the strict decoder has remembered its layout) or the message goes the
ordinary way, untouched. Replies, errors included, are those of the ordinary way.
"""

from __future__ import annotations

import math
import time

import zmq

from cluster import prepared
import numpy as np

from cluster.codec import DEFAULT_LIMITS, encode, encode_batch
from cluster.dataplane import guarded, parse, reply
from cluster.frames import SNDMORE, send, send_frames
from cosim.master.protocol import Step
from cosim.master.units import error_reply

__all__ = ["FusedLane"]

_INF = math.inf
#: Layouts of several Steps a unit's slot remembers.
SEVERAL_MAX = 8


class _Slot:
    """One unit of the lane: the form of its latest batch (a StepForm, or a StepsForm of
    several Steps) and its Stepped writer."""

    __slots__ = ("name", "unit", "step", "form", "several", "out", "write")

    def __init__(self, name: str, unit, step_packed):
        self.name = name
        self.unit = unit
        self.step = step_packed
        self.form = None            # StepForm of the unit's latest Step
        # StepsForms learnt (an iterated unit's pairs alternate: kept, rolled back), newest
        # last, at most SEVERAL_MAX.
        self.several: list = []
        self.out = None             # SteppedForm of its latest reply
        self.write = None           # its write


class FusedLane:
    """The fast lane of one server's units.

    Parameters
    ----------
    units : dict of str to Unit
        The units served (those with ``step_packed`` take the lane).
    max_size : int
        Larger messages take the ordinary way (which refuses them).
    rates : dict of str to float, optional
        Seconds of work per simulated second of each unit, shared with the server: a step
        of a unit without a rate, or expected to take longer than ``offload_after``, is not
        served here (the server offloads it); every step served here updates it.
    offload_after : float
        Seconds (default: no limit).
    owners : dict of bytes to set of bytes, optional
        Per unit (its name as the wire names it), the routing identities allowed to step
        it here (:attr:`cluster.owners.Owners.lane`); :meth:`answer` hands a step from any
        other peer to the ordinary way, which decides. None: every peer.
    """

    def __init__(self, units: dict, max_size: int, rates: dict | None = None,
                 offload_after: float = math.inf, owners: dict | None = None):
        self.units = units
        self.max_size = max_size
        self.rates = rates
        self.offload_after = offload_after
        self.owners = owners
        #: The first frame of the latest message :meth:`answer` received (its metadata
        #: name the connection it came on).
        self.source = None
        self._slots: dict[bytes, _Slot] = {}

    def replies(self, frames: list, start: int) -> list[bytes] | None:
        """The reply batches to the ``[unit, batch]`` pairs ``frames[start:]``, or None:
        serve the message the ordinary way (nothing was done then).

        Raises nothing: a unit that fails answers its ErrorReply.
        """
        n = len(frames)
        rates = self.rates
        if n == start + 2:                  # a unit per process: no bookkeeping by name
            out = self.one(frames[start], frames[start + 1])
            if out is not None:
                return [out]
            got = self._read(frames[start], frames[start + 1])
            if got is None:
                return None
            slot, step = got
            t0 = time.perf_counter()
            out = [self._serve(slot, step, frames, start)]
            h = _span(step)
            if rates is not None and h > 0:         # (a Step of h <= 0 was refused)
                rates[slot.name] = (time.perf_counter() - t0) / h
            return out
        if n <= start or (n - start) % 2:
            return None
        work = []
        size = 0
        for i in range(start, n, 2):
            got = self._read(frames[i], frames[i + 1])
            if got is None:
                return None
            size += got[0].form.size
            work.append((got, i))
        if size > self.max_size:
            return None
        t0 = time.perf_counter()
        out = [self._serve(slot, step, frames, i) for (slot, step), i in work]
        if rates is not None:
            elapsed = time.perf_counter() - t0
            steps: dict[str, float] = {}
            for (slot, step), _ in work:
                steps[slot.name] = steps.get(slot.name, 0.0) + _span(step)
            for name, h in steps.items():
                if h > 0:
                    rates[name] = elapsed / h
        return out

    def one(self, key: bytes, batch: bytes) -> bytes | None:
        """The reply batch to the one pair ``[key, batch]`` when it is a Step of its unit's
        latest form that takes the lane (:meth:`replies` for it, without its lookups and
        learning), else None: nothing was done."""
        slot = self._slots.get(key)
        if slot is None or self.units.get(slot.name) is not slot.unit:
            return None
        form = slot.form
        if type(form) is _SEVERAL:
            steps = form.read(batch)
            if steps is None:
                steps = self._several_form(slot, batch)
                if steps is None:
                    return None
            h = _span(steps)
            rates = self.rates
            if rates is not None and rates.get(slot.name, _INF) * h > self.offload_after:
                return None
            t0 = time.perf_counter()
            out = self._several(slot, steps)
            if rates is not None and h > 0:
                rates[slot.name] = (time.perf_counter() - t0) / h
            return out
        args = form.arguments(batch)
        if args is None:
            return None
        h = args[1]
        rates = self.rates
        if rates is not None and rates.get(slot.name, _INF) * h > self.offload_after:
            return None
        t0 = time.perf_counter()
        try:
            done = slot.step(*args)
        except Exception as err:  # noqa: BLE001 - answered as Unit.handle answers it
            done = err
        if done is None:
            return None                     # not for the generated path (nothing done)
        try:
            out = slot.write(*done)         # a Stepped of the unit's outputs, as the last
        except Exception:  # noqa: BLE001 - anything else: _write answers it
            out = self._write(slot, done)
        if rates is not None and h > 0:
            rates[slot.name] = (time.perf_counter() - t0) / h
        return out

    def answer(self, sock) -> list | None:
        """Receive the next message on the ROUTER socket ``sock`` (``[peer, delimiter, unit,
        batch, ...]``) and answer it here when it takes the lane: None (answered, or nothing
        came within the socket's timeout), else its frames, for the ordinary way.

        The frames of a one-unit message are received one by one, without a list, and its
        reply sent behind the peer's envelope frame by frame.
        """
        recv = sock.recv
        try:
            first = recv(0, False)          # a ROUTER's peer identity: frames always follow
        except zmq.Again:
            return None
        self.source = first                 # (its connection: zmq.SRCFD, for the server)
        peer = first.bytes
        f = recv(0, False)
        if f.more and not f.bytes:          # a REQ peer's delimiter: the unit, its batch
            f = recv(0, False)
            if f.more:
                key = f.bytes
                f = recv(0, False)
                if not f.more:
                    batch = f.bytes
                    owners = self.owners
                    if owners is not None and peer not in owners.get(key, ()):
                        return [peer, b"", key, batch]
                    out = self.one(key, batch)
                    if out is None:
                        fast = self.replies([key, batch], 0)
                        if fast is None:
                            return [peer, b"", key, batch]
                        out = fast[0]
                    send(sock, peer, SNDMORE)
                    send(sock, b"", SNDMORE)
                    send(sock, out, 0)
                    return None
                frames = [peer, b"", key]
            else:
                frames = [peer, b""]
        else:
            frames = [peer]
        frames.append(f.bytes)
        while f.more:
            f = recv(0, False)
            frames.append(f.bytes)
        owners = self.owners
        if len(frames) >= 4 and not frames[1] and (owners is None or all(
                peer in owners.get(k, ()) for k in frames[2::2])):
            fast = self.replies(frames, 2)
            if fast is not None:
                send_frames(sock, frames[:2] + fast)
                return None
        return frames

    def _read(self, key: bytes, batch: bytes) -> tuple | None:
        """``(slot, (t, h, values))`` of one pair that takes the lane (a list of each Step's
        ``step_packed`` arguments for a pair of several), or None."""
        slot = self._slots.get(key)
        # A unit replaced in the served dict (a reload between runs) is learnt again. (A
        # slot is remembered with its form.)
        if slot is None or self.units.get(slot.name) is not slot.unit \
                or (step := slot.form.read(batch)) is None:
            slot = self._learn(key, batch)
            if slot is None:
                return None
            step = slot.form.read(batch)
        rates = self.rates
        if rates is not None and rates.get(slot.name, _INF) * _span(step) > self.offload_after:
            return None
        return slot, step

    def _learn(self, key: bytes, batch: bytes) -> _Slot | None:
        """The slot of unit ``key`` with the form of ``batch``, or None when that unit
        cannot take the lane or ``batch`` is not a fused Step in a remembered layout."""
        try:
            form = prepared.step_form(batch, DEFAULT_LIMITS.max_elements)
            if form is None:
                slot = self._slots.get(key)
                if slot is not None and self.units.get(slot.name) is slot.unit \
                        and self._several_form(slot, batch) is not None:
                    return slot
                form = prepared.steps_form(batch, DEFAULT_LIMITS.max_elements)
            if form is None or form.size > self.max_size:
                return None                 # (the ordinary way refuses an oversized one)
            slot = self._slots.get(key)
            if slot is None or self.units.get(slot.name) is not slot.unit:
                name = key.decode("utf-8", "replace")
                unit = self.units.get(name)
                step_packed = getattr(unit, "step_packed", None)
                if step_packed is None:
                    return None
                if len(self._slots) > 4 * len(self.units):
                    self._slots.clear()         # names that decode alike: keep it bounded
                slot = self._slots[key] = _Slot(name, unit, step_packed)
            slot.form = form
            if type(form) is _SEVERAL:
                if len(slot.several) >= SEVERAL_MAX:
                    del slot.several[0]
                slot.several.append(form)
            return slot
        except Exception:  # noqa: BLE001 - the ordinary way answers it (or its error)
            return None

    def _serve(self, slot: _Slot, got: tuple, frames: list, i: int) -> bytes:
        """One pair's reply batch."""
        if type(got) is list:
            return self._several(slot, got)
        t, h, values = got
        inputs, orders, mode = slot.form.fields
        try:
            done = slot.step(t, h, mode, inputs, orders, values)
        except Exception as err:  # noqa: BLE001 - answered as Unit.handle answers it
            done = err
        if done is None:                    # not for the generated path: the ordinary way
            return guarded(lambda: reply(parse(self.units, frames[i:i + 2], self.max_size),
                                         self.max_size))[0]
        return self._write(slot, done)

    @staticmethod
    def _several_form(slot: _Slot, batch: bytes) -> list | None:
        """``batch`` read with one of the StepsForms ``slot`` learnt (made its form), or
        None."""
        for form in reversed(slot.several):
            steps = form.read(batch)
            if steps is not None:
                slot.form = form
                return steps
        return None

    @staticmethod
    def _several(slot: _Slot, steps: list) -> bytes:
        """The reply batch to a pair of several Steps (``steps``: each one's ``step_packed``
        arguments), taken in order as the ordinary way serves a batch: each answered, a
        failure with its ErrorReply; from one the generated path does not take on, through
        ``Unit.handle``."""
        unit = slot.unit
        parts = []
        ordinary = False
        try:
            for args in steps:
                done = None
                if not ordinary:
                    try:
                        done = slot.step(*args)
                    except Exception as err:  # noqa: BLE001 - answered as Unit.handle does
                        done = error_reply(err, unit.t)
                    ordinary = done is None
                if done is None:
                    t, h, mode, inputs, orders, values = args
                    done = unit.handle(Step(inputs, orders, mode, t, h,
                                            np.array(values, dtype=np.float64)))
                parts.append(prepared.stepped_message(*done) if type(done) is tuple
                             else encode(done))
        except Exception as err:  # noqa: BLE001 - logged and answered by guarded
            return guarded(lambda err=err: _reraise(err))[0]
        return bytes([0x90 | len(parts)]) + b"".join(parts)

    @staticmethod
    def _write(slot: _Slot, done) -> bytes:
        """The reply batch to a step of ``slot``'s unit that gave ``done``: its
        ``(t_reached, event, next_event, outputs)``, or the exception it raised."""
        if isinstance(done, Exception):
            unit = slot.unit
            return guarded(lambda: [encode_batch([error_reply(done, unit.t)])])[0]
        out = slot.out
        if out is None or out.n != len(done[3]):
            out = slot.out = prepared.SteppedForm(len(done[3]))
            slot.write = out.write
        try:
            return out.write(*done)
        except Exception as err:  # noqa: BLE001 - logged and answered by guarded
            return guarded(lambda err=err: _reraise(err))[0]


def _span(step) -> float:
    """The time a pair's Steps take: ``h`` of ``(t, h, values)``, summed over a pair of
    several (a list of ``step_packed`` arguments)."""
    if type(step) is list:
        return sum(args[1] for args in step)
    return step[1]


_SEVERAL = prepared.StepsForm


def _reraise(err: Exception):
    raise err
