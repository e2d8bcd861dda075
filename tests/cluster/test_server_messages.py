"""A served unit survives the messages that used to kill it: a batch nested a thousand deep,
a tag of megabytes, a DoStep that would run for minutes — each answered with a short error,
and the unit serves on."""

import time

import msgpack
import numpy as np

from cluster.codec import decode_batch, encode_batch
from cluster.dataplane import answer
from cosim import SimulationConfig
from cosim.master import protocol as P
from cosim.master.local_unit import LocalUnit
from cosim.model.evaluate import evaluate
from tests.cluster.scenarios import three_units


def served():
    model = three_units()
    evaluate(model)
    return {"a": LocalUnit(model["a"], SimulationConfig(dt=0.002, t_end=1.0, solver="RK4"))}


def ask(units, payload: bytes):
    (reply,) = answer(units, [b"a", payload])
    return decode_batch(reply)


def still_serves(units):
    assert ask(units, encode_batch([P.Initialize(0.0), P.Describe()]))[1].name == "a"


def test_a_batch_nested_a_thousand_deep_gets_a_short_error():
    units = served()
    deep = []
    for _ in range(1000):
        deep = [deep]
    for payload in (msgpack.packb([deep]), msgpack.packb([[deep, 1]]),
                    msgpack.packb([[7, deep]])):
        (err,) = ask(units, payload)
        assert isinstance(err, P.ErrorReply) and len(err.message) < 500
    still_serves(units)


def test_a_huge_tag_is_not_repeated_in_the_error():
    units = served()
    (err,) = ask(units, msgpack.packb([["\0" * (8 * 2**20), 1]]))
    assert isinstance(err, P.ErrorReply) and "unknown message tag" in err.message
    assert len(err.message) < 500
    still_serves(units)


def test_a_do_step_of_minutes_is_refused_at_once_naming_the_limit():
    units = served()
    start = time.monotonic()
    replies = ask(units, encode_batch([P.Initialize(0.0), P.DoStep(0.0, 1e5)]))
    assert time.monotonic() - start < 30            # refused, not run
    err = replies[1]
    assert isinstance(err, P.ErrorReply)
    assert "50000000 steps" in err.message and "LocalUnit.max_ticks" in err.message
    ok = ask(units, encode_batch([P.SetInputs({"u": np.ones(1)}), P.DoStep(0.0, 0.01)]))
    assert isinstance(ok[1], P.StepDone)


def _nested():
    from hypothesis import strategies as st
    leaves = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(),
                       st.text(max_size=20), st.binary(max_size=20))
    return st.tuples(st.integers(1, 3000), leaves, st.integers(0, 30))


def test_the_decoder_raises_only_codec_errors_on_deep_or_odd_nesting():
    from hypothesis import given, settings

    from cosim.errors import CodecError

    @settings(max_examples=300, deadline=None)
    @given(_nested())
    def check(spec):
        depth, leaf, tag = spec
        obj = leaf
        for i in range(depth):
            obj = [tag, obj] if i % 3 == 0 else [obj]
        try:
            data = msgpack.packb([obj])
        except (ValueError, TypeError, OverflowError):
            return                               # msgpack itself refuses to pack it
        try:
            decode_batch(data)
        except CodecError:
            pass
    check()
