"""msgpack codec for the unit protocol: :mod:`cosim.master.protocol` messages to bytes and back.

Every remote transport (ZeroMQ, Ray when it crosses machines) sends messages through
:func:`encode` and :func:`decode`; nothing else touches the wire, and nothing is ever pickled.

Wire format
-----------
(The same for every protocol version so far: versions add or change messages, not this
mapping; :data:`~cosim.master.protocol.PROTOCOL_VERSION` is checked at Hello.)

A message is one msgpack array ``[tag, field_1, ..., field_n]``: the tag from
``MESSAGE_TYPES``, then the dataclass fields in declaration order. Field values map as follows,
driven by each field's type annotation, so a new message type needs no codec change as long as
its fields use these types (a batch, :func:`encode_batch`, is one msgpack array of such
message arrays, decoded in one pass):

==============================  ==============================================================
field type                      on the wire
==============================  ==============================================================
``float``, ``int``, ``bool``    float 64, int, bool (a float field also accepts an int)
``str``, ``None``               str (UTF-8), nil
enum (``ErrorKind``)            its value
``tuple[X, ...]``, fixed tuple  array; decoded back to a tuple
``dict[str, X]``                map with str keys
record (``PortInfo``, ...)      array of its fields, no tag
``ndarray``                     ext type :data:`EXT_NDARRAY`, below
``Any`` (``UnitState.data``)    nested maps (str keys) / arrays of nil, bool, int, float, str,
                                bin, ndarray; a list decodes as a list, a tuple is refused
==============================  ==============================================================

numpy scalars are sent as Python numbers. An ndarray is ext type 1 whose payload is, all
integers little-endian::

    u8 L | L bytes dtype string (ASCII, e.g. b"<f8") | u8 ndim | ndim x u64 dims | raw data

where the dtype is one of :data:`WIRE_DTYPES` (little-endian; a big-endian array is converted),
and the raw data is C-ordered, exactly ``prod(dims) * itemsize`` bytes. The values of a String
or Binary port, an object array of ``str`` only or ``bytes`` only, are ext type 2
(:data:`EXT_TEXT`)::

    u8 ndim | ndim x u64 dims | msgpack array of prod(dims) str (UTF-8) or bin items

Decoding is strict: the input size, every container and string length, the nesting depth and
every array's rank and element count are bounded (:class:`Limits`), so no input makes the
decoder allocate much more than the input size [#]_, hang, or raise anything but
:class:`~cosim.errors.CodecError`. Decoded arrays are read-only (they are views of msgpack's
copy of their payload, not copied again): copy one before writing into it.

.. [#] msgpack preallocates a list for the length a header claims, and nests up to 1024 deep;
   a hostile input of nested lying headers can make it allocate about 90 MB transiently
   (measured for a 1 MB input) before it fails.

Thread safety: :func:`encode` and :func:`decode` may be called from any number of threads; each
thread reuses its own msgpack ``Packer`` (a ``Packer`` owns a buffer and is not thread-safe).
"""

from __future__ import annotations

import dataclasses
import functools
import reprlib
import struct
import threading
import types
import typing
from dataclasses import dataclass
from enum import Enum
from typing import Any, Callable

import msgpack
import numpy as np

from cosim.errors import CodecError, ModelError
from cosim.master.protocol import MESSAGE_TYPES, PROTOCOL_VERSION, Hello, Message, Welcome

__all__ = ["encode", "decode", "encode_data", "decode_data", "check_version", "Limits", "DEFAULT_LIMITS", "DEFAULT_MAX_SIZE",
           "EXT_NDARRAY", "EXT_TEXT", "WIRE_DTYPES", "quote"]

#: Largest message :func:`encode` produces and :func:`decode` accepts by default, bytes.
DEFAULT_MAX_SIZE = 256 * 2**20

#: msgpack ext type code of an ndarray.
EXT_NDARRAY = 1
#: msgpack ext type code of an object ndarray of str or bytes (String / Binary ports).
EXT_TEXT = 2

#: The array dtypes allowed on the wire, by their wire dtype string.
WIRE_DTYPES: types.MappingProxyType[bytes, np.dtype] = types.MappingProxyType({
    s.encode(): np.dtype(s) for s in ("<f8", "<f4", "<i8", "<i4", "|i1", "|u1", "|b1", "<c16")})

_DTYPES = dict(WIRE_DTYPES)  # a plain dict looks up faster than the read-only view
# Header prefix (length byte + dtype string) of each allowed dtype, and one struct per rank for
# ``ndim`` followed by the dims, so that encoding an array header is two lookups and one pack.
_PREFIX = {dtype: bytes([len(s)]) + s for s, dtype in WIRE_DTYPES.items()}
_MAX_WIRE_NDIM = 64  # numpy's own limit; a u8 could say more.
_MIN_CONTAINER_LEN = 16  # more than [tag, fields...] of the largest message
_DIMS = [struct.Struct("<B" + "Q" * n) for n in range(_MAX_WIRE_NDIM + 1)]
_SHAPE = [struct.Struct("<" + "Q" * n) for n in range(_MAX_WIRE_NDIM + 1)]
_ALLOWED = ", ".join(str(d) for d in WIRE_DTYPES.values())
# ExtType() validates its arguments in Python; _make skips that, and our arguments are known good.
_ext = msgpack.ExtType._make


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds that :func:`decode` enforces (and :func:`encode` checks, so a sender learns first).

    Parameters
    ----------
    max_container_len : int
        Most entries in one msgpack array or map; at least 16, so every message fits.
    max_depth : int
        Most container nesting inside one free-form field (``UnitState.data``), at most 200.
    max_ndim : int
        Highest rank of an ndarray, at most 64.
    max_elements : int
        Most elements of one ndarray; also bounds every dimension, so empty arrays stay sane.
    """

    max_container_len: int = 2**20
    max_depth: int = 32
    max_ndim: int = 32
    max_elements: int = 2**28

    def __post_init__(self):
        for name, low, top in (("max_container_len", _MIN_CONTAINER_LEN, None),
                               ("max_depth", 1, 200), ("max_ndim", 1, _MAX_WIRE_NDIM),
                               ("max_elements", 1, None)):
            v = getattr(self, name)
            if type(v) is not int or v < low or (top is not None and v > top):
                bound = f" and <= {top}" if top is not None else ""
                raise ValueError(f"Limits.{name} must be an int >= {low}{bound}, got {v!r}")


DEFAULT_LIMITS = Limits()


class _Invalid(Exception):
    """A value does not fit its declared type; ``path`` collects where, innermost first.

    Internal: raised by the field encoders/decoders and turned into one ``CodecError`` naming
    ``Message.field[key][index]`` at the top, so the hot path never builds path strings.
    """

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message
        self.path: list[str] = []

    def at(self, segment: str) -> _Invalid:
        self.path.append(segment)
        return self

    def where(self) -> str:
        return "".join(reversed(self.path))


#: How client data is quoted in an error: a bounded, depth-limited repr (a message nested a
#: thousand deep or a tag of megabytes must not make the error itself huge or recursive).
_QUOTE = reprlib.Repr()
_QUOTE.maxlevel, _QUOTE.maxstring, _QUOTE.maxother, _QUOTE.maxlist = 3, 60, 60, 6


def quote(v: Any) -> str:
    """``repr(v)``, at most ~100 characters and 3 levels deep."""
    return _QUOTE.repr(v)


def _describe(v: Any) -> str:
    if isinstance(v, np.ndarray):
        return f"{type(v).__name__} of {v.dtype} with shape {v.shape}"
    return type(v).__name__


# --- scalars ---------------------------------------------------------------------------------

def _enc_float(v, lim):
    if type(v) is float:
        return v
    if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool):
        return float(v)
    raise _Invalid(f"expected a float, got {_describe(v)}")


def _dec_float(v, lim):
    if type(v) is float:
        return v
    if type(v) is int:
        return float(v)
    raise _Invalid(f"expected a float, got {_describe(v)}")


def _enc_int(v, lim):
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        v = int(v)
        if -2**63 <= v < 2**64:
            return v
        raise _Invalid(f"int {v} does not fit in 64 bits")
    raise _Invalid(f"expected an int, got {_describe(v)}")


def _dec_int(v, lim):
    if type(v) is int:
        return v
    raise _Invalid(f"expected an int, got {_describe(v)}")


def _enc_bool(v, lim):
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    raise _Invalid(f"expected a bool, got {_describe(v)}")


def _dec_bool(v, lim):
    if type(v) is bool:
        return v
    raise _Invalid(f"expected a bool, got {_describe(v)}")


def _str(v, lim):
    if type(v) is str:
        return v
    raise _Invalid(f"expected a str, got {_describe(v)}")


def _enum(cls: type[Enum]):
    allowed = ", ".join(repr(m.value) for m in cls)

    def enc(v, lim):
        if type(v) is cls:
            return v.value
        raise _Invalid(f"expected a member of {cls.__name__}, got {_describe(v)}")

    def dec(v, lim):
        try:
            return cls(v)
        except (ValueError, TypeError):
            raise _Invalid(f"{v!r} is not a member of {cls.__name__}; allowed: {allowed}") from None

    return enc, dec


# --- ndarrays --------------------------------------------------------------------------------

def _span(shape: tuple[int, ...]) -> int:
    """Product of the dims, counting a 0 as 1: bounds an empty array's shape like a full one."""
    span = 1
    for d in shape:
        if d:
            span *= d
    return span


def _enc_array(a, lim):
    if type(a) is not np.ndarray:
        # Subclasses (masked arrays, matrices) are refused: they would not come back as such.
        raise _Invalid(f"expected a numpy ndarray, got {_describe(a)}")
    prefix = _PREFIX.get(a.dtype)
    if prefix is None and a.dtype == object:
        return _enc_text(a, lim)
    if prefix is None:
        little = a.dtype.newbyteorder("<")
        prefix = _PREFIX.get(little)
        if prefix is None:
            raise _Invalid(f"ndarray dtype {a.dtype} cannot be sent; allowed: {_ALLOWED}")
        a = a.astype(little)
    ndim, shape = a.ndim, a.shape
    if ndim > lim.max_ndim:
        raise _Invalid(f"ndarray has {ndim} dimensions, more than max_ndim={lim.max_ndim}")
    if _span(shape) > lim.max_elements:
        raise _Invalid(f"ndarray of shape {shape} exceeds max_elements={lim.max_elements}")
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)
    # bytes + memoryview copies the data once, straight into the ext payload.
    return _ext((EXT_NDARRAY, prefix + _DIMS[ndim].pack(ndim, *shape) + a.data))


def _enc_text(a, lim):
    """An object array of ``str`` only or ``bytes`` only (a String / Binary port's values) as
    ext type :data:`EXT_TEXT`."""
    ndim, shape = a.ndim, a.shape
    if ndim > lim.max_ndim:
        raise _Invalid(f"ndarray has {ndim} dimensions, more than max_ndim={lim.max_ndim}")
    if _span(shape) > lim.max_elements:
        raise _Invalid(f"ndarray of shape {shape} exceeds max_elements={lim.max_elements}")
    items = a.ravel().tolist()
    kinds = {type(x) for x in items}
    if not kinds <= {str} and not kinds <= {bytes}:
        raise _Invalid("an object ndarray can be sent only when it holds str only or bytes "
                       f"only (a String or Binary port's values), got "
                       f"{', '.join(sorted(k.__name__ for k in kinds))}")
    inner = msgpack.packb(items, use_bin_type=True, strict_types=True)
    return _ext((EXT_TEXT, _DIMS[ndim].pack(ndim, *shape) + inner))


def _dec_text(data: bytes, lim) -> np.ndarray:
    """The object array of an :data:`EXT_TEXT` payload (bounded as an ndarray's is)."""
    n = len(data)
    if not n:
        raise CodecError("text ndarray payload is empty")
    ndim = data[0]
    if ndim > lim.max_ndim:
        raise CodecError(f"ndarray has {ndim} dimensions, more than max_ndim={lim.max_ndim}")
    start = 1 + 8 * ndim
    if n < start:
        raise CodecError("text ndarray header is truncated")
    shape = _SHAPE[ndim].unpack_from(data, 1)
    if _span(shape) > lim.max_elements:
        raise CodecError(f"ndarray shape {shape} exceeds max_elements={lim.max_elements}")
    count = _span(shape) if 0 not in shape else 0
    try:
        items = msgpack.unpackb(data[start:], raw=False, use_list=True, max_str_len=n,
                                max_bin_len=n, max_array_len=min(n, count), max_map_len=0,
                                max_ext_len=0)
    except (ValueError, TypeError) as err:
        raise CodecError(f"malformed text ndarray: {quote(str(err))}") from None
    if type(items) is not list or len(items) != count:
        raise CodecError(f"text ndarray of shape {shape} needs {count} items, got "
                         f"{_describe(items)}")
    kinds = {type(x) for x in items}
    if not kinds <= {str} and not kinds <= {bytes}:
        raise CodecError("text ndarray items must be str only or bytes only")
    out = np.empty(count, dtype=object)
    out[:] = items
    return out.reshape(shape)


def _dec_array(v, lim):
    if type(v) is np.ndarray:
        return v
    raise _Invalid(f"expected an ndarray, got {_describe(v)}")


@functools.lru_cache(maxsize=16)
def _ext_hook(lim: Limits) -> Callable[[int, bytes], np.ndarray]:
    """The msgpack ``ext_hook`` that rebuilds ndarrays within ``lim``."""

    def hook(code: int, data: bytes) -> np.ndarray:
        if code == EXT_TEXT:
            return _dec_text(data, lim)
        if code != EXT_NDARRAY:
            raise CodecError(f"unknown msgpack ext type {code}; the known ones are "
                             f"{EXT_NDARRAY} (ndarray) and {EXT_TEXT} (text ndarray)")
        n = len(data)
        if not n:
            raise CodecError("ndarray payload is empty")
        end = 1 + data[0]
        dtype = _DTYPES.get(data[1:end])
        if dtype is None:
            raise CodecError(f"ndarray dtype {data[1:end]!r} is not allowed; allowed: {_ALLOWED}")
        if n <= end:
            raise CodecError("ndarray header is truncated")
        ndim = data[end]
        if ndim > lim.max_ndim:
            raise CodecError(f"ndarray has {ndim} dimensions, more than max_ndim={lim.max_ndim}")
        start = end + 1 + 8 * ndim
        if n < start:
            raise CodecError("ndarray header is truncated")
        shape = _SHAPE[ndim].unpack_from(data, end + 1)
        span = _span(shape)
        if span > lim.max_elements:
            raise CodecError(f"ndarray shape {shape} exceeds max_elements={lim.max_elements}")
        count = span if 0 not in shape else 0
        if n - start != count * dtype.itemsize:
            raise CodecError(f"ndarray of shape {shape} and dtype {dtype} needs "
                             f"{count * dtype.itemsize} bytes, got {n - start}")
        a = np.frombuffer(data, dtype, count, start)
        return a if ndim == 1 else a.reshape(shape)

    return hook


_DEFAULT_HOOK = _ext_hook(DEFAULT_LIMITS)

# --- free-form data (Any) --------------------------------------------------------------------

_LEAVES = frozenset({str, float, bool, bytes, type(None)})
_TREE_TYPES = "dict (str keys), list, ndarray, str, int, float, bool, None, bytes"


def _enc_tree(v, lim, depth=0):
    t = type(v)
    if t in _LEAVES:
        return v
    if t is int:
        if -2**63 <= v < 2**64:
            return v
        raise _Invalid(f"int {v} does not fit in 64 bits")
    if t is np.ndarray:
        return _enc_array(v, lim)
    if t is dict or t is list:
        if depth >= lim.max_depth:
            raise _Invalid(f"nested deeper than max_depth={lim.max_depth}")
        if len(v) > lim.max_container_len:
            raise _Invalid(f"{t.__name__} of {len(v)} entries exceeds "
                           f"max_container_len={lim.max_container_len}")
        if t is list:
            items = []
            try:
                for x in v:
                    items.append(_enc_tree(x, lim, depth + 1))
            except _Invalid as bad:
                raise bad.at(f"[{len(items)}]") from None
            return items
        out = {}
        k = None
        try:
            for k, x in v.items():
                if type(k) is not str:
                    raise _Invalid(f"keys must be str, got {_describe(k)}")
                out[k] = _enc_tree(x, lim, depth + 1)
        except _Invalid as bad:
            raise bad.at(f"[{k!r}]") from None
        return out
    if isinstance(v, (np.bool_, np.integer)):
        return _enc_tree(v.item(), lim, depth)
    if isinstance(v, (np.float16, np.float32, np.float64)):  # exact as a Python float
        return float(v)
    if t is tuple:
        raise _Invalid("tuples are not allowed in free-form data (they would come back as "
                       "lists); use a list or an ndarray")
    raise _Invalid(f"{_describe(v)} is not allowed in free-form data; allowed: {_TREE_TYPES}")


def _dec_tree(v, lim, depth=0):
    # msgpack already produced only wire types and bounded every length; what is left to check
    # is the depth, str keys (msgpack also allows bytes keys) and stray ext types (timestamps).
    t = type(v)
    if t in _LEAVES or t is int or t is np.ndarray:
        return v
    if t is dict or t is list:
        if depth >= lim.max_depth:
            raise _Invalid(f"nested deeper than max_depth={lim.max_depth}")
        if t is list:
            i = 0
            try:
                for i, x in enumerate(v):
                    _dec_tree(x, lim, depth + 1)
            except _Invalid as bad:
                raise bad.at(f"[{i}]") from None
            return v
        k = None
        try:
            for k, x in v.items():
                if type(k) is not str:
                    raise _Invalid(f"keys must be str, got {_describe(k)}")
                _dec_tree(x, lim, depth + 1)
        except _Invalid as bad:
            raise bad.at(f"[{k!r}]") from None
        return v
    raise _Invalid(f"{_describe(v)} is not allowed in free-form data; allowed: {_TREE_TYPES}")


# --- containers and records ------------------------------------------------------------------

def _optional(enc, dec):
    return (lambda v, lim: None if v is None else enc(v, lim),
            lambda v, lim: None if v is None else dec(v, lim))


def _check_len(v, lim):
    if len(v) > lim.max_container_len:
        raise _Invalid(f"{len(v)} entries exceed max_container_len={lim.max_container_len}")


def _var_tuple(enc_item, dec_item):
    def enc(v, lim):
        if type(v) is not tuple:
            raise _Invalid(f"expected a tuple, got {_describe(v)}")
        _check_len(v, lim)
        out = []
        try:
            for x in v:
                out.append(enc_item(x, lim))
        except _Invalid as bad:
            raise bad.at(f"[{len(out)}]") from None
        return out

    def dec(v, lim):
        if type(v) is not list:
            raise _Invalid(f"expected an array, got {_describe(v)}")
        out = []
        try:
            for x in v:
                out.append(dec_item(x, lim))
        except _Invalid as bad:
            raise bad.at(f"[{len(out)}]") from None
        return tuple(out)

    return enc, dec


def _fixed_tuple(items):
    n = len(items)

    def enc(v, lim):
        if type(v) is not tuple or len(v) != n:
            raise _Invalid(f"expected a tuple of {n}, got {_describe(v)}")
        out = []
        try:
            for (e, _), x in zip(items, v):
                out.append(e(x, lim))
        except _Invalid as bad:
            raise bad.at(f"[{len(out)}]") from None
        return out

    def dec(v, lim):
        if type(v) is not list or len(v) != n:
            raise _Invalid(f"expected an array of {n}, got {_describe(v)}")
        out = []
        try:
            for (_, d), x in zip(items, v):
                out.append(d(x, lim))
        except _Invalid as bad:
            raise bad.at(f"[{len(out)}]") from None
        return tuple(out)

    return enc, dec


def _str_dict(enc_value, dec_value):
    def enc(v, lim):
        if type(v) is not dict:
            raise _Invalid(f"expected a dict, got {_describe(v)}")
        _check_len(v, lim)
        out = {}
        k = None
        try:
            for k, x in v.items():
                if type(k) is not str:
                    raise _Invalid(f"keys must be str, got {_describe(k)}")
                out[k] = enc_value(x, lim)
        except _Invalid as bad:
            raise bad.at(f"[{k!r}]") from None
        return out

    def dec(v, lim):
        if type(v) is not dict:
            raise _Invalid(f"expected a map, got {_describe(v)}")
        k = None
        try:
            # The dict is freshly decoded and ours: replace values in place (no resize).
            for k, x in v.items():
                if type(k) is not str:
                    raise _Invalid(f"keys must be str, got {_describe(k)}")
                v[k] = dec_value(x, lim)
        except _Invalid as bad:
            raise bad.at(f"[{k!r}]") from None
        return v

    return enc, dec


class _Record:
    """Field-by-field codec of one frozen dataclass, compiled from its type annotations."""

    def __init__(self, cls: type):
        hints = typing.get_type_hints(cls)
        self.cls = cls
        self.names = tuple(f.name for f in dataclasses.fields(cls))
        codecs = [_compile(hints[name], f"{cls.__name__}.{name}") for name in self.names]
        self.encoders = tuple(zip(self.names, (enc for enc, _ in codecs)))
        self.decoders = tuple(dec for _, dec in codecs)
        self.n = len(self.names)

    def to_wire(self, v, lim, out: list) -> list:
        """Append the wire form of ``v``'s fields to ``out``."""
        name = ""
        try:
            for name, enc in self.encoders:
                out.append(enc(getattr(v, name), lim))
        except _Invalid as bad:
            raise bad.at(f".{name}") from None
        return out

    def from_wire(self, items: list, start: int, lim):
        """Rebuild the dataclass from ``items[start:]``, which must hold exactly its fields."""
        if len(items) - start != self.n:
            raise _Invalid(f"{self.cls.__name__} has {self.n} fields ({', '.join(self.names)}),"
                           f" got {len(items) - start} values")
        args = items[start:]
        i = 0
        try:
            for i, dec in enumerate(self.decoders):
                args[i] = dec(args[i], lim)
        except _Invalid as bad:
            raise bad.at(f".{self.names[i]}") from None
        try:
            return self.cls(*args)
        except ModelError as err:  # the dataclass's own consistency checks
            raise _Invalid(str(err)) from None

    def codec(self):
        def enc(v, lim):
            if type(v) is not self.cls:
                raise _Invalid(f"expected a {self.cls.__name__}, got {_describe(v)}")
            return self.to_wire(v, lim, [])

        def dec(v, lim):
            if type(v) is not list:
                raise _Invalid(f"expected an array, got {_describe(v)}")
            return self.from_wire(v, 0, lim)

        return enc, dec


_SIMPLE = {
    float: (_enc_float, _dec_float), int: (_enc_int, _dec_int), bool: (_enc_bool, _dec_bool),
    str: (_str, _str), np.ndarray: (_enc_array, _dec_array), Any: (_enc_tree, _dec_tree),
}


def _compile(hint, where: str):
    """(encoder, decoder) for a field annotated ``hint``; fails at import for unsupported types."""
    if hint in _SIMPLE:
        return _SIMPLE[hint]
    if isinstance(hint, type) and issubclass(hint, Enum):
        return _enum(hint)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _Record(hint).codec()
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType) and len(args) == 2 and type(None) in args:
        return _optional(*_compile(args[0] if args[1] is type(None) else args[1], where))
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return _var_tuple(*_compile(args[0], where))
    if origin is tuple and args:
        return _fixed_tuple([_compile(a, where) for a in args])
    if origin is dict and args[0] is str:
        return _str_dict(*_compile(args[1], where))
    raise TypeError(f"{where}: the codec cannot carry fields of type {hint!r}")


_BY_TAG: dict[int, _Record] = {tag: _Record(cls) for tag, cls in MESSAGE_TYPES.items()}
_BY_CLASS: dict[type, tuple[int, _Record]] = {r.cls: (tag, r) for tag, r in _BY_TAG.items()}
_local = threading.local()
# A Packer keeps its buffer as large as the largest message it packed; past this size the
# thread's Packer is dropped after use so that one huge message does not pin its memory.
_KEEP_PACKER_BELOW = 16 * 2**20


def _packer() -> msgpack.Packer:
    try:
        return _local.packer
    except AttributeError:
        # strict_types: the field encoders convert everything explicitly, so a tuple or a
        # subclass that slipped through is an error rather than silently becoming an array.
        # autoreset=False: encode() frees the array payloads before copying the result out.
        _local.packer = msgpack.Packer(use_bin_type=True, strict_types=True, autoreset=False)
        return _local.packer


def _wire(msg: Message, limits: Limits) -> list:
    """``[tag, field_1, ...]`` of one message (fields converted by their encoders)."""
    entry = _BY_CLASS.get(type(msg))
    if entry is None:
        raise CodecError(f"cannot encode a {type(msg).__name__}: not a message type of "
                         f"cosim.master.protocol.MESSAGE_TYPES")
    tag, record = entry
    try:
        return record.to_wire(msg, limits, [tag])
    except _Invalid as bad:
        raise CodecError(f"cannot encode {type(msg).__name__}{bad.where()}: "
                         f"{bad.message}") from None


def _pack(wire: list, what: str, max_size: int) -> bytes:
    """msgpack bytes of ``wire`` (consumed: its array payloads are freed early)."""
    packer = _packer()
    try:
        packer.pack(wire)
        # Free the ext payloads (a copy of every array) before the result is allocated, so
        # the allocator reuses their memory: for a 1 MB array this is 20x faster than
        # faulting in fresh pages for both at once.
        wire.clear()
        data = packer.bytes()
    except (TypeError, ValueError, OverflowError) as err:
        raise CodecError(f"cannot encode {what}: {err}") from err
    finally:
        packer.reset()
    if len(data) > _KEEP_PACKER_BELOW:
        del _local.packer
    if len(data) > max_size:
        raise CodecError(f"{what} encodes to {len(data)} bytes, more than "
                         f"max_size={max_size}; send large data in smaller batches")
    return data


def encode(msg: Message, *, max_size: int = DEFAULT_MAX_SIZE,
           limits: Limits = DEFAULT_LIMITS) -> bytes:
    """Encode a protocol message as msgpack bytes.

    Parameters
    ----------
    msg : Message
        An instance of a class in ``cosim.master.protocol.MESSAGE_TYPES``.
    max_size : int, optional
        Largest allowed result, bytes; default :data:`DEFAULT_MAX_SIZE`.
    limits : Limits, optional
        The receiver's bounds, checked here so that the sender gets the error.

    Returns
    -------
    bytes
        The wire form (see the module docstring).

    Raises
    ------
    CodecError
        ``msg`` is not a registered message, a field has the wrong type (naming
        ``Message.field[key]``), an array has a dtype that is not allowed, or the result exceeds
        a limit.
    """
    return _pack(_wire(msg, limits), type(msg).__name__, max_size)


def _unpack(data, max_size: int, limits: Limits, max_array_len: int | None = None):
    """The msgpack object in ``data``, within ``limits``; every failure is a CodecError."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise CodecError(f"can only decode bytes-like data, got {type(data).__name__}")
    n = data.nbytes if isinstance(data, memoryview) else len(data)
    if n > max_size:
        raise CodecError(f"message of {n} bytes exceeds max_size={max_size}")
    # No msgpack object can be longer than the input, so bounding by n costs nothing and keeps
    # a lying length header from preallocating much more than the input itself.
    cap = min(n, limits.max_container_len)
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=True, use_list=True,
                               ext_hook=_DEFAULT_HOOK if limits is DEFAULT_LIMITS
                               else _ext_hook(limits), max_str_len=n, max_bin_len=n,
                               max_ext_len=n, max_array_len=max(cap, max_array_len or 0),
                               max_map_len=cap)
    except CodecError:
        raise
    except (ValueError, TypeError, BufferError) as err:  # msgpack's are ValueError subclasses
        raise CodecError(f"malformed message ({n} bytes): {quote(str(err))}") from err
    except RecursionError:
        raise CodecError(f"malformed message ({n} bytes): nested too deeply") from None


def _message(obj, limits: Limits) -> Message:
    """Rebuild one message from its unpacked ``[tag, fields...]``."""
    # use_list=True on purpose: free-form lists stay lists, and the field decoders turn arrays
    # into tuples exactly where the annotation says tuple.
    if type(obj) is not list or not obj:
        raise CodecError(f"expected a message [tag, fields...], got {_describe(obj)}")
    tag = obj[0]
    record = _BY_TAG.get(tag) if type(tag) is int else None
    if record is None:
        raise CodecError(f"unknown message tag {quote(tag)}; known tags: {sorted(_BY_TAG)}")
    try:
        return record.from_wire(obj, 1, limits)
    except _Invalid as bad:
        raise CodecError(f"invalid {record.cls.__name__}{bad.where()}: {bad.message}") from None
    except RecursionError:
        raise CodecError(f"invalid {record.cls.__name__}: nested too deeply") from None


def decode(data: bytes | bytearray | memoryview, *, max_size: int = DEFAULT_MAX_SIZE,
           limits: Limits = DEFAULT_LIMITS) -> Message:
    """Decode msgpack bytes produced by :func:`encode` back into a protocol message.

    Parameters
    ----------
    data : bytes-like
        One whole message.
    max_size : int, optional
        Largest accepted input, bytes; default :data:`DEFAULT_MAX_SIZE`.
    limits : Limits, optional
        Bounds on containers, nesting and arrays.

    Returns
    -------
    Message
        A frozen message equal to the one encoded. Its arrays are read-only.

    Raises
    ------
    CodecError
        For any input that is not a valid message within the limits: truncated, trailing or
        malformed bytes, an unknown tag, a wrong field count or type, an array with a bad
        dtype, shape or length, or an oversized input. Never any other exception.
    """
    return _message(_unpack(data, max_size, limits), limits)


def check_version(hello: Hello | Welcome) -> None:
    """Refuse a handshake whose protocol version differs from this side's.

    Parameters
    ----------
    hello : Hello or Welcome
        The handshake message received from the peer.

    Raises
    ------
    CodecError
        If ``hello`` is not a handshake message, or names a different protocol version (the
        message names both).
    """
    if type(hello) not in (Hello, Welcome):
        raise CodecError(f"expected Hello or Welcome to open a session, got "
                         f"{type(hello).__name__}")
    if hello.protocol_version != PROTOCOL_VERSION:
        raise CodecError(f"protocol version mismatch: the peer speaks version "
                         f"{hello.protocol_version}, this side speaks {PROTOCOL_VERSION}; "
                         f"run the same cosim release on both ends")


#: Most messages in one batch (a unit gets a handful per macro step).
MAX_BATCH = 64


def encode_batch(msgs, *, max_size: int = DEFAULT_MAX_SIZE,
                 limits: Limits = DEFAULT_LIMITS) -> bytes:
    """Encode several messages as one msgpack array of messages (one round trip, one pass).

    Parameters
    ----------
    msgs : sequence of Message
        At most :data:`MAX_BATCH`.
    """
    if len(msgs) > MAX_BATCH:
        raise CodecError(f"batch of {len(msgs)} messages exceeds {MAX_BATCH}")
    if len(msgs) == 1 and limits is DEFAULT_LIMITS:
        one = prepared.encode_one(msgs[0])      # a fused step: the same bytes, prepared
        if one is not None and len(one) < max_size:
            return b"\x91" + one
    return _pack([_wire(m, limits) for m in msgs], f"batch of {len(msgs)} messages", max_size)


def decode_batch(data, *, max_size: int = DEFAULT_MAX_SIZE,
                 limits: Limits = DEFAULT_LIMITS) -> list:
    """Decode :func:`encode_batch` bytes; every failure is a :class:`CodecError`."""
    fast = limits is DEFAULT_LIMITS and type(data) is bytes and len(data) <= max_size \
        and data[:1] == b"\x91"
    if fast:
        one = prepared.decode_one(data, 1, limits.max_elements)
        if one is not None:
            return [one]
    obj = _unpack(data, max_size, limits, MAX_BATCH)
    if type(obj) is not list or len(obj) > MAX_BATCH:
        got = f"{len(obj)} messages" if type(obj) is list else _describe(obj)
        raise CodecError(f"a batch must be an array of at most {MAX_BATCH} messages, "
                         f"got {got}")
    msgs = [_message(m, limits) for m in obj]
    if fast and len(msgs) == 1:
        prepared.learn(data, 1, msgs[0])
    return msgs


def encode_data(value, *, max_size: int = DEFAULT_MAX_SIZE,
                limits: Limits = DEFAULT_LIMITS) -> bytes:
    """Encode free-form data, the ``Any`` of the table above, as msgpack bytes: for cosim's
    own channels beside the unit protocol (a sweep's chunks and rows), never pickled.

    Parameters
    ----------
    value : dict (str keys), list, ndarray, str, int, float, bool, None or bytes
        Nested within ``limits``; a tuple is refused (it would come back as a list).

    Raises
    ------
    CodecError
        A value of another type (naming where: ``data[0]['key']``), or a limit exceeded.
    """
    try:
        wire = _enc_tree(value, limits)
    except _Invalid as bad:
        raise CodecError(f"cannot encode data{bad.where()}: {bad.message}") from None
    return _pack([wire], "data", max_size)


def decode_data(data, *, max_size: int = DEFAULT_MAX_SIZE, limits: Limits = DEFAULT_LIMITS):
    """Decode :func:`encode_data` bytes; every failure is a :class:`CodecError`."""
    obj = _unpack(data, max_size, limits)
    if type(obj) is not list or len(obj) != 1:
        raise CodecError(f"expected data [value], got {_describe(obj)}")
    try:
        return _dec_tree(obj[0], limits)
    except _Invalid as bad:
        raise CodecError(f"invalid data{bad.where()}: {bad.message}") from None
    except RecursionError:
        raise CodecError("invalid data: nested too deeply") from None


# The fused step's prepared wire forms (that module encodes its headers through encode()).
from cluster import prepared  # noqa: E402
