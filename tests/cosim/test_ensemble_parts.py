"""The parts an ensemble is set up from (issue 36), each against its outside oracle: the
members' parameter values evaluated at once against each member's own workspace evaluation,
members' kernels lifted by the reference's template against :func:`lift`, a lookup's
cells kept between evaluations (a few members found alone) against cells found afresh every
time, the members' logs kept member-major against the rows written."""

import math
import struct

import numpy as np
import pytest

from cosim.fastpath.ensemble_ops import Cells, Chain
from cosim.fastpath.ensemble_values import member_values, varying_names
from cosim.fastpath.params import lift, lift_like
from cosim.model.evaluate import parameter_value
from cosim.model.expr import Workspace

#: Members' values of the parameters ``a`` and ``b``: signed zeros, a subnormal, large
#: and small magnitudes, a negative.
A = [0.0, -0.0, 5e-324, 1.5, -2.25, 1e300, 3.0e-8, 7.0]
B = [2.0, 3.0, -1.0, 0.1, 1e-300, 4.0, -0.0, 1.0 / 3.0]


def _same(x, y) -> bool:
    """Equal as a member's own evaluation gives it: types, float bits, array bits."""
    if type(x) is not type(y):
        return False
    if isinstance(x, float):
        return struct.pack("<d", x) == struct.pack("<d", y)
    if isinstance(x, np.ndarray):
        return x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()
    if isinstance(x, (list, tuple)):
        return len(x) == len(y) and all(_same(a, b) for a, b in zip(x, y))
    if isinstance(x, dict):
        return x.keys() == y.keys() and all(_same(x[k], y[k]) for k in x)
    return x == y


def _own(spec: dict, params: dict, over: dict) -> dict:
    ws = Workspace({**params, **over}, path="m")
    return {k: parameter_value(v, ws, f"m/b.{k}") for k, v in spec.items()}


PARAMS = {"a": 1.0, "b": 2.0, "n": 3, "name": "x"}


@pytest.mark.parametrize("spec", [
    {"k": "=a"}, {"k": "=-a"}, {"k": "=+b"}, {"k": "=a * 100"}, {"k": "=(a + 1) * (b - 2)"},
    {"k": "=a * b - a / 3"}, {"k": "=pi * a + e"}, {"k": "=2 * n + a"}, {"k": "=n * 2"},
    {"table": "=[-0.6 * a, -0.5 * a, -a, 0.0, a, 0.5 * a, 0.6 * a]"},
    {"table": "=[1, 2, 3]", "k": 4.0}, {"table": "=(a, b, 1)"},
    {"bp": [-1.0, "=b", 1.0], "table": [1, 2, 3]}, {"d": {"x": "=a", "y": 2}},
], ids=lambda s: repr(s))
def test_member_values_are_each_members_own_evaluation(spec):
    overrides = [{"a": a, "b": b} for a, b in zip(A, B)]
    got = member_values(spec, varying_names(PARAMS, overrides), len(overrides))
    assert got is not None
    for over, mine in zip(overrides, got, strict=True):
        assert _same(mine, _own(spec, PARAMS, over)), (spec, over, mine)


@pytest.mark.parametrize("spec, overrides", [
    ({"k": "=a / b"}, [{"b": 1.0}, {"b": 0.0}]),                 # a division by zero
    ({"k": "=a * b"}, [{"a": 1e300, "b": 1e10}, {"a": 1.0, "b": 2.0}]),     # an overflow
    ({"k": "=a + 1"}, [{"a": math.nan}, {"a": 1.0}]),            # a NaN: the member's own
    ({"k": "=a ** 2"}, [{"a": 1.0}, {"a": 2.0}]),                # outside: each its own
    ({"k": "=sin(a)"}, [{"a": 1.0}, {"a": 2.0}]),
    ({"k": "=n + 1"}, [{"n": 1}, {"n": 2}]),                     # ints that differ
    ({"k": "=a"}, [{"a": 1.0}, {"a": 2}]),                       # an int among floats
    ({"k": "=[a, [b]]"}, [{"a": 1.0}, {"a": 2.0}]),              # a nested list
    ({"k": "=c"}, [{"a": 1.0}, {"a": 2.0}]),                     # an unknown name
    ({"k": "=name"}, [{"a": 1.0}, {"a": 2.0}]),                  # a string
])
def test_what_is_not_evaluated_at_once_is_left_to_each_member(spec, overrides):
    names = varying_names(PARAMS, overrides)
    assert names is None or member_values(spec, names, len(overrides)) is None


def test_an_override_of_another_type_leaves_every_member_to_its_workspace():
    assert varying_names(PARAMS, [{"a": 1.0}, {"a": "=b"}]) is None


def _blocks(values: dict):
    from blocks import DeadZone, FirstOrderLag, Gain, Lookup1D, RateLimiter, Saturation
    a, b = values["a"], values["b"]
    return [Gain("g", a), Saturation("s", lower=-abs(a) - 1.0, upper=abs(b) + 1.0),
            DeadZone("d", start=-abs(a), end=abs(b)), RateLimiter("r", rising=abs(a) + 0.5,
                                                                  falling=abs(b) + 0.5),
            FirstOrderLag("lag", tau=abs(a) + 0.1, gain=b),
            Lookup1D("l", [-1.0, 0.0, 0.5 + abs(a) / (1.0 + abs(a)), 2.0], [a, b, -a, 0.5 * b])]


@pytest.mark.parametrize("index", range(6))
def test_a_member_kernel_lifted_by_the_reference_template_is_lift(index):
    """lift_like gives lift's kernel wherever the literals stand where the reference's
    parameters do, and None where the spelling differs (a sign, an infinity) or there is
    nothing to lift (lift then gives the kernel itself)."""
    rng = np.random.default_rng(index)
    ref = lift(_blocks({"a": 1.25, "b": 0.75})[index].kernel())
    values = [{"a": float(a), "b": float(b)} for a, b in rng.uniform(0.01, 9.0, (20, 2))]
    values += [{"a": 5e-324, "b": 1e300}, {"a": 0.0, "b": 3.0}]
    for v in values:
        kern = _blocks(v)[index].kernel()
        like, want = lift_like(kern, ref), lift(kern)
        if like is None:
            # No literal to lift (its values are named parameters), or another spelling.
            assert want is kern or want.outputs != ref.outputs or want.state != ref.state \
                or want.derivatives != ref.derivatives, v
            continue
        assert (like.outputs, like.state, like.derivatives, like.cstate, like.held,
                like.surfaces) == (want.outputs, want.state, want.derivatives, want.cstate,
                                   want.held, want.surfaces)
        assert list(like.params) == list(want.params)
        assert all(_same(like.params[k], want.params[k]) for k in want.params), v
    negative = _blocks({"a": -1.25, "b": 0.75})[index].kernel()
    if lift(negative).outputs != ref.outputs:
        assert lift_like(negative, ref) is None


def _step_function_check(cells: Cells, lefts) -> bool:
    """What the translated step function asks before it calls a lookup's Cells: whether
    every member's input is still in its cell (see ensemble.py's _piecewise)."""
    inside = True
    for a, left in enumerate(lefts):
        cells.less(left, cells.bounds[a, 0], cells.pairs[a, 0])
        cells.less(left, cells.bounds[a, 1], cells.pairs[a, 1])
        inside &= cells.pair_bytes[a]() == cells.inside
    return inside


@pytest.mark.parametrize("gather_max", [None, 0])
@pytest.mark.parametrize("axes", [1, 2])
def test_cells_kept_between_evaluations_are_the_cells_found_afresh(axes, gather_max,
                                                                   monkeypatch):
    """A lookup's Cells asked as the step function asks (found again only when some
    member left its cell: those alone while they are few) hold, after every evaluation,
    the constants, masks and bounds of a Cells that finds every member's cell afresh:
    inputs that stay, creep across edges, land on edges, jump, and are NaN or infinite;
    with the members' tables in one array, and slot by slot (a large table)."""
    from cosim.fastpath import ensemble_ops
    if gather_max is not None:
        monkeypatch.setattr(ensemble_ops, "GATHER_MAX", gather_max)
    n, rng = 64, np.random.default_rng(7)
    thresholds = [-1.0, -0.05, -0.01, 0.0, 0.01, 0.05, 1.0]
    ops = ["_lt"] * 6 + ["_ge"]

    def make():
        chains = [Chain(ops, thresholds, n) for _ in range(axes)]
        branches = (len(ops) + 1) ** axes
        values = [[rng_tables[s][b] for b in range(branches)] for s in range(3)]
        masks = [[b % 3 == 0 for b in range(branches)]]
        return Cells(chains, values, masks, n)
    rng_tables = [[rng.normal(size=n) if b % 2 else float(b) for b in range(8 ** axes)]
                  for _ in range(3)]
    kept = make()
    assert kept.less is np.less                  # shared thresholds: cells are kept
    lefts = [rng.normal(scale=0.03, size=n) for _ in range(axes)]
    found_again = 0
    for step in range(400):
        for left in lefts:
            left += rng.normal(scale=2e-5, size=n)
            if step % 50 == 7:
                left[rng.integers(n)] = rng.choice(thresholds)      # on an edge
            if step % 70 == 13:
                left[rng.integers(n)] = rng.choice([math.nan, math.inf, -math.inf, 5.0])
            if step % 70 == 14:
                left[np.isnan(left) | np.isinf(left)] = 0.0
        if not _step_function_check(kept, lefts):
            kept(*lefts)
            found_again += 1
        fresh = make()
        fresh(*lefts)
        assert kept.vals.tobytes() == fresh.vals.tobytes(), step
        assert all(a.tobytes() == b.tobytes() for a, b in zip(kept.masks, fresh.masks))
        assert kept.taken == fresh.taken
    assert 0 < found_again < 400


@pytest.mark.parametrize("thresholds", [
    [-1.0, -0.05, -0.01, 0.0, 0.01, 0.05, 1.0], [0.0], [-math.inf, -2.5, 3.0, math.inf]])
def test_a_members_cell_found_alone_is_the_cell_found_with_the_others(thresholds):
    """The cell of one member's input on Python floats (found so when a few members left
    their cells) is the one the whole member vector's search gives: on and next to every
    edge, at signed zeros, infinities and NaN."""
    chain = Chain(["_lt"] * len(thresholds), thresholds, 1)
    assert chain.lut is not None
    xs = [math.nan, math.inf, -math.inf, 0.0, -0.0, 5e-324, -5e-324, 1e300, -1e300]
    for v in thresholds:
        xs += [v, math.nextafter(v, math.inf), math.nextafter(v, -math.inf)]
    found = chain(np.array(xs), None)
    assert [chain.cell_of(x) for x in xs] == found.tolist()


@pytest.mark.parametrize("rows, n", [(1, 5), (63, 5), (64, 5), (65, 5), (200, 5),
                                     (1100, 700)])
def test_member_logs_hold_each_members_rows_in_order(rows, n):
    """What the step function writes a row at a time into a task's blocks (and flushes
    after each block's last row), closed, is each member's column of the rows written,
    for every task and column: rows fewer than a block, a block exactly, and beyond; and
    logs large enough to be mapped on their own (MAPPED_FROM)."""
    from cosim.fastpath.ensemble_logs import BLOCK, MAPPED_FROM, MemberLogs
    rng = np.random.default_rng(3)
    assert (n * rows * 8 >= MAPPED_FROM) == (n == 700)
    columns = [[("a", 0), ("b", 1)], [("c", 0)]]
    written = {(task, col): rng.normal(size=(rows - task * rows // 2, n))
               for task, cols in enumerate(columns) for _, col in cols}
    logs = MemberLogs(columns, rows, n)
    counts = []
    for task, cols in enumerate(columns):
        count = rows - task * rows // 2
        for r in range(count):
            for _, col in cols:
                logs.blocks[task][col][r % BLOCK] = written[(task, col)][r]
            if r % BLOCK == BLOCK - 1:
                logs.flush(task, r)
        counts.append(count)
    logs.close(counts)
    for (task, col), values in written.items():
        kept = logs.full[task][col][:, :counts[task]]
        assert kept.tobytes() == np.ascontiguousarray(values.T).tobytes()


def test_the_step_size_is_made_an_array_once_where_it_is_assigned():
    """The translated Runge-Kutta step reads the step size ``h`` (a shared value, an
    operand of every stage) as a 0-d array made right after each assignment of ``h``,
    not one made per call."""
    import re

    from cosim import Simulator
    from cosim.fastpath.ensemble import translate
    from tests.cluster import sweep_models as sm
    sim = Simulator(sm.msd_friction(), sm.MSD_CONFIG)
    sim.initialize()
    tr = translate(sim.fast_path.source, {"_k36"}, sim.state.X.size)
    lines = tr.source.splitlines()
    assigned = [i for i, ln in enumerate(lines) if re.match(r"\s*h = ", ln)]
    assert assigned and "_arr(h)" not in "\n".join(
        ln for i, ln in enumerate(lines) if i - 1 not in assigned)
    assert all(lines[i + 1].strip() == "_a_h = _arr(h)" for i in assigned)
    assert tr.source.count("_a_h") > 2 * len(assigned)
