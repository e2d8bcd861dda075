"""Shared numerics against outside oracles: scipy's strong components, analytic Jacobians,
exact rational tick arithmetic."""

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from cosim.numerics.graph import (condensation_levels, cycle_through, is_cycle,
                                  strongly_connected_components)
from cosim.numerics.jacobian import (CENTRAL_REL_STEP, FORWARD_REL_STEP, NonFiniteJacobian,
                                     fd_jacobian)
from cosim.numerics.timegrid import (CLOCK_RTOL, EXCHANGE_RTOL, floor_ticks, nearest_tick,
                                     same_time, tick_time, ticks, time_tolerance)


# -- graphs ------------------------------------------------------------------------------------


def _random_graph(seed: int, n: int, density: float) -> list[set[int]]:
    rng = np.random.default_rng(seed)
    adj = rng.random((n, n)) < density
    return [set(np.flatnonzero(adj[v]).tolist()) for v in range(n)]


def _scipy_partition(succ: list[set[int]]) -> set[frozenset[int]]:
    n = len(succ)
    rows = [v for v in range(n) for _ in succ[v]]
    cols = [w for v in range(n) for w in succ[v]]
    graph = csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n))
    _, labels = connected_components(graph, directed=True, connection="strong")
    groups: dict[int, set[int]] = {}
    for v, lab in enumerate(labels):
        groups.setdefault(int(lab), set()).add(v)
    return {frozenset(g) for g in groups.values()}


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("n, density", [(1, 0.5), (8, 0.1), (30, 0.05), (60, 0.03)])
def test_components_match_scipy(seed, n, density):
    succ = _random_graph(seed, n, density)
    comps = strongly_connected_components(range(n), succ)
    assert {frozenset(c) for c in comps} == _scipy_partition(succ)
    assert sum(len(c) for c in comps) == n
    assert all(c == sorted(c) for c in comps)


@pytest.mark.parametrize("seed", range(12))
def test_components_come_in_reverse_topological_order(seed):
    succ = _random_graph(seed, 40, 0.04)
    comps = strongly_connected_components(range(40), succ)
    where = {v: c for c, comp in enumerate(comps) for v in comp}
    for v in range(40):
        for w in succ[v]:
            assert where[w] <= where[v]      # an edge never points to a later component


def test_components_independent_of_successor_iteration_order():
    names = ["motor", "ctrl", "battery", "load", "sensor"]
    edges = {"motor": ["battery", "sensor"], "ctrl": ["motor"], "battery": ["motor"],
             "load": [], "sensor": ["ctrl"]}
    as_lists = strongly_connected_components(names, edges)
    reversed_lists = strongly_connected_components(names, {v: w[::-1] for v, w in edges.items()})
    as_sets = strongly_connected_components(names, {v: set(w) for v, w in edges.items()})
    assert as_lists == reversed_lists == as_sets
    assert as_lists == [["motor", "ctrl", "battery", "sensor"], ["load"]]


def test_deep_chain_does_not_recurse():
    n = 20_000
    succ = [{v + 1} if v + 1 < n else set() for v in range(n)]
    comps = strongly_connected_components(range(n), succ)
    assert comps == [[v] for v in reversed(range(n))]


def test_cycle_and_self_loop():
    succ = [{1}, {2}, {0, 3}, {3}, set()]
    comps = strongly_connected_components(range(5), succ)
    loops = [c for c in comps if is_cycle(c, succ)]
    assert sorted(loops) == [[0, 1, 2], [3]]
    assert cycle_through([0, 1, 2], succ) == [0, 1, 2, 0]
    assert cycle_through([3], succ) == [3, 3]
    assert not is_cycle([4], succ)


def test_cycle_is_a_cycle_of_the_graph():
    succ = _random_graph(3, 30, 0.1)
    for comp in strongly_connected_components(range(30), succ):
        if is_cycle(comp, succ):
            cyc = cycle_through(comp, succ)
            assert cyc[0] == cyc[-1] == comp[0]
            assert all(b in succ[a] for a, b in zip(cyc, cyc[1:]))
            assert set(cyc) <= set(comp)


@pytest.mark.parametrize("seed", range(8))
def test_condensation_levels_against_longest_paths(seed):
    n = 40
    succ = _random_graph(seed, n, 0.05)
    comps = strongly_connected_components(range(n), succ)
    order, level = condensation_levels(range(n), comps, succ)
    assert sorted(order) == list(range(len(comps)))
    rank = {c: i for i, c in enumerate(order)}
    where = {v: c for c, comp in enumerate(comps) for v in comp}
    preds: dict[int, set[int]] = {c: set() for c in range(len(comps))}
    for v in range(n):
        for w in succ[v]:
            if where[v] != where[w]:
                assert rank[where[v]] < rank[where[w]]
                preds[where[w]].add(where[v])
    # Oracle: longest path into each component, by recursion over predecessors.
    memo: dict[int, int] = {}

    def longest(c):
        if c not in memo:
            memo[c] = max((longest(p) + 1 for p in preds[c]), default=0)
        return memo[c]

    assert level == [longest(c) for c in range(len(comps))]


def test_condensation_ties_go_by_node_order():
    succ = [set(), set(), {0}, set()]
    comps = strongly_connected_components(range(4), succ)
    order, level = condensation_levels(range(4), comps, succ)
    assert [comps[c][0] for c in order] == [1, 2, 0, 3]
    assert {comps[c][0]: level[c] for c in order} == {0: 1, 1: 0, 2: 0, 3: 0}


# -- Jacobians ---------------------------------------------------------------------------------


def _fun(v):
    return np.array([math.sin(v[0]) * v[1], math.exp(0.5 * v[1]), v[0] ** 2 - 3.0 * v[2],
                     v[0] * v[1] * v[2]])


def _jac(v):
    return np.array([[math.cos(v[0]) * v[1], math.sin(v[0]), 0.0],
                     [0.0, 0.5 * math.exp(0.5 * v[1]), 0.0],
                     [2.0 * v[0], 0.0, -3.0],
                     [v[1] * v[2], v[0] * v[2], v[0] * v[1]]])


X0 = np.array([0.7, -1.3, 2.5])


@pytest.mark.parametrize("represented", [True, False])
def test_forward_matches_analytic(represented):
    J = fd_jacobian(_fun, X0, rel=np.sqrt(np.finfo(float).eps), represented_step=represented)
    np.testing.assert_allclose(J, _jac(X0), rtol=0, atol=1e-6)


def test_central_matches_analytic_more_closely():
    J = fd_jacobian(_fun, X0, rel=CENTRAL_REL_STEP, central=True)
    assert J.shape == (4, 3)
    np.testing.assert_allclose(J, _jac(X0), rtol=0, atol=1e-9)


def test_forward_error_is_first_order_central_second():
    errs_f, errs_c = [], []
    hs = [1e-2, 1e-3]
    for h in hs:
        errs_f.append(np.max(np.abs(fd_jacobian(_fun, X0, rel=h) - _jac(X0))))
        errs_c.append(np.max(np.abs(fd_jacobian(_fun, X0, rel=h, central=True) - _jac(X0))))
    assert math.log10(errs_f[0] / errs_f[1]) == pytest.approx(1.0, abs=0.15)
    assert math.log10(errs_c[0] / errs_c[1]) == pytest.approx(2.0, abs=0.15)


def test_linear_map_is_exact_to_rounding():
    A = np.array([[2.0, -1.0], [0.5, 4.0]])
    J = fd_jacobian(lambda v: A @ v, np.array([3.0, -2.0]), rel=CENTRAL_REL_STEP, central=True)
    np.testing.assert_allclose(J, A, rtol=1e-9)


def test_forward_step_rules_are_the_documented_ones():
    """Bit for bit the formulas written out: nominal step (loops, master) and represented
    step with a floor (implicit solvers)."""
    x = np.array([1e-12, 0.3, -7.0, 123456.789])
    f0 = _quad(x)
    J = fd_jacobian(_quad, x, f0, rel=FORWARD_REL_STEP, represented_step=False)
    for j in range(x.size):
        h = 1e-7 * max(1.0, abs(x[j]))
        xp = x.copy()
        xp[j] += h
        assert np.array_equal(J[:, j], (_quad(xp) - f0) / h)
    floor, rel = 1e-6, math.sqrt(np.finfo(float).eps)
    J = fd_jacobian(_quad, x, rel=rel, floor=floor)
    for j in range(x.size):
        xp = x.copy()
        xp[j] = x[j] + rel * max(abs(x[j]), floor)
        assert np.array_equal(J[:, j], (_quad(xp) - f0) / (xp[j] - x[j]))


def _quad(v):
    return np.array([v @ v, v[0] * v[-1], np.sum(np.cos(v))])


def test_calls_in_column_order_and_never_share_the_point():
    seen = []

    def fun(v):
        seen.append(v)
        return v.copy()

    x = np.array([1.0, 2.0])
    fd_jacobian(fun, x, rel=1e-3, central=True)
    assert [int(np.argmax(np.abs(v - x))) for v in seen] == [0, 0, 1, 1]
    assert seen[0][0] > x[0] > seen[1][0]
    assert len({id(v) for v in seen}) == 4 and np.array_equal(x, [1.0, 2.0])


def test_empty_point():
    assert fd_jacobian(_quad_or_empty, np.zeros(0), rel=1e-6, central=True).shape == (2, 0)
    assert fd_jacobian(_quad_or_empty, np.zeros(0), rel=1e-6).shape == (2, 0)


def _quad_or_empty(v):
    return np.array([1.0, float(v @ v)])


def test_non_finite_column_reported_before_the_next_is_evaluated():
    calls = []

    def fun(v):
        calls.append(v.copy())
        return np.array([1.0 / v[0] if v[0] > 0 else np.inf, v[1]])

    with pytest.raises(NonFiniteJacobian) as exc:
        fd_jacobian(fun, np.array([0.0, 5.0]), rel=1e-3, central=True, check_finite=True)
    assert exc.value.column == 0 and exc.value.step == pytest.approx(1e-3)
    assert len(calls) == 2


# -- ticks and times ---------------------------------------------------------------------------


@pytest.mark.parametrize("dt", [0.1, 0.001, 1e-4, 0.25, 3.0, 0.02])
@pytest.mark.parametrize("n", [0, 1, 3, 7, 10, 99, 1000, 123457])
def test_ticks_of_decimal_multiples(dt, n):
    seconds = float(Fraction(repr(dt)) * n)      # the decimal product, correctly rounded
    assert ticks(seconds, dt) == n


@pytest.mark.parametrize("seconds, dt", [(0.015, 0.01), (0.25, 0.1), (1.0, 0.3),
                                         (0.1 + 1e-7, 0.1)])
def test_ticks_of_non_multiples(seconds, dt):
    assert ticks(seconds, dt) is None


@pytest.mark.parametrize("t0", [0.0, 0.5, -3.0, 1e6])
@pytest.mark.parametrize("dt", [0.1, 0.001, 1e-4, 0.02])
@pytest.mark.parametrize("k", [0, 1, 7, 1000, 123457])
def test_nearest_tick_inverts_tick_time(k, dt, t0):
    assert nearest_tick(tick_time(k, dt, t0), dt, t0) == k


def test_floor_ticks_and_tick_time():
    assert floor_ticks(0.3, 0.1) == 3            # 0.3/0.1 = 2.9999999999999996
    assert floor_ticks(0.35, 0.1) == 3
    assert tick_time(3, 0.1, 1.0) == 1.0 + 3 * 0.1
    assert tick_time(0, 0.1) == 0.0


def test_same_time_scales_with_the_reference():
    assert same_time(1e-13, 0.0, CLOCK_RTOL) and not same_time(1e-11, 0.0, CLOCK_RTOL)
    assert same_time(1e6 + 1e-7, 1e6, CLOCK_RTOL) and not same_time(1e6 + 1e-5, 1e6, CLOCK_RTOL)
    assert same_time(0.3, 0.1 * 3, CLOCK_RTOL)
    assert same_time(2.0 + 1e-9, 2.0, EXCHANGE_RTOL)
    assert time_tolerance(-50.0, EXCHANGE_RTOL) == 50.0 * 1e-9


# -- fixed-point updates ---------------------------------------------------------------------

from cosim.numerics.fixedpoint import Anderson, magnitude  # noqa: E402


@pytest.mark.parametrize("values", [[], [0.0], [-0.0, 0.0], [3.0, -7.5, 2.0], [np.inf, 1.0],
                                    [1.0, np.nan, 2.0], [np.nan], [-np.inf, np.nan],
                                    list(np.linspace(-3, 2, 40)), [[1.0, -4.0], [2.0, 3.0]]])
def test_magnitude_is_numpys_max_norm(values):
    v = np.array(values, dtype=float)
    ref = float(np.max(np.abs(v))) if v.size else 0.0
    got = magnitude(v)
    assert type(got) is float
    assert (got == ref) or (math.isnan(got) and math.isnan(ref))


def test_magnitude_of_integers_is_a_float():
    got = magnitude(np.array([3, -5]))
    assert type(got) is float and got == 5.0


def _anderson_textbook(m, pairs):
    """Type-II Anderson acceleration written out with np.linalg.lstsq (the oracle)."""
    dF, dG, out, f_prev, g_prev = [], [], [], None, None
    for y, g in pairs:
        f = g - y
        nxt = g
        if f_prev is not None:
            dF.append(f - f_prev)
            dG.append(g - g_prev)
            dF, dG = dF[-m:], dG[-m:]
            gamma = np.linalg.lstsq(np.column_stack(dF), f, rcond=None)[0]
            nxt = g - np.column_stack(dG) @ gamma
        f_prev, g_prev = f, g
        out.append(nxt)
    return out


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("n", [1, 2, 5])
def test_anderson_is_the_textbook_update_bit_for_bit(seed, n):
    rng = np.random.default_rng(seed)
    pairs = [(rng.normal(size=n), rng.normal(size=n)) for _ in range(9)]
    if seed == 0:                       # rank-deficient histories: repeated differences
        pairs = [(np.ones(n) * (i % 2), np.ones(n) * 0.5) for i in range(9)]
    acc = Anderson(4)
    got = [acc.update(y, g) for y, g in pairs]
    for a, b in zip(got, _anderson_textbook(4, pairs)):
        assert np.array_equal(a, b)


def test_anderson_on_a_nan_history_raises_as_numpys_lstsq():
    acc = Anderson(2)
    acc.update(np.zeros(2), np.ones(2))
    with pytest.raises(np.linalg.LinAlgError):
        np.linalg.lstsq(np.array([[np.nan], [1.0]]), np.ones(2), rcond=None)
    with pytest.raises(np.linalg.LinAlgError):
        acc.update(np.array([np.nan, 0.0]), np.ones(2))
