"""The prepared wire forms of the fused step (cluster.prepared): the same bytes as the strict
codec, the same messages back, and any other input left to the strict decoder."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from cluster import prepared
from cluster.codec import Limits, decode_batch, encode, encode_batch
from cosim.errors import CodecError
from cosim.master.protocol import Step, Stepped

from tests.cluster.test_codec import assert_identical

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
names = st.text(max_size=8)
vectors = hnp.arrays(np.float64, st.integers(0, 40))
steps = st.builds(Step, st.lists(names, max_size=4).map(tuple),
                  st.lists(st.integers(0, 2), max_size=4).map(tuple), st.integers(0, 15),
                  st.floats(), st.floats(), vectors)
steppeds = st.builds(Stepped, st.floats(), st.booleans(), st.floats(), vectors)
#: Equal to the default limits but not them: decode_batch then takes the strict path only.
STRICT = Limits()


@SETTINGS
@given(st.one_of(steps, steppeds))
def test_prepared_bytes_are_the_strict_bytes_and_decode_back(msg):
    data = encode_batch([msg])
    assert data == b"\x91" + encode(msg)
    first = decode_batch(data)                  # strict (a Step's layout is learnt here)
    again = decode_batch(data)                  # prepared
    assert_identical(first, [msg])
    assert_identical(again, [msg])
    assert_identical(decode_batch(data, limits=STRICT), [msg])


def test_a_stepped_message_is_the_encoded_stepped():
    out = [1.5, -0.0, float("nan"), 3.0]
    assert prepared.stepped_message(0.25, True, float("inf"), out) == \
        encode(Stepped(0.25, True, float("inf"), np.array(out)))


@SETTINGS
@given(steppeds)
def test_a_stepped_form_writes_the_encoded_stepped(msg):
    out = [float(x) for x in msg.outputs]
    form = prepared.SteppedForm(len(out))
    assert form.write(msg.t_reached, msg.event, msg.next_event, out) == encode_batch([msg])


@SETTINGS
@given(steps, st.floats(), st.floats(), st.data())
def test_a_step_form_reads_every_step_of_its_layout(msg, t, h, data):
    """A form learnt from one Step reads another of the same layout (new t, h and values)
    exactly, and refuses the bytes of any other layout or length."""
    decode_batch(encode_batch([msg]))
    form = prepared.step_form(encode_batch([msg]), 2**28)
    assert form is not None
    assert form.fields == (msg.inputs, msg.orders, msg.mode)
    values = data.draw(hnp.arrays(np.float64, msg.data.shape))
    other = encode_batch([Step(msg.inputs, msg.orders, msg.mode, t, h, values)])
    got = form.read(other)
    assert got is not None
    assert struct.pack("<dd", *got[:2]) == struct.pack("<dd", t, h)
    assert struct.pack(f"<{len(got[2])}d", *got[2]) == values.tobytes()
    longer = encode_batch([Step(msg.inputs, msg.orders, msg.mode, t, h,
                                np.append(values, 1.0))])
    assert form.read(longer) is None
    assert form.read(encode_batch([Step(msg.inputs + ("x",), msg.orders, msg.mode, t, h,
                                        values)])) is None


@SETTINGS
@given(st.one_of(steps, steppeds), st.data())
def test_altered_bytes_decode_as_the_strict_decoder_says(msg, data):
    """Flip, cut or extend the bytes of a known layout: the prepared path answers exactly
    what the strict decoder answers, or leaves it to it (a CodecError, never anything
    else)."""
    raw = encode_batch([msg])
    decode_batch(raw)
    buf = bytearray(raw)
    how = data.draw(st.sampled_from(["flip", "cut", "extend"]))
    if how == "flip" and buf:
        i = data.draw(st.integers(0, len(buf) - 1))
        buf[i] ^= data.draw(st.integers(1, 255))
    elif how == "cut":
        del buf[data.draw(st.integers(0, len(buf) - 1)):]
    else:
        buf += data.draw(st.binary(min_size=1, max_size=9))
    altered = bytes(buf)
    try:
        strict = decode_batch(altered, limits=STRICT)
    except CodecError:
        strict = None
    try:
        fast = decode_batch(altered)
    except CodecError:
        fast = None
    if strict is None:
        assert fast is None
    else:
        assert_identical(fast, strict)
    if prepared.step_form(altered, 2**28) is not None:
        assert strict is not None and type(strict[0]) is Step
    form = prepared.step_form(raw, 2**28)
    read = form.read(altered) if form is not None else None
    if read is not None:
        # What a server's fast lane steps is what the strict decoder reads.
        assert strict is not None and type(strict[0]) is Step
        assert (strict[0].inputs, strict[0].orders, strict[0].mode) == form.fields
        assert struct.pack("<dd", *read[:2]) == struct.pack("<dd", strict[0].t, strict[0].h)
        assert struct.pack(f"<{len(read[2])}d", *read[2]) == strict[0].data.tobytes()


def test_layouts_are_bounded():
    for i in range(prepared.MAX_LAYOUTS * 2):
        msg = Step((f"in{i}",), (0,), 0, 0.0, 0.1, np.zeros(1))
        decode_batch(encode_batch([msg]))
    assert prepared.step_form(encode_batch([msg]), 2**28) is not None


@pytest.mark.parametrize("n", [0, 1, 30, 8000])
def test_vectors_of_every_ext_header_size(n):
    msg = Stepped(1.0, False, 2.0, np.arange(float(n)))
    data = encode_batch([msg])
    assert data == b"\x91" + encode(msg)
    assert_identical(decode_batch(data), [msg])


@SETTINGS
@given(steps)
def test_a_step_writer_writes_the_encoded_step(msg):
    """What a master's lane sends is the strict encoder's bytes (values-only layouts, and
    any other the writer is given)."""
    try:
        w = prepared.StepWriter(msg.inputs, msg.orders, msg.mode, msg.data.shape[0])
    except CodecError:
        with pytest.raises(CodecError):
            encode_batch([msg])
        return
    got = b"".join((w.head, prepared.pack_times(msg.t, msg.h), w.tail, msg.data))
    assert got == encode_batch([msg])


@SETTINGS
@given(steppeds, st.data())
def test_a_stepped_reader_reads_what_the_strict_decoder_reads(msg, data):
    raw = encode_batch([msg])
    reader = prepared.SteppedReader(msg.outputs.shape[0])
    t, event, nxt, out = reader.read(raw)
    assert_identical([Stepped(t, event, nxt, out)], [msg])
    assert not out.flags.writeable
    buf = bytearray(raw)
    i = data.draw(st.integers(0, len(buf) - 1))
    buf[i] ^= data.draw(st.integers(1, 255))
    altered = bytes(buf)
    got = reader.read(altered)
    if got is not None:
        (strict,) = decode_batch(altered, limits=STRICT)
        assert_identical([Stepped(*got)], [strict])
    assert prepared.SteppedReader(msg.outputs.shape[0] + 1).read(raw) is None


# -- batches of several Steps (a unit's step, then a refresh of a part of its inputs) --------

@SETTINGS
@given(st.lists(steps, min_size=2, max_size=4))
def test_a_steps_writer_writes_the_encoded_batch(msgs):
    try:
        w = prepared.StepsWriter([(m.inputs, m.orders, m.mode, m.data.shape[0])
                                  for m in msgs])
    except CodecError:
        with pytest.raises(CodecError):
            encode_batch(msgs)
        return
    assert w.write([(m.t, m.h, m.data) for m in msgs]) == encode_batch(msgs)


@SETTINGS
@given(st.lists(steps, min_size=2, max_size=4), st.data())
def test_a_steps_form_reads_what_the_strict_decoder_reads(msgs, data):
    """A form learnt from one batch of Steps reads every batch of those layouts (new
    times and values) as the strict decoder does, and refuses altered bytes it cannot
    read as the strict decoder does."""
    try:
        raw = encode_batch(msgs)
    except CodecError:
        return
    form = prepared.steps_form(raw, 2**28)
    assert form is not None
    others = [Step(m.inputs, m.orders, m.mode, data.draw(st.floats()), data.draw(st.floats()),
                   data.draw(hnp.arrays(np.float64, m.data.shape))) for m in msgs]
    got = form.read(encode_batch(others))
    assert got is not None
    for (t, h, mode, inputs, orders, values), m in zip(got, others):
        assert (inputs, orders, mode) == (m.inputs, m.orders, m.mode)
        assert struct.pack("<dd", t, h) == struct.pack("<dd", m.t, m.h)
        assert struct.pack(f"<{len(values)}d", *values) == m.data.tobytes()
    buf = bytearray(raw)
    i = data.draw(st.integers(0, len(buf) - 1))
    buf[i] ^= data.draw(st.integers(1, 255))
    read = form.read(bytes(buf))
    if read is not None:
        strict = decode_batch(bytes(buf), limits=STRICT)
        assert len(strict) == len(read)
        for (t, h, mode, inputs, orders, values), m in zip(read, strict):
            assert type(m) is Step and (inputs, orders, mode) == (m.inputs, m.orders, m.mode)
            assert struct.pack(f"<dd{len(values)}d", t, h, *values) == \
                struct.pack("<dd", m.t, m.h) + m.data.tobytes()
    assert prepared.steps_form(encode_batch(msgs[:1]), 2**28) is None   # a batch of one


@SETTINGS
@given(st.lists(steppeds, min_size=2, max_size=4), st.data())
def test_a_steppeds_reader_reads_what_the_strict_decoder_reads(msgs, data):
    raw = encode_batch(msgs)
    reader = prepared.SteppedsReader([m.outputs.shape[0] for m in msgs])
    got = reader.read(raw)
    assert_identical([Stepped(*g) for g in got], msgs)
    assert b"".join((bytes([0x90 | len(msgs)]),
                     *(prepared.stepped_message(m.t_reached, m.event, m.next_event,
                                                [float(x) for x in m.outputs])
                       for m in msgs))) == raw
    buf = bytearray(raw)
    i = data.draw(st.integers(0, len(buf) - 1))
    buf[i] ^= data.draw(st.integers(1, 255))
    altered = reader.read(bytes(buf))
    if altered is not None:
        assert_identical([Stepped(*g) for g in altered], decode_batch(bytes(buf), limits=STRICT))
    assert prepared.SteppedsReader([m.outputs.shape[0] + 1 for m in msgs]).read(raw) is None
