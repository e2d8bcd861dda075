"""Fused steps on the generated path (LocalUnit.step_packed, a unit server's fast lane) give
what the ordinary fused Step gives, bit for bit: outputs, logs and state."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from blocks import FirstOrderLag, Gain, Sum, UnitDelay
from cosim import Inport, Model, Outport, SimulationConfig, Subsystem
from cosim.master import protocol as P
from cosim.master.local_unit import LocalUnit
from cosim.model.evaluate import evaluate
from cosim.run.atomic import inner_config


def unit(solver="RK4"):
    """Two inputs (one through a lag, continuous), two outputs, logged."""
    s = Subsystem("plant", atomic=True, dt=0.001, solver=solver)
    s.add(Inport("u"), Inport("w"), FirstOrderLag("lag", tau=0.05), Gain("g", 2.0),
          Sum("s", "++"), UnitDelay("d", 0.5), Outport("y"), Outport("z"))
    s.connect("u.out", "lag.in")
    s.connect("lag.out", "s.in1")
    s.connect("w.out", "g.in")
    s.connect("g.out", "s.in2")
    s.connect("s.out", "y.in")
    s.connect("s.out", "d.in")
    s.connect("d.out", "z.in")
    m = Model("m")
    m.add(s)
    evaluate(m)
    u = LocalUnit(s, inner_config(s, SimulationConfig(dt=0.001, t_end=0.0, log=["*"])))
    u.handle(P.Initialize(0.0))
    return u


def bits(x) -> bytes:
    return np.asarray(x, dtype=np.float64).tobytes()


def steps(rng, n=60, interned=False):
    """Random fused steps; ``interned``: every layout's tuples are the same objects each
    time (as a server's fast lane passes them), values-only layouts in runs."""
    t = 0.0
    layouts: dict = {}
    inputs = ("u", "w")
    for i in range(n):
        h = 0.001 * int(rng.integers(1, 5))
        if interned and i % 10 < 6:
            orders = (0, 0) if i % 20 < 10 else (0,)
        else:
            orders = tuple(int(o) for o in rng.integers(0, 3, size=2))
        names = inputs[:len(orders)] if interned else ("u", "w")
        if interned:
            names, orders = layouts.setdefault((names, orders), (names, orders))
        kind = int(rng.integers(0, 4))
        if kind == 3:                       # a refresh at t only, for new values
            zeros = layouts.setdefault((names, "zeros"), (0,) * len(names))
            yield P.Step(names, zeros, P.STEP_REFRESH, t, 0.0, rng.normal(size=len(names)))
            continue
        mode = (0, P.STEP_REFRESH, P.STEP_RESET)[kind]
        size = len(names) + sum(orders) + (len(names) if mode == P.STEP_RESET else 0)
        yield P.Step(names, orders, mode, t, h, rng.normal(size=size))
        t = round(t + h, 12)


def drive(requests, settle_every: int, ordinary=lambda: False) -> int:
    """Serve ``requests`` to one unit the ordinary way and to another through
    ``step_packed`` (the ordinary way where it declines, or where ``ordinary()`` says so),
    every ``settle_every``-th followed by another request that settles the unit; assert
    replies, logs and state equal bit for bit. Returns how many were served packed."""
    a, b = unit(), unit()
    packed = 0
    for i, req in enumerate(requests):
        ref = a.handle(req)
        assert type(ref) is P.Stepped, ref
        # (the values as a server's fast lane reads them: Python floats)
        got = None if ordinary() else b.step_packed(
            req.t, req.h, req.mode, req.inputs, req.orders, tuple(req.data.tolist()))
        if got is None:                      # not (yet) on the generated path
            got = b.handle(req)
            got = (got.t_reached, got.event, got.next_event, list(got.outputs))
        else:
            packed += 1
        assert struct.pack("<d?d", *got[:3]) == struct.pack(
            "<d?d", ref.t_reached, ref.event, ref.next_event)
        assert bits(got[3]) == bits(ref.outputs)
        if i % settle_every == settle_every - 1:
            assert a.handle(P.GetOutputs()) == b.handle(P.GetOutputs())
    logs_a, logs_b = a.handle(P.CollectLogs()), b.handle(P.CollectLogs())
    assert logs_a.signals.keys() == logs_b.signals.keys()
    for key, (t, v) in logs_a.signals.items():
        assert bits(t) == bits(logs_b.signals[key][0]) and bits(v) == bits(logs_b.signals[key][1])
    assert a.handle(P.GetState()) == b.handle(P.GetState())
    return packed


@pytest.mark.parametrize("interned", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
def test_packed_steps_are_the_fused_steps_bit_for_bit(seed, interned):
    assert drive(steps(np.random.default_rng(seed), interned=interned), 17) > 30


def test_a_step_that_does_not_fit_is_left_to_the_ordinary_way():
    b = unit()
    b.handle(P.Step(("u",), (0,), 0, 0.0, 0.001, np.ones(1)))   # onto the fast path
    assert b.step_packed(0.5, 0.001, False, ("u",), (0,), (1.0,)) is None    # wrong time
    assert b.step_packed(0.001, 0.0015, False, ("u",), (0,), (1.0,)) is None  # not a multiple
    assert b.step_packed(0.001, 0.001, False, ("nope",), (0,), (1.0,)) is None
    assert b.step_packed(0.001, 0.001, False, ("u",), (0,), (1.0, 2.0)) is None
    assert b.step_packed(0.001, 0.001, False, ("u",), (3,), (1.0,) * 4) is None
    assert b.handle(P.Step(("u",), (0,), 0, 0.5, 0.001, np.ones(1))).kind is \
        P.ErrorKind.PROTOCOL
    assert b.step_packed(0.001, 0.001, False, ("u",), (0,), (1.0,)) is not None


def test_a_step_over_the_tick_limit_is_refused_as_the_ordinary_step_refuses_it():
    a, b = unit(), unit()
    for u in (a, b):
        u.handle(P.Step(("u",), (0,), 0, 0.0, 0.001, np.ones(1)))
    big = LocalUnit.max_ticks
    try:
        LocalUnit.max_ticks = 2
        ref = a.handle(P.Step(("u",), (0,), 0, 0.001, 0.003, np.ones(1)))
        assert b.step_packed(0.001, 0.003, False, ("u",), (0,), (1.0,)) is None
        assert b.handle(P.Step(("u",), (0,), 0, 0.001, 0.003, np.ones(1))) == ref
    finally:
        LocalUnit.max_ticks = big


def iterated_steps(rng, n=40):
    """Fused steps as an iterated coupling sends them: each macro step's first attempt
    keeps the state (``STEP_KEEP``), the next go back to it (``STEP_ROLLBACK``, some with
    ``STEP_KEEP`` again, as a retried adaptive step), values and derivatives changing."""
    t = 0.0
    for _ in range(n):
        h = 0.001 * int(rng.integers(1, 4))
        for it in range(int(rng.integers(1, 5))):
            hold = P.STEP_KEEP if it == 0 else (
                P.STEP_ROLLBACK | (P.STEP_KEEP if rng.random() < 0.3 else 0))
            orders = tuple(int(o) for o in rng.integers(0, 2, size=2)) if it else (0, 0)
            mode = (0, P.STEP_REFRESH, P.STEP_RESET)[int(rng.integers(0, 3))]
            size = 2 + sum(orders) + (2 if mode == P.STEP_RESET else 0)
            yield P.Step(("u", "w"), orders, mode | hold, t, h, rng.normal(size=size))
        t = round(t + h, 12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_kept_and_rolled_back_steps_are_the_fused_steps_bit_for_bit(seed):
    """A unit keeps and rolls back its state on the generated path (a unit server's fast
    lane serving an iterated coupling), and a state kept there is the one a rollback served
    the ordinary way goes back to (another request settled the unit in between, or the step
    went the ordinary way)."""
    rng = np.random.default_rng(seed)
    assert drive(iterated_steps(np.random.default_rng(seed)), 7,
                 lambda: rng.random() < 0.15) > 40


def test_a_rollback_without_a_kept_state_is_refused_as_the_ordinary_step_refuses_it():
    a, b = unit(), unit()
    for u in (a, b):
        u.handle(P.Step(("u",), (0,), 0, 0.0, 0.001, np.ones(1)))
    assert b.step_packed(0.001, 0.001, P.STEP_ROLLBACK, ("u",), (0,), (1.0,)) is None
    ref = a.handle(P.Step(("u",), (0,), P.STEP_ROLLBACK, 0.001, 0.001, np.ones(1)))
    assert isinstance(ref, P.ErrorReply) and "no state was kept" in ref.message
    assert b.handle(P.Step(("u",), (0,), P.STEP_ROLLBACK, 0.001, 0.001, np.ones(1))) == ref


def test_a_keep_never_rolled_back_to_is_settled_after_a_bounded_number_of_steps():
    """Plain steps after a keep are remembered (to replay when the unit settles) only up to
    SINCE_MAX: the next one goes the ordinary way, and a later rollback still goes back to
    the kept state, as the ordinary fused Step does."""
    from cosim.master.packed import SINCE_MAX
    n = SINCE_MAX + 5
    reqs = [P.Step(("u", "w"), (0, 0), P.STEP_KEEP, 0.0, 0.001, np.array([1.0, 2.0]))]
    reqs += [P.Step(("u", "w"), (0, 0), P.STEP_REFRESH, round(0.001 * i, 12), 0.001,
                    np.array([1.0 + i, 2.0 - i])) for i in range(1, n)]
    reqs += [P.Step(("u", "w"), (0, 1), P.STEP_ROLLBACK, 0.0, 0.002,
                    np.array([3.0, 1.0, 0.5]))]
    # every step packed but the one past the bound and the rollback (to the state the
    # unit now holds, its snapshot): the ordinary way, equal bit for bit
    assert drive(reqs, 10 ** 6) == len(reqs) - 2


def test_an_input_a_rollback_does_not_name_keeps_its_latest_value():
    """A Step may name some inputs only (the others keep their values): after a rollback,
    an input it does not name keeps the value (and derivatives) the latest Step gave it, as
    with the ordinary fused Step (a unit's state does not hold its inputs); also when the
    unit settles in between."""
    for settle_every, packed in ((10 ** 6, 5), (2, 2)):
        reqs = [P.Step(("u", "w"), (1, 1), 0, 0.0, 0.001, np.array([1.0, 0.5, 2.0, -3.0])),
                P.Step(("u", "w"), (0, 0), P.STEP_KEEP, 0.001, 0.002, np.array([4.0, 5.0])),
                P.Step(("u",), (0,), P.STEP_ROLLBACK | P.STEP_REFRESH, 0.001, 0.002,
                       np.array([6.0])),
                P.Step(("u", "w"), (0, 0), P.STEP_ROLLBACK, 0.001, 0.002,
                       np.array([7.0, 8.0])),
                P.Step(("u",), (0,), P.STEP_ROLLBACK, 0.001, 0.002, np.array([9.0]))]
        assert drive(reqs, settle_every) >= packed
