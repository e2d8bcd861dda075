"""Tests of cluster.codec: exact round trips of every message, strict and bounded decoding."""

import struct
import threading
import time
import tracemalloc
from concurrent.futures import ThreadPoolExecutor

import msgpack
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from cluster.codec import (DEFAULT_LIMITS, EXT_NDARRAY, EXT_TEXT, MAX_BATCH, WIRE_DTYPES, Limits,
                           check_version, decode, decode_batch, encode, encode_batch)
from cosim.errors import CodecError
from cosim.master.protocol import (MESSAGE_TYPES, PROTOCOL_VERSION, Alive, CollectLogs, Describe,
                                   DoStep, ErrorKind, ErrorReply, GetOutputs, GetState, Heartbeat,
                                   Hello, Reload, Initialize, LogBatch, Message, Ok, Outputs,
                                   PortInfo, RefreshOutputs, SetInputs, SetParameters, SetState,
                                   Step, StepDone, Stepped, Terminate, UnitDescription, UnitState,
                                   Welcome)

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --- strategies ------------------------------------------------------------------------------

names = st.text(max_size=8)
floats = st.floats()  # NaN, infinities and -0.0 included: they must survive bit for bit
int64s = st.integers(-2**63, 2**64 - 1)


def _variants(a: np.ndarray):
    # Non-contiguous views must arrive as equal C-ordered arrays.
    return st.sampled_from([a, a.T, a[::-1]] if a.ndim else [a])


arrays = st.sampled_from(list(WIRE_DTYPES.values())).flatmap(
    lambda dtype: hnp.arrays(dtype, hnp.array_shapes(min_dims=0, max_dims=4, min_side=0,
                                                     max_side=4))).flatmap(_variants)
port_values = st.dictionaries(names, arrays, max_size=4)
leaves = (st.none() | st.booleans() | int64s | floats | st.text(max_size=8)
          | st.binary(max_size=8) | arrays)
trees = st.recursive(leaves, lambda children: st.lists(children, max_size=3)
                     | st.dictionaries(names, children, max_size=3), max_leaves=12)
states = st.builds(UnitState, floats, st.dictionaries(names, trees, max_size=4))
ports = st.builds(PortInfo, st.text(min_size=1, max_size=6),
                  st.lists(st.integers(0, 2**40), max_size=3).map(tuple))


@st.composite
def descriptions(draw):
    inputs = draw(st.lists(ports, max_size=4, unique_by=lambda p: p.name))
    outputs = draw(st.lists(ports, max_size=4, unique_by=lambda p: p.name))
    in_names = [p.name for p in inputs]
    feedthrough = tuple(
        (p.name, tuple(draw(st.lists(st.sampled_from(in_names), unique=True) if in_names
                            else st.just([]))))
        for p in outputs)
    return UnitDescription(draw(st.text(min_size=1, max_size=8)), tuple(inputs), tuple(outputs),
                           feedthrough, draw(st.floats(0.0, 1e3)), draw(st.booleans()),
                           tuple(draw(st.lists(names, max_size=3))))


@st.composite
def log_batches(draw):
    signals = {}
    for name in draw(st.lists(names, max_size=3, unique=True)):
        n = draw(st.integers(0, 5))
        shape = draw(hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=3))
        signals[name] = (draw(hnp.arrays(np.float64, (n,))),
                         draw(hnp.arrays(np.float64, (n, *shape))))
    return LogBatch(signals)


STRATEGIES = {
    Hello: st.builds(Hello, int64s, st.text()),
    Describe: st.just(Describe()),
    Initialize: st.builds(Initialize, floats),
    SetInputs: st.builds(SetInputs, port_values,
                         st.dictionaries(names, st.lists(arrays, max_size=2).map(tuple),
                                         max_size=3)),
    DoStep: st.builds(DoStep, floats, floats),
    RefreshOutputs: st.just(RefreshOutputs()),
    GetOutputs: st.just(GetOutputs()),
    GetState: st.just(GetState()),
    SetState: st.builds(SetState, states),
    CollectLogs: st.just(CollectLogs()),
    Terminate: st.just(Terminate()),
    Heartbeat: st.just(Heartbeat()),
    Reload: st.builds(Reload, st.text()),
    SetParameters: st.builds(SetParameters, st.dictionaries(names, trees, max_size=4)),
    Step: st.builds(Step, st.lists(names, max_size=3).map(tuple),
                    st.lists(st.integers(0, 2), max_size=3).map(tuple), st.integers(0, 15), floats,
                    floats, hnp.arrays(np.float64, st.integers(0, 6))),
    Welcome: st.builds(Welcome, int64s, descriptions()),
    UnitDescription: descriptions(),
    Ok: st.just(Ok()),
    Outputs: st.builds(Outputs, port_values),
    StepDone: st.builds(StepDone, floats, st.booleans(), floats),
    UnitState: states,
    LogBatch: log_batches(),
    ErrorReply: st.builds(ErrorReply, st.sampled_from(ErrorKind), st.text(),
                          st.none() | floats),
    Stepped: st.builds(Stepped, floats, st.booleans(), floats,
                       hnp.arrays(np.float64, st.integers(0, 6))),
    Alive: st.builds(Alive, st.none() | floats, st.booleans()),
}
messages = st.one_of(list(STRATEGIES.values()))


def assert_identical(a, b):
    """Equal in type, order, dtype, shape and every bit (NaN payloads and -0.0 included)."""
    assert type(a) is type(b), (a, b)
    if isinstance(a, np.ndarray):
        assert (a.dtype, a.shape) == (b.dtype, b.shape)
        assert np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")
        assert np.ascontiguousarray(a).tobytes() == b.tobytes()
    elif isinstance(a, float):
        assert struct.pack("<d", a) == struct.pack("<d", b)
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            assert_identical(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert_identical(x, y)
    elif isinstance(a, (Message, PortInfo)):
        for name in a.__slots__:
            assert_identical(getattr(a, name), getattr(b, name))
    else:
        assert a == b


def decode_or_codec_error(data):
    """Decode must either give a valid message, which re-encodes, or raise CodecError."""
    try:
        msg = decode(data)
    except CodecError:
        return None
    assert type(msg) in MESSAGE_TYPES.values()
    assert decode(encode(msg)) == msg
    return msg


def ext(payload: bytes) -> bytes:
    return msgpack.packb([35, {"u": msgpack.ExtType(EXT_NDARRAY, payload)}])


def text_ext(payload: bytes) -> bytes:
    return msgpack.packb([35, {"u": msgpack.ExtType(EXT_TEXT, payload)}])


def text_head(shape) -> bytes:
    return struct.pack("<B" + "Q" * len(shape), len(shape), *shape)


def text_array(items, shape=None) -> np.ndarray:
    a = np.empty(len(items), dtype=object)
    a[:] = items
    return a.reshape(shape or (len(items),))


@pytest.mark.parametrize("items, shape", [
    (["tick 1"], None), (["", "héllo", "x" * 1000], None), ([b""], None),
    ([b"\x00\xff", b"ab", b"", b"\x00"], (2, 2)), ([], (0, 1))])
def test_text_arrays_round_trip_exactly(items, shape):
    """String / Binary port values (object arrays of str or bytes) travel as EXT_TEXT."""
    a = text_array(items, shape)
    for msg in (SetInputs({"t": a}), Outputs({"t": a}),
                LogBatch({"k": (np.arange(float(a.shape[0])), a)})):
        back = decode(encode(msg))
        assert back == msg
        got = back.values["t"] if hasattr(back, "values") else back.signals["k"][1]
        assert got.dtype == object and got.shape == a.shape and got.tolist() == a.tolist()


def header(dtype: bytes, shape) -> bytes:
    return bytes([len(dtype)]) + dtype + struct.pack(f"<B{len(shape)}Q", len(shape), *shape)


# --- round trips -----------------------------------------------------------------------------

def test_every_message_type_has_a_strategy():
    assert set(STRATEGIES) == set(MESSAGE_TYPES.values())


@pytest.mark.parametrize("cls", list(MESSAGE_TYPES.values()), ids=lambda c: c.__name__)
@FAST
@given(data=st.data())
def test_round_trip_is_exact(cls, data):
    msg = data.draw(STRATEGIES[cls])
    wire = encode(msg)
    back = decode(wire)
    assert back == msg
    assert_identical(msg, back)
    assert encode(back) == wire  # canonical: the same message always gives the same bytes


@FAST
@given(msg=messages)
def test_decode_accepts_any_bytes_like(msg):
    wire = encode(msg)
    assert decode(bytearray(wire)) == msg
    assert decode(memoryview(wire)) == msg


def test_decoded_arrays_are_read_only():
    back = decode(encode(SetInputs({"u": np.zeros(3)})))
    with pytest.raises(ValueError, match="read-only"):
        back.values["u"][0] = 1.0


def test_tuple_fields_come_back_as_tuples_and_lists_as_lists():
    desc = UnitDescription("u", (PortInfo("a", (2, 3)),), (PortInfo("y", ()),),
                           (("y", ("a",)),), 0.0, False, ("logs",))
    back = decode(encode(Welcome(PROTOCOL_VERSION, desc))).unit
    assert type(back.inputs) is tuple and type(back.inputs[0].shape) is tuple
    assert type(back.feedthrough[0][1]) is tuple
    assert type(decode(encode(UnitState(0.0, {"a": [1, [2]]}))).data["a"][1]) is list


def test_numpy_scalars_travel_as_python_numbers():
    assert encode(DoStep(np.float64(1.5), np.float32(0.25))) == encode(DoStep(1.5, 0.25))
    assert encode(Hello(np.int64(1), "s")) == encode(Hello(1, "s"))
    state = UnitState(0.0, {"n": np.int64(3), "x": np.float32(0.5), "b": np.bool_(True)})
    assert decode(encode(state)) == UnitState(0.0, {"n": 3, "x": 0.5, "b": True})


def test_big_endian_and_non_contiguous_arrays_arrive_native_and_c_ordered():
    a = np.arange(12.0).reshape(3, 4)
    back = decode(encode(Outputs({"be": a.astype(">f8"), "t": a.T, "s": a[::2, ::-3]})))
    assert back.values["be"].dtype == np.dtype("<f8")
    for key, want in (("be", a), ("t", a.T), ("s", a[::2, ::-3])):
        assert np.array_equal(back.values[key], want) and back.values[key].flags.c_contiguous


def test_golden_bytes_pin_the_wire_format():
    assert encode(DoStep(0.5, 0.25)).hex() == "9305cb3fe0000000000000cb3fd0000000000000"
    wire = encode(Outputs({"u": np.array([1.0, 2.0])}))
    assert wire == (b"\x92\x23\x81\xa1u\xc7\x1d\x01" + b"\x03<f8\x01" + struct.pack("<Q", 2)
                    + struct.pack("<2d", 1.0, 2.0))


def test_refresh_outputs_is_its_tag_alone_on_the_wire():
    wire = encode(RefreshOutputs())
    assert wire == msgpack.packb([12])
    assert_identical(decode(wire), RefreshOutputs())


def test_float_field_accepts_an_int_on_the_wire():
    msg = decode(msgpack.packb([5, 1, 2]))
    assert msg == DoStep(1.0, 2.0) and type(msg.t) is float


def test_concurrent_encoding_from_many_threads_is_safe():
    msgs = [SetInputs({"u": np.full(n, float(n))}) for n in range(1, 50)]
    want = [encode(m) for m in msgs]
    barrier = threading.Barrier(4)

    def work(_):
        barrier.wait()
        return [[encode(m) for m in msgs] for _ in range(20)]

    with ThreadPoolExecutor(4) as pool:
        for rounds in pool.map(work, range(4)):
            assert all(r == want for r in rounds)


def test_encoding_still_works_after_a_very_large_message():
    big = SetInputs({"u": np.zeros(3 * 2**20)})  # 24 MiB, over the packer-retention size
    assert decode(encode(big)) == big
    assert decode(encode(DoStep(0.0, 1.0))) == DoStep(0.0, 1.0)


# --- refusing bad messages on encode ---------------------------------------------------------

@pytest.mark.parametrize("msg, where", [
    (SetInputs({"u": [1.0]}), r"SetInputs.values\['u'\]: expected a numpy ndarray"),
    (SetInputs({1: np.zeros(1)}), r"SetInputs.values\[1\]: keys must be str"),
    (SetInputs({"u": np.zeros(1, dtype=np.float16)}), "float16 cannot be sent"),
    (SetInputs({"u": np.zeros(1, dtype=object)}), "object ndarray can be sent only when it "
                                                   "holds str only or bytes only"),
    (SetInputs({"u": np.array(["a", b"b"], dtype=object)}), "got bytes, str"),
    (SetInputs({"u": np.ma.zeros(1)}), "expected a numpy ndarray, got MaskedArray"),
    (DoStep("0", 1.0), "DoStep.t: expected a float, got str"),
    (StepDone(1.0, 1), "StepDone.event: expected a bool"),
    (Hello(2**64, "s"), "does not fit in 64 bits"),
    (Welcome(1, Ok()), "Welcome.unit: expected a UnitDescription, got Ok"),
    (UnitState(0.0, {"a": {"b": (1, 2)}}), r"UnitState.data\['a'\]\['b'\]: tuples are not"),
    (UnitState(0.0, {"a": [1, {2: 3}]}), r"data\['a'\]\[1\]\[2\]: keys must be str"),
    (UnitState(0.0, {"a": {1, 2}}), "set is not allowed in free-form data"),
    (UnitState(0.0, {"a": 1j}), "complex is not allowed"),
    (UnitState(0.0, {"a": [2**64]}), "does not fit in 64 bits"),
    (ErrorReply("codec", "x"), "ErrorReply.kind: expected a member of ErrorKind, got str"),
])
def test_encode_refuses_a_wrong_field_naming_it(msg, where):
    with pytest.raises(CodecError, match=where):
        encode(msg)


def test_encode_refuses_unregistered_objects():
    with pytest.raises(CodecError, match="not a message type"):
        encode(PortInfo("u", ()))
    with pytest.raises(CodecError, match="not a message type"):
        encode({"tag": 1})


def test_encode_refuses_unbounded_nesting_and_cycles():
    deep = []
    for _ in range(DEFAULT_LIMITS.max_depth + 1):
        deep = [deep]
    with pytest.raises(CodecError, match="max_depth"):
        encode(UnitState(0.0, {"a": deep}))
    cycle = {}
    cycle["self"] = cycle
    with pytest.raises(CodecError, match="max_depth"):
        encode(UnitState(0.0, cycle))


def test_encode_enforces_the_size_and_length_limits():
    with pytest.raises(CodecError, match="more than max_size=1000"):
        encode(SetInputs({"u": np.zeros(200)}), max_size=1000)
    small = Limits(max_container_len=16, max_ndim=1, max_elements=4)
    with pytest.raises(CodecError, match="17 entries exceed max_container_len=16"):
        encode(SetInputs({str(i): np.zeros(1) for i in range(17)}), limits=small)
    with pytest.raises(CodecError, match="17 entries exceeds max_container_len=16"):
        encode(UnitState(0.0, {"a": list(range(17))}), limits=small)
    with pytest.raises(CodecError, match="max_ndim=1"):
        encode(SetInputs({"a": np.zeros((1, 1))}), limits=small)
    with pytest.raises(CodecError, match="max_elements=4"):
        encode(SetInputs({"a": np.zeros(5)}), limits=small)


# --- refusing bad input on decode ------------------------------------------------------------

@pytest.mark.parametrize("data, reason", [
    (b"", "malformed"),
    (b"\xc1", "malformed"),
    (msgpack.packb([5, 1.0, 2.0]) + b"\x00", "malformed"),
    (msgpack.packb({"tag": 5}), "expected a message"),
    (msgpack.packb([]), "expected a message"),
    (msgpack.packb([99]), "unknown message tag 99"),
    (msgpack.packb([True, 1.0, 2.0]), "unknown message tag True"),
    (msgpack.packb(["DoStep", 1.0, 2.0]), "unknown message tag 'DoStep'"),
    (msgpack.packb([5, 1.0]), r"DoStep has 2 fields \(t, h\), got 1 values"),
    (msgpack.packb([5, "1", 2.0]), "invalid DoStep.t: expected a float, got str"),
    (msgpack.packb([36, 1.0, 0, 2.0]), "invalid StepDone.event: expected a bool, got int"),
    (msgpack.packb([39, "nope", "m", None, ""]), "'nope' is not a member of ErrorKind; allowed:"),
    (msgpack.packb([4, [1.0], {}]), "invalid SetInputs.values: expected a map, got list"),
    (msgpack.packb([4, {"u": 1.0}, {}]), r"SetInputs.values\['u'\]: expected an ndarray, got fl"),
    (msgpack.packb([4, {}, {"u": [1.0]}]), r"SetInputs.derivatives\['u'\]\[0\]: expected an nd"),
    (msgpack.packb([4, {b"u": 1.0}, {}], use_bin_type=True), "keys must be str, got bytes"),
    (msgpack.packb([4, {1: 1.0}, {}]), "malformed"),
    (b"\x92\x01\xa2\xff\xfe", "malformed"),  # invalid UTF-8
    (msgpack.packb([32, 1, ["u", [], [], [["y", []]], 0.0, True, []]]), "feedthrough names 'y'"),
    (msgpack.packb([33, "u", [["a", [2.5], 0.0]], [], [], 0.0, True, []]),
     r"UnitDescription.inputs\[0\].shape\[0\]: expected an int"),
    (msgpack.packb([37, 0.0, {"a": msgpack.Timestamp(1)}]), "Timestamp is not allowed"),
    (msgpack.packb([37, 0.0, {"a": {b"k": 1}}], use_bin_type=True), "keys must be str"),
    (msgpack.packb([35, {"u": msgpack.ExtType(7, b"")}]), "unknown msgpack ext type 7"),
    (ext(b""), "ndarray payload is empty"),
    (ext(header(b"<f2", (1,)) + b"\x00\x00"), "dtype b'<f2' is not allowed"),
    (ext(header(b"|O8", (1,)) + b"\x00" * 8), "dtype b'|O8' is not allowed"),
    (ext(header(b">f8", (1,)) + b"\x00" * 8), "dtype b'>f8' is not allowed"),
    (ext(b"\x03<f8"), "ndarray header is truncated"),
    (ext(b"\x03<f8\x02" + b"\x00" * 9), "ndarray header is truncated"),
    (ext(header(b"<f8", (3,)) + b"\x00" * 16), r"needs 24 bytes, got 16"),
    (ext(header(b"<f8", (1,)) + b"\x00" * 16), r"needs 8 bytes, got 16"),
    (ext(header(b"<f8", (2**40,)) + b"\x00" * 8), "exceeds max_elements"),
    (ext(header(b"<f8", (0, 2**63, 2**63))), "exceeds max_elements"),
    (ext(header(b"<f8", (1,) * 33) + b"\x00" * 8), "more than max_ndim=32"),
    (text_ext(b""), "text ndarray payload is empty"),
    (text_ext(b"\x02\x01"), "text ndarray header is truncated"),
    (text_ext(text_head((2,)) + msgpack.packb(["a"])), r"needs 2 items, got list"),
    (text_ext(text_head((1,)) + msgpack.packb([1])), "str only or bytes only"),
    (text_ext(text_head((2,)) + msgpack.packb(["a", b"b"], use_bin_type=True)),
     "str only or bytes only"),
    (text_ext(text_head((2**40,)) + msgpack.packb(["a"])), "exceeds max_elements"),
    (text_ext(text_head((1,)) + b"\x91"), "malformed text ndarray"),
    (text_ext(text_head((1,)) + msgpack.packb([["a"]])), "str only or bytes only"),
])
def test_decode_refuses_bad_input_with_a_codec_error(data, reason):
    with pytest.raises(CodecError, match=reason):
        decode(data)


@pytest.mark.parametrize("data", ["text", None, 5, [1, 2]])
def test_decode_refuses_what_is_not_bytes(data):
    with pytest.raises(CodecError, match="bytes-like"):
        decode(data)


def test_decode_refuses_oversize_input_before_parsing():
    with pytest.raises(CodecError, match="exceeds max_size=100"):
        decode(b"\x00" * 101, max_size=100)
    with pytest.raises(CodecError, match="max_size"):
        decode(encode(SetInputs({"u": np.zeros(100)})), max_size=200)


def test_decode_enforces_custom_limits():
    wire = encode(UnitState(0.0, {"a": [[[1]]]}))
    assert decode(wire).data == {"a": [[[1]]]}
    with pytest.raises(CodecError, match="max_depth=2"):
        decode(wire, limits=Limits(max_depth=2))
    with pytest.raises(CodecError, match="17 exceeds max_array_len"):
        decode(encode(UnitState(0.0, {"a": list(range(17))})), limits=Limits(max_container_len=16))


def test_decode_refuses_deep_nesting_without_recursion_error():
    data = msgpack.packb([37, 0.0, {"a": 0}])[:-1] + b"\x91" * 5000 + b"\x00"
    with pytest.raises(CodecError):
        decode(data)
    data = msgpack.packb([37, 0.0, {"a": 0}])[:-1] + b"\x91" * 1000 + b"\x00"
    with pytest.raises(CodecError, match="max_depth"):
        decode(data)


@pytest.mark.parametrize("claim", [
    b"\xdd\xff\xff\xff\xff",  # array of 4 billion entries
    b"\xdf\xff\xff\xff\xff",  # map of 4 billion entries
    b"\xdb\xff\xff\xff\xff",  # str of 4 GiB
    b"\xc6\xff\xff\xff\xff",  # bin of 4 GiB
    b"\xc9\xff\xff\xff\xff\x01",  # ext of 4 GiB
    # 1024 nested lists, each claiming 4096 entries (within the input size): msgpack
    # preallocates each one before it finds the input too short.
    b"\xdd\x00\x00\x10\x00" * 1024 + b"\x00" * 4000,
])
def test_lying_length_headers_fail_fast_in_bounded_memory(claim):
    # CPU time, not wall time: a loaded machine must not fail this (walking a claimed 4
    # billion entries would take minutes; refusing them takes milliseconds).
    tracemalloc.start()
    start = time.thread_time()
    try:
        with pytest.raises(CodecError):
            decode(claim)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.thread_time() - start < 2.0
    assert peak < 64 * 2**20


# --- fuzzing ---------------------------------------------------------------------------------

@FUZZ
@given(data=st.binary(max_size=256))
def test_random_bytes_decode_or_raise_codec_error(data):
    decode_or_codec_error(data)


@FUZZ
@given(msg=messages, other=messages, data=st.data())
def test_mutated_encodings_decode_or_raise_codec_error(msg, other, data):
    wire, wire2 = encode(msg), encode(other)
    i = data.draw(st.integers(0, len(wire)), label="position")
    mutation = data.draw(st.sampled_from(["truncate", "flip", "insert", "splice", "delete"]))
    if mutation == "truncate":
        mutated = wire[:i]
    elif mutation == "flip":
        bit = data.draw(st.integers(1, 255))
        mutated = wire[:i] + bytes([wire[i] ^ bit]) + wire[i + 1:] if i < len(wire) else wire
    elif mutation == "insert":
        mutated = wire[:i] + data.draw(st.binary(min_size=1, max_size=9)) + wire[i:]
    elif mutation == "splice":
        mutated = wire[:i] + wire2[data.draw(st.integers(0, len(wire2))):]
    else:
        mutated = wire[:i] + wire[i + data.draw(st.integers(1, 9)):]
    decode_or_codec_error(mutated)


wire_leaves = (st.none() | st.booleans() | int64s | floats | st.binary(max_size=4)
               | st.sampled_from(["", "u", "y", "codec"]) | st.text(max_size=4)
               | st.builds(msgpack.ExtType, st.integers(0, 3), st.binary(max_size=30))
               | st.builds(lambda dtype, shape, raw: msgpack.ExtType(1, header(dtype, shape) + raw),
                           st.sampled_from([b"<f8", b"|b1", b"<c16", b"<f2"]),
                           st.lists(st.integers(0, 3), max_size=3), st.binary(max_size=40)))
wire_values = st.recursive(
    wire_leaves, lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=3) | st.binary(max_size=2), children, max_size=3),
    max_leaves=15)


@FUZZ
@given(tag=st.sampled_from(sorted(MESSAGE_TYPES)), fields=st.lists(wire_values, max_size=8))
def test_well_formed_msgpack_of_the_wrong_shape_decodes_or_raises_codec_error(tag, fields):
    decode_or_codec_error(msgpack.packb([tag, *fields], use_bin_type=True))


# --- batches ---------------------------------------------------------------------------------

@FAST
@given(msgs=st.lists(messages, max_size=5))
def test_batch_round_trip_is_exact_and_equals_the_messages_one_by_one(msgs):
    wire = encode_batch(msgs)
    back = decode_batch(wire)
    assert back == msgs
    for m, b in zip(msgs, back):
        assert_identical(m, b)
    # A batch is the msgpack array of the messages' own wire forms, byte for byte.
    header = msgpack.Packer().pack_array_header(len(msgs))
    assert wire == header + b"".join(encode(m) for m in msgs)


def test_batch_size_is_bounded_on_both_sides():
    with pytest.raises(CodecError, match=f"exceeds {MAX_BATCH}"):
        encode_batch([Heartbeat()] * (MAX_BATCH + 1))
    too_many = msgpack.packb([msgpack.unpackb(encode(Heartbeat()))] * (MAX_BATCH + 1))
    with pytest.raises(CodecError, match=f"at most {MAX_BATCH} messages, got {MAX_BATCH + 1}"):
        decode_batch(too_many)
    with pytest.raises(CodecError, match="exceeds max_size"):
        decode_batch(encode_batch([Heartbeat()]), max_size=2)


@pytest.mark.parametrize("data", [b"", b"\xc1", msgpack.packb({"a": 1}), msgpack.packb([1]),
                                  msgpack.packb([[999]]), msgpack.packb([encode(Ok())])])
def test_malformed_batches_raise_codec_error(data):
    with pytest.raises(CodecError):
        decode_batch(data)


@FUZZ
@given(msgs=st.lists(messages, min_size=1, max_size=3), data=st.data())
def test_mutated_batches_decode_or_raise_codec_error(msgs, data):
    wire = encode_batch(msgs)
    i = data.draw(st.integers(0, len(wire)), label="position")
    mutated = data.draw(st.sampled_from([
        wire[:i], wire[:i] + bytes([wire[i] ^ 0x5A]) + wire[i + 1:] if i < len(wire) else wire,
        wire[:i] + data.draw(st.binary(min_size=1, max_size=9)) + wire[i:]]))
    try:
        back = decode_batch(mutated)
    except CodecError:
        return
    assert decode_batch(encode_batch(back)) == back


# --- handshake -------------------------------------------------------------------------------

def test_check_version_accepts_the_same_version():
    check_version(Hello(PROTOCOL_VERSION, "run"))
    check_version(decode(encode(Hello(PROTOCOL_VERSION, "run"))))


@pytest.mark.parametrize("msg", [
    Hello(PROTOCOL_VERSION + 1, "run"),
    Welcome(PROTOCOL_VERSION + 1, UnitDescription("u", (), (), (), 0.0, False, ())),
])
def test_check_version_refuses_another_version_naming_both(msg):
    with pytest.raises(CodecError, match=f"peer speaks version {PROTOCOL_VERSION + 1}, "
                                         f"this side speaks {PROTOCOL_VERSION}"):
        check_version(decode(encode(msg)))


def test_check_version_refuses_a_non_handshake_message():
    with pytest.raises(CodecError, match="expected Hello or Welcome"):
        check_version(Heartbeat())


@pytest.mark.parametrize("field, value", [("max_depth", 0), ("max_depth", 201),
                                          ("max_ndim", 65), ("max_elements", 1.5),
                                          ("max_container_len", 15)])
def test_limits_are_validated(field, value):
    with pytest.raises(ValueError, match=f"Limits.{field}"):
        Limits(**{field: value})


# --- speed (opt-in) --------------------------------------------------------------------------

@pytest.mark.bench
@pytest.mark.parametrize("msg", [
    SetInputs({"u": np.zeros(1), "v": np.zeros(3), "w": np.zeros((2, 2))}),
    DoStep(1.0, 0.01),
    SetInputs({"u": np.random.default_rng(0).random(100_000)}),
], ids=["SetInputs-3-small", "DoStep", "SetInputs-1e5"])
def test_encode_decode_speed(msg):
    import timeit
    wire = encode(msg)
    n = 20_000 if len(wire) < 1000 else 300
    enc = min(timeit.repeat(lambda: encode(msg), number=n, repeat=5)) / n * 1e6
    dec = min(timeit.repeat(lambda: decode(wire), number=n, repeat=5)) / n * 1e6
    print(f"\n{type(msg).__name__} ({len(wire)} bytes): encode {enc:.2f} us, decode {dec:.2f} us")


# --- free-form data (cosim's own channels beside the protocol) -----------------------------------

def test_free_form_data_round_trips_and_refuses_what_would_not():
    from cluster.codec import decode_data, encode_data
    value = [{"run_id": "000001-ab", "index": 1, "gain": None, "y": float("nan"),
              "arr": np.arange(3.0), "n": np.int64(7)}, "a1b2c3"]
    back = decode_data(encode_data(value))
    assert back[0]["run_id"] == "000001-ab" and back[0]["index"] == 1 and back[0]["n"] == 7
    assert back[0]["gain"] is None and np.isnan(back[0]["y"]) and back[1] == "a1b2c3"
    np.testing.assert_array_equal(back[0]["arr"], np.arange(3.0))
    with pytest.raises(CodecError, match=r"cannot encode data\[0\]\['t'\]: tuples"):
        encode_data([{"t": (1, 2)}])
    with pytest.raises(CodecError, match="cannot encode data: .*object"):
        encode_data(object())


@FUZZ
@given(data=st.binary(max_size=256))
def test_random_bytes_decode_as_data_or_raise_codec_error(data):
    from cluster.codec import decode_data
    try:
        decode_data(data)
    except CodecError:
        pass
