"""A unit server's fast lane (:class:`cluster.lane.FusedLane`) answers a pair of several
Steps — a unit of a coupling through a held output: its step (keeping or rolling back its
state), then a refresh setting a part of its inputs at T+H — with the bytes the ordinary way
gives, bit for bit, and leaves the unit in the same state and with the same logs."""

from __future__ import annotations

import numpy as np
import pytest

from cluster.codec import DEFAULT_MAX_SIZE, decode_batch, encode_batch
from cluster.dataplane import answer
from cluster.lane import FusedLane
from cosim.master import protocol as P
from tests.cosim.test_packed_steps import bits, unit

KEY = b"plant"


def rounds(rng, macro_steps=25):
    """Batches of a held coupling's iterations: per macro step 1-4 iterations, each the
    step (kept, then rolled back to) and a refresh of input ``w`` at T+H; now and then a
    single Step, a refresh naming an input the unit lacks (an error for that part), or a
    step the unit refuses (a time it is not at)."""
    t, h = 0.0, 0.002
    for _ in range(macro_steps):
        for it in range(int(rng.integers(1, 5))):
            hold = P.STEP_KEEP if it == 0 else P.STEP_ROLLBACK
            orders = (0, 0) if rng.random() < 0.7 else (1, 0)
            step = P.Step(("u", "w"), orders, hold, t, h, rng.normal(size=2 + sum(orders)))
            refresh = P.Step(("w",), (0,), P.STEP_REFRESH, round(t + h, 12), 0.0,
                             rng.normal(size=1))
            odd = rng.random()
            if odd < 0.05:
                refresh = P.Step(("nope",), (0,), P.STEP_REFRESH, round(t + h, 12), 0.0,
                                 np.ones(1))
            elif odd < 0.08:
                step = P.Step(("u", "w"), (0, 0), hold, t + 1.0, h, np.ones(2))
            yield [step, refresh]
        if rng.random() < 0.2:
            yield [P.Step(("u", "w"), (0, 0), P.STEP_REFRESH, round(t + h, 12), h,
                          rng.normal(size=2))]
            t = round(t + h, 12)
        t = round(t + h, 12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_pair_of_several_steps_is_answered_as_the_ordinary_way_answers_it(seed):
    a, b = unit(), unit()
    lane = FusedLane({"plant": b}, DEFAULT_MAX_SIZE)
    served = 0
    for reqs in rounds(np.random.default_rng(seed)):
        batch = encode_batch(reqs)
        (ref,) = answer({"plant": a}, [KEY, batch])
        got = lane.one(KEY, batch)
        if got is None:
            fast = lane.replies([KEY, batch], 0)
            got = fast[0] if fast is not None else answer({"plant": b}, [KEY, batch])[0]
        else:
            served += len(reqs) > 1
        assert got == ref, decode_batch(ref)
    assert served > 40                       # the lane served the pairs (after learning)
    for req in (P.GetOutputs(), P.GetState()):
        assert a.handle(req) == b.handle(req)
    logs_a, logs_b = a.handle(P.CollectLogs()), b.handle(P.CollectLogs())
    assert logs_a.signals.keys() == logs_b.signals.keys()
    for key, (t, v) in logs_a.signals.items():
        assert bits(t) == bits(logs_b.signals[key][0]) and bits(v) == bits(logs_b.signals[key][1])
