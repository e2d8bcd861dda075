"""Prepared wire forms of the fused macro step (:class:`~cosim.master.protocol.Step` and
:class:`~cosim.master.protocol.Stepped`), the one message a unit gets and sends per step.

A ``Step``'s layout (inputs, derivative orders, mode, the number of values) is the same
from step to step; only ``t``, ``h`` and the float payload change. Its bytes are therefore
the bytes :func:`cluster.codec.encode` gives, written from a header encoded once per layout
(by ``encode`` itself, so both ways agree by construction) and the payload copied in as it
is; a ``Stepped`` has no layout but its length. Decoding takes the same shortcut only for
bytes that are exactly such a message (a known header, then two float64, then one
little-endian float64 vector of the length its header states, nothing after it); anything
else goes to the strict decoder of :mod:`cluster.codec`. The wire format is unchanged: this
module only writes and reads it faster.

Layouts are remembered per thread, at most :data:`MAX_LAYOUTS` (then forgotten), so
hostile input cannot grow them without bound.
"""

from __future__ import annotations

import struct
import threading

import numpy as np

from cluster.codec import EXT_NDARRAY, CodecError, decode_batch, encode
from cosim.master import protocol as P

__all__ = ["MAX_LAYOUTS", "StepForm", "StepWriter", "SteppedForm", "SteppedReader",
           "StepsForm", "StepsWriter", "SteppedsReader", "decode_one", "encode_one", "learn",
           "pack_times", "step_form", "steps_form", "stepped_message"]

#: Most layouts remembered per thread and direction.
MAX_LAYOUTS = 256

_STEP_TAG = next(tag for tag, cls in P.MESSAGE_TYPES.items() if cls is P.Step)
_STEPPED_TAG = next(tag for tag, cls in P.MESSAGE_TYPES.items() if cls is P.Stepped)
#: msgpack: float 64 marker, bools.
_F64, _TRUE, _FALSE = 0xCB, 0xC3, 0xC2
_TH = struct.Struct(">BdBd")                   # t, h (each a float 64 marker + big-endian)
_STEPPED = struct.Struct(">BBBdBBd")           # [tag, t_reached, event, next_event, ...
_BATCH_STEPPED = struct.Struct(">BBBBdBBd")   # a batch of one Stepped: 0x91, then _STEPPED
_VECTOR = b"\x03<f8\x01"                       # ndarray payload head: dtype "<f8", 1 dim
_U64 = struct.Struct("<Q")

_local = threading.local()


def _vector_head(n: int) -> bytes:
    """msgpack ext header and ndarray header of a float64 vector of ``n`` values (the
    codec's ``EXT_NDARRAY`` layout)."""
    length = len(_VECTOR) + 8 + 8 * n
    if length < 256:
        ext = bytes([0xC7, length, EXT_NDARRAY])
    elif length < 2**16:
        ext = b"\xc8" + length.to_bytes(2, "big") + bytes([EXT_NDARRAY])
    else:
        ext = b"\xc9" + length.to_bytes(4, "big") + bytes([EXT_NDARRAY])
    return ext + _VECTOR + _U64.pack(n)


def _caches() -> tuple[dict, dict, dict]:
    """This thread's Step headers by layout, Step layouts by header length and header, and
    float structs by length."""
    try:
        return _local.caches
    except AttributeError:
        _local.caches = ({}, {}, {})
        return _local.caches


def _remember(cache: dict, key, value) -> None:
    if len(cache) >= MAX_LAYOUTS:
        cache.clear()
    cache[key] = value


def _step_header(msg: P.Step, n: int) -> bytes | None:
    """The bytes of ``msg``'s layout: a Step message up to its ``t`` (encoded by
    :func:`cluster.codec.encode` from a template), or None if it cannot be encoded."""
    template = P.Step(msg.inputs, msg.orders, msg.mode, 0.0, 0.0, np.zeros(n))
    try:
        whole = encode(template)
    except CodecError:
        return None                     # the strict path raises the error it names
    tail = _TH.size + len(_vector_head(n)) + 8 * n
    head = whole[:-tail]
    if whole != head + _TH.pack(_F64, 0.0, _F64, 0.0) + _vector_head(n) + bytes(8 * n):
        return None                     # not the layout assumed here: never shortcut
    return head


def _plain_vector(a) -> bool:
    return (type(a) is np.ndarray and a.dtype == np.float64 and a.ndim == 1
            and a.dtype.byteorder in "=<" and a.flags.c_contiguous)


def encode_one(msg) -> bytes | None:
    """``cluster.codec.encode(msg)`` for a Step or Stepped with a plain float64 vector and
    float times (the same bytes, faster); None for anything else."""
    kind = type(msg)
    if kind is P.Step:
        data = msg.data
        if not (_plain_vector(data) and type(msg.t) is float and type(msg.h) is float):
            return None
        n = data.shape[0]
        key = (msg.inputs, msg.orders, msg.mode, n)
        enc = _caches()[0]
        head = enc.get(key)
        if head is None:
            head = _step_header(msg, n)
            if head is None:
                return None
            _remember(enc, key, (head, _vector_head(n)))
            head = enc[key]
        return b"".join((head[0], _TH.pack(_F64, msg.t, _F64, msg.h), head[1], data.data))
    if kind is P.Stepped:
        out = msg.outputs
        if not (_plain_vector(out) and type(msg.t_reached) is float
                and type(msg.next_event) is float and type(msg.event) is bool):
            return None
        return b"".join((_STEPPED.pack(0x95, _STEPPED_TAG, _F64, msg.t_reached,
                                       _TRUE if msg.event else _FALSE, _F64, msg.next_event),
                         _vector_head(out.shape[0]), out.data))
    return None


def _vector(data: bytes, at: int, max_elements: int) -> tuple[int, int] | None:
    """``(offset, n)`` of the float64 vector ext at ``data[at:]`` if it ends the data
    exactly, else None."""
    end = len(data)
    if at + 3 > end:
        return None
    marker = data[at]
    if marker == 0xC7:
        length, at = data[at + 1], at + 2
    elif marker == 0xC8:
        length, at = int.from_bytes(data[at + 1:at + 3], "big"), at + 3
    elif marker == 0xC9:
        length, at = int.from_bytes(data[at + 1:at + 5], "big"), at + 5
    else:
        return None
    if at >= end or data[at] != EXT_NDARRAY or at + 1 + length != end:
        return None
    at += 1
    head = len(_VECTOR) + 8
    if length < head or data[at:at + len(_VECTOR)] != _VECTOR:
        return None
    n = _U64.unpack_from(data, at + len(_VECTOR))[0]
    if n > max_elements or length != head + 8 * n:
        return None
    return at + head, n


def _step(data: bytes, at: int, max_elements: int):
    """``(inputs, orders, mode, t, h, offset, n)`` of the Step that ``data[at:]`` is
    exactly, in a remembered layout, or None."""
    if len(data) < at + 2 or data[at] != 0x97 or data[at + 1] != _STEP_TAG:
        return None
    for length, layouts in _caches()[1].items():
        fields = layouts.get(data[at:at + length])
        if fields is None:
            continue
        i = at + length
        if len(data) < i + _TH.size:
            return None
        f1, t, f2, h = _TH.unpack_from(data, i)
        if f1 != _F64 or f2 != _F64:
            return None
        vec = _vector(data, i + _TH.size, max_elements)
        return None if vec is None else (*fields, t, h, *vec)
    return None


def decode_one(data: bytes, at: int, max_elements: int):
    """The Step or Stepped that ``data[at:]`` is exactly (read-only arrays, as
    :func:`cluster.codec.decode` gives), or None: then decode strictly."""
    if type(data) is not bytes or len(data) < at + 2:
        return None
    if data[at] == 0x95 and data[at + 1] == _STEPPED_TAG:
        if len(data) < at + _STEPPED.size:
            return None
        _, _, f1, t, event, f2, nxt = _STEPPED.unpack_from(data, at)
        if f1 != _F64 or f2 != _F64 or event not in (_TRUE, _FALSE):
            return None
        vec = _vector(data, at + _STEPPED.size, max_elements)
        if vec is None:
            return None
        return P.Stepped(t, event == _TRUE, nxt, np.frombuffer(data, np.float64, vec[1], vec[0]))
    step = _step(data, at, max_elements)
    if step is None:
        return None
    *fields, offset, n = step
    return P.Step(*fields, np.frombuffer(data, np.float64, n, offset))


def _floats(n: int) -> struct.Struct:
    cache = _caches()[2]
    s = cache.get(n)
    if s is None:
        s = struct.Struct(f"<{n}d")
        _remember(cache, n, s)
    return s


class StepForm:
    """One layout of a batch of one Step (``encode_batch([Step(...)])``), read without
    looking anything up: a server's fast lane keeps the form of each unit's latest Step.

    Attributes
    ----------
    fields : (tuple of str, tuple of int, int)
        The layout's ``inputs``, ``orders`` and ``mode``.
    n : int
        Values per Step.
    size : int
        Bytes of every batch of this form.
    """

    __slots__ = ("head", "fields", "n", "size", "_start", "_fixed", "_fat", "_floats")

    def __init__(self, head: bytes, fields: tuple, n: int):
        self.head = head                       # the batch up to t
        self.fields = fields
        self.n = n
        vhead = _vector_head(n)
        # The header, t, h and the vector's header in one read, then one comparison (the
        # header, both float 64 markers and the vector's header at once).
        self._start = struct.Struct(f">{len(head)}sBdBd{len(vhead)}s")
        self._fixed = (head, _F64, _F64, vhead)
        self._fat = self._start.size
        self._floats = struct.Struct(f"<{n}d")
        self.size = self._fat + 8 * n

    def read(self, data: bytes) -> tuple | None:
        """``(t, h, values)`` (values: a tuple of floats) if ``data`` is exactly a batch of
        one Step of this form, else None."""
        got = self.arguments(data)
        return None if got is None else (got[0], got[1], got[5])

    def arguments(self, data: bytes) -> tuple | None:
        """What :meth:`read` reads, as the arguments of ``LocalUnit.step_packed``: ``(t, h,
        mode, inputs, orders, values)``; or None."""
        if len(data) != self.size:
            return None
        head, f1, t, f2, h, vhead = self._start.unpack_from(data)
        if (head, f1, f2, vhead) != self._fixed:
            return None
        inputs, orders, mode = self.fields
        return t, h, mode, inputs, orders, self._floats.unpack_from(data, self._fat)


class StepsForm:
    """One layout of a batch of several Steps (``encode_batch([Step(...), Step(...), ...])``:
    a unit's step and then a refresh of a part of its inputs, say), read as
    :class:`StepForm` reads a batch of one.

    Parameters
    ----------
    parts : list of (bytes, tuple, int)
        Per Step, in order: its message up to ``t`` (:func:`_step_header`), its
        ``(inputs, orders, mode)`` and its number of values.

    Attributes
    ----------
    size : int
        Bytes of every batch of this form.
    """

    __slots__ = ("parts", "size", "_count")

    def __init__(self, parts: list):
        self._count = 0x90 | len(parts)       # (msgpack fixarray: at most 15 Steps)
        self.parts = []
        at = 1
        for head, fields, n in parts:
            vhead = _vector_head(n)
            start = struct.Struct(f">{len(head)}sBdBd{len(vhead)}s")
            self.parts.append((at, start, (head, _F64, _F64, vhead), fields,
                               at + start.size, struct.Struct(f"<{n}d")))
            at += start.size + 8 * n
        self.size = at

    def read(self, data: bytes) -> list | None:
        """Per Step, the arguments of ``LocalUnit.step_packed`` (as
        :meth:`StepForm.arguments`), if ``data`` is exactly a batch of this form; else
        None."""
        if len(data) != self.size or data[0] != self._count:
            return None
        out = []
        for at, start, fixed, (inputs, orders, mode), values_at, floats in self.parts:
            head, f1, t, f2, h, vhead = start.unpack_from(data, at)
            if (head, f1, f2, vhead) != fixed:
                return None
            out.append((t, h, mode, inputs, orders, floats.unpack_from(data, values_at)))
        return out


def steps_form(data: bytes, max_elements: int) -> StepsForm | None:
    """The :class:`StepsForm` of ``data`` if it is a batch of 2 to 15 Steps, each with a
    float64 vector and float times (decoded strictly once, to learn the layout), else
    None."""
    if type(data) is not bytes or not data or not 0x92 <= data[0] <= 0x9F:
        return None
    try:
        msgs = decode_batch(data)
    except CodecError:
        return None
    parts = []
    for m in msgs:
        if not (type(m) is P.Step and _plain_vector(m.data) and type(m.t) is float
                and type(m.h) is float and m.data.shape[0] <= max_elements):
            return None
        n = m.data.shape[0]
        head = _step_header(m, n)
        if head is None:
            return None
        parts.append((head, (m.inputs, m.orders, m.mode), n))
    form = StepsForm(parts)
    return form if form.read(data) is not None else None


def stepped_message(t_reached: float, event: bool, next_event: float, outputs) -> bytes:
    """``encode(Stepped(...))`` of plain values (``outputs``: floats): one message of a
    batch."""
    n = len(outputs)
    return b"".join((_STEPPED.pack(0x95, _STEPPED_TAG, _F64, t_reached,
                                   _TRUE if event else _FALSE, _F64, next_event),
                     _vector_head(n), _floats(n).pack(*outputs)))


def step_form(data: bytes, max_elements: int) -> StepForm | None:
    """The :class:`StepForm` of ``data`` if it is a batch of one Step in a remembered layout
    (learnt by the strict decoder, :func:`learn`), else None."""
    if type(data) is not bytes or data[:1] != b"\x91":
        return None
    step = _step(data, 1, max_elements)
    if step is None:
        return None
    inputs, orders, mode, _, _, offset, n = step
    end = offset - len(_vector_head(n)) - _TH.size
    return StepForm(data[:end], (inputs, orders, mode), n)


class SteppedForm:
    """Writes batches of one Stepped of ``n`` outputs (``encode_batch([Stepped(...)])``, its
    layout prepared once)."""

    __slots__ = ("n", "_head", "_floats")

    _START = _BATCH_STEPPED

    def __init__(self, n: int):
        self.n = n
        self._head = _vector_head(n)
        self._floats = struct.Struct(f"<{n}d")

    def write(self, t_reached: float, event: bool, next_event: float, outputs) -> bytes:
        """``encode_batch([Stepped(t_reached, event, next_event, outputs)])``;
        ``outputs``: ``n`` floats."""
        return b"".join((self._START.pack(0x91, 0x95, _STEPPED_TAG, _F64, t_reached,
                                          _TRUE if event else _FALSE, _F64, next_event),
                         self._head, self._floats.pack(*outputs)))


def learn(data: bytes, at: int, msg) -> None:
    """Remember the layout of the strictly decoded Step ``msg`` (the bytes ``data[at:]``)
    so that the next one of that layout decodes through :func:`decode_one`."""
    if type(msg) is not P.Step or not _plain_vector(msg.data) or type(data) is not bytes:
        return
    head = _step_header(msg, msg.data.shape[0])
    if head is None or data[at:at + len(head)] != head:
        return
    by_length = _caches()[1]
    layouts = by_length.get(len(head))
    if layouts is None:
        if len(by_length) >= 16:
            by_length.clear()
        layouts = by_length[len(head)] = {}
    _remember(layouts, head, (msg.inputs, msg.orders, msg.mode))


def pack_times(t: float, h: float) -> bytes:
    """The bytes of a Step's ``t`` and ``h`` (between a :class:`StepWriter`'s ``head`` and
    ``tail``)."""
    return _TH.pack(_F64, t, _F64, h)


class StepWriter:
    """Batches of one Step of a fixed layout: ``head + pack_times(t, h) + tail + values``
    (``values``: the ``n`` float64 of ``Step.data``, little-endian) are the bytes of
    ``encode_batch([Step(inputs, orders, mode, t, h, values)])``.

    Raises
    ------
    CodecError
        The layout cannot be encoded (the strict encoder refuses it).
    """

    __slots__ = ("head", "tail", "n")

    def __init__(self, inputs: tuple, orders: tuple, mode: int, n: int):
        head = _step_header(P.Step(inputs, orders, mode, 0.0, 0.0, np.zeros(n)), n)
        if head is None:
            raise CodecError(f"a Step of inputs {inputs!r} cannot be encoded")
        self.head = b"\x91" + head
        self.tail = _vector_head(n)
        self.n = n

    def write(self, t: float, h: float, values) -> bytes:
        """The batch of the Step over ``[t, t+h]`` carrying ``values``."""
        return b"".join((self.head, _TH.pack(_F64, t, _F64, h), self.tail, values))


class StepsWriter:
    """Batches of several Steps of fixed layouts (a unit's step and then a refresh of a part
    of its inputs, say): the bytes of ``encode_batch([Step(...), ...])``, written as
    :class:`StepWriter` writes a batch of one.

    Parameters
    ----------
    layouts : sequence of (tuple, tuple, int, int)
        Per Step, in order: its ``inputs``, ``orders``, ``mode`` and number of values.

    Raises
    ------
    CodecError
        A layout cannot be encoded.
    """

    __slots__ = ("parts", "count")

    def __init__(self, layouts):
        self.count = bytes([0x90 | len(layouts)])  # (msgpack fixarray: at most 15 Steps)
        self.parts = []
        for inputs, orders, mode, n in layouts:
            w = StepWriter(inputs, orders, mode, n)
            self.parts.append((w.head[1:], w.tail))

    def write(self, steps) -> bytes:
        """The batch of the Steps ``steps``: per Step ``(t, h, values)``."""
        out = [self.count]
        for (head, tail), (t, h, values) in zip(self.parts, steps):
            out += (head, _TH.pack(_F64, t, _F64, h), tail, values)
        return b"".join(out)


class SteppedsReader:
    """Reads batches of several Stepped (the replies to a :class:`StepsWriter` batch) of
    ``ns`` outputs each, as :class:`SteppedReader` reads a batch of one.

    Attributes
    ----------
    steps : int
        Stepped per batch.
    """

    __slots__ = ("size", "steps", "_count", "_parts")

    _DTYPE = np.dtype(np.float64)
    #: A Stepped's first three bytes: an array of 5 fields, its tag, a float 64 marker.
    _FIXED = bytes([0x95, _STEPPED_TAG, _F64])

    def __init__(self, ns):
        self.steps = len(ns)
        self._count = 0x90 | len(ns)
        self._parts = []
        at = 1
        for n in ns:
            head = _vector_head(n)
            start = struct.Struct(f">3sdB1sd{len(head)}s")
            self._parts.append((at, start, (self._FIXED, bytes([_F64]), head), n))
            at += start.size + 8 * n
        self.size = at

    def read(self, data) -> list | None:
        """Per Stepped, ``(t_reached, event, next_event, outputs)`` (read-only float64
        views of ``data``) if ``data`` is exactly such a batch, else None."""
        if type(data) is not bytes or len(data) != self.size or data[0] != self._count:
            return None
        out = []
        for at, start, fixed, n in self._parts:
            tag, t, event, f2, nxt, head = start.unpack_from(data, at)
            if (tag, f2, head) != fixed or (event != _FALSE and event != _TRUE):
                return None
            out.append((t, event == _TRUE, nxt,
                        np.frombuffer(data, self._DTYPE, n, at + start.size)))
        return out


class SteppedReader:
    """Reads batches of one Stepped of ``n`` outputs (what :func:`decode_one` reads, for one
    ``n``, without looking anything up)."""

    __slots__ = ("n", "size", "_start", "_fixed", "_at")

    _DTYPE = np.dtype(np.float64)
    #: The batch's first four bytes: a batch of one, a Stepped of 5 fields, its tag, a float
    #: 64 marker.
    _FIXED = bytes([0x91, 0x95, _STEPPED_TAG, _F64])

    def __init__(self, n: int):
        self.n = n
        head = _vector_head(n)
        # Everything before the values in one read: the fixed bytes, t_reached, the event,
        # a float 64 marker, next_event and the vector's header; then one comparison (the
        # fixed bytes, the marker and the header at once).
        self._start = struct.Struct(f">4sdB1sd{len(head)}s")
        self._fixed = (self._FIXED, bytes([_F64]), head)
        self._at = self._start.size
        self.size = self._at + 8 * n

    def read(self, data) -> tuple | None:
        """``(t_reached, event, next_event, outputs)`` (outputs: a read-only float64 view of
        ``data``) if ``data`` is exactly such a batch, else None (then decode strictly)."""
        if type(data) is not bytes or len(data) != self.size:
            return None
        fixed, t, event, f2, nxt, head = self._start.unpack_from(data)
        if (fixed, f2, head) != self._fixed:
            return None
        if event == _FALSE:
            return t, False, nxt, np.frombuffer(data, self._DTYPE, self.n, self._at)
        if event == _TRUE:
            return t, True, nxt, np.frombuffer(data, self._DTYPE, self.n, self._at)
        return None
