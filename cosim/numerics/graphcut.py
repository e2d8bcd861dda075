"""Balanced minimum-cut partitioning of a weighted undirected graph.

METIS (``pymetis``, multilevel k-way: coarsen, cut, refine while uncoarsening) finds a cut of
small weight among parts of about equal vertex weight. METIS balances integer weights to an
upper bound only; a pass after it holds the stated tolerance on the real weights, both ways
(every part within ``±balance`` of its share ``total / k``, as far as the vertices' own
weights allow), then moves boundary vertices that lower the cut while the balance holds
(Fiduccia–Mattheyses gains, positive moves only), and groups joined by heavy edges that the
cut splits whole into one part where that lowers the cut (the balance restored with light
vertices).
"""

from __future__ import annotations

import numpy as np

__all__ = ["BALANCE", "SEEDS", "cut_weight", "partition_graph"]

#: Default tolerance: every part's weight within this fraction of its share.
BALANCE = 0.05
#: METIS runs (random seeds) per partition: its randomized coarsening finds cuts up to about
#: twice the best on some graphs with one seed.
SEEDS = 8
#: METIS's integer vertex weights are the real ones scaled to about this total.
_WEIGHT_RESOLUTION = 1_000_000


def cut_weight(edges: dict, part: np.ndarray) -> float:
    """Total weight of the edges whose ends lie in different parts.

    Parameters
    ----------
    edges : dict of (int, int) to float
        Undirected edges ``(i, j)`` and their weights.
    part : ndarray of int, shape (n,)
        Each vertex's part.
    """
    return float(sum(w for (i, j), w in edges.items() if part[i] != part[j]))


def partition_graph(weights: np.ndarray, edges: dict, k: int, balance: float = BALANCE,
                    seeds: int = SEEDS) -> np.ndarray:
    """Each vertex's part, ``0 .. k-1``: parts of balanced weight, few edges cut.

    Parameters
    ----------
    weights : ndarray, shape (n,)
        Vertex weights (> 0).
    edges : dict of (int, int) to float
        Undirected edges ``(i, j)``, ``i != j``, with weights > 0 (one entry per pair).
    k : int
        Number of parts, ``1 <= k <= n``.
    balance : float
        Every part's weight within ``(1 ± balance) * total / k`` where the vertex weights
        allow it.
    seeds : int
        METIS runs, with random seeds ``0 .. seeds-1``; the least cut after the balance
        pass is kept (the result depends only on the inputs).

    Returns
    -------
    ndarray of int, shape (n,)

    Raises
    ------
    ImportError
        Without ``pymetis`` (a dependency of cosim; ``pip install pymetis``).
    """
    n = len(weights)
    if k == 1:
        return np.zeros(n, dtype=np.int64)
    import pymetis

    adj: list[dict[int, float]] = [{} for _ in range(n)]
    for (i, j), w in edges.items():
        adj[i][j] = adj[i].get(j, 0.0) + w
        adj[j][i] = adj[j].get(i, 0.0) + w
    xadj = np.zeros(n + 1, dtype=np.int64)
    xadj[1:] = np.cumsum([len(a) for a in adj])
    adjncy = [j for a in adj for j in sorted(a)]
    emin = min((w for a in adj for w in a.values()), default=1.0)
    eweights = [max(1, round(a[j] / emin)) for a in adj for j in sorted(a)]
    vweights = np.maximum(1, np.round(weights * (_WEIGHT_RESOLUTION / weights.sum())))
    best, best_cut = None, np.inf
    for seed in range(seeds):
        result = pymetis.part_graph(
            k, pymetis.CSRAdjacency(xadj.tolist(), adjncy),
            vweights=vweights.astype(int).tolist(), eweights=eweights or None,
            options=pymetis.Options(ufactor=max(1, int(600 * balance)), seed=seed))
        part = np.asarray(result.vertex_part, dtype=np.int64)
        _rebalance(part, weights, adj, k, balance)
        _refine(part, weights, adj, k, balance)
        part = _join_heavy(part, weights, edges, adj, k, balance)
        cut = cut_weight(edges, part)
        if cut < best_cut:
            best, best_cut = part, cut
    return best


def _join_heavy(part, weights, edges, adj, k, balance) -> np.ndarray:
    """Groups of vertices joined by edges heavier than the lightest (direct feedthrough, in
    a model) that the cut splits: try each whole in each part it touches, balance restored
    by :func:`_rebalance` (light vertices first); keep what lowers the cut. Single moves
    cannot do this: every vertex moved alone out of such a group cuts another heavy edge."""
    light = min(edges.values(), default=0.0)
    heavy = {v: [] for v in range(len(part))}
    for (i, j), w in edges.items():
        if w > light:
            heavy[i].append(j)
            heavy[j].append(i)
    seen, groups = set(), []
    for v in range(len(part)):
        if v in seen or not heavy[v]:
            continue
        group, stack = [], [v]
        seen.add(v)
        while stack:
            u = stack.pop()
            group.append(u)
            for x in heavy[u]:
                if x not in seen:
                    seen.add(x)
                    stack.append(x)
        groups.append(group)
    best, best_cut = part, cut_weight(edges, part)
    for group in groups:
        touched = sorted({int(best[u]) for u in group})
        if len(touched) < 2:
            continue
        for q in touched:
            trial = best.copy()
            trial[group] = q
            _rebalance(trial, weights, adj, k, balance)
            _refine(trial, weights, adj, k, balance)
            cut = cut_weight(edges, trial)
            lo, hi = _bounds(weights, k, balance)
            load = np.bincount(trial, weights=weights, minlength=k)
            if cut < best_cut and load.min() >= lo and load.max() <= hi:
                best, best_cut = trial, cut
    return best


def _bounds(weights: np.ndarray, k: int, balance: float) -> tuple[float, float]:
    share = weights.sum() / k
    return (1 - balance) * share, (1 + balance) * share


def _link(adj, v: int, part: np.ndarray, p: int) -> float:
    """Weight of the edges from ``v`` into part ``p``."""
    return sum(w for u, w in adj[v].items() if part[u] == p)


def _rebalance(part, weights, adj, k, balance) -> None:
    """Move vertices out of parts over the upper bound and into parts under the lower one,
    each time the vertex that cuts least (adjacent to the receiving part first)."""
    lo, hi = _bounds(weights, k, balance)
    load = np.bincount(part, weights=weights, minlength=k)
    for _ in range(len(part) * k):
        over, under = int(np.argmax(load)), int(np.argmin(load))
        if load[over] <= hi and load[under] >= lo:
            return
        # Out of the heaviest part when it is over, else into the lightest from anywhere.
        src = over if load[over] > hi else None
        dst = under
        best, best_gain = None, -np.inf
        for v in np.flatnonzero(part == src) if src is not None else range(len(part)):
            p = part[v]
            if p == dst or (src is None and load[p] - weights[v] < lo):
                continue
            if load[dst] + weights[v] > hi and load[dst] > 0:
                continue
            gain = _link(adj, v, part, dst) - _link(adj, v, part, p)
            if gain > best_gain:
                best, best_gain = v, gain
        if best is None:
            return                          # the vertex weights allow no better balance
        load[part[best]] -= weights[best]
        load[dst] += weights[best]
        part[best] = dst


def _refine(part, weights, adj, k, balance, passes: int = 8) -> None:
    """Move boundary vertices to a neighbouring part where that lowers the cut and keeps
    both parts within the bounds (or no further out of them than before)."""
    lo, hi = _bounds(weights, k, balance)
    load = np.bincount(part, weights=weights, minlength=k)
    for _ in range(passes):
        moved = False
        for v in range(len(part)):
            p = part[v]
            here = _link(adj, v, part, p)
            for q in {part[u] for u in adj[v]} - {p}:
                if _link(adj, v, part, q) - here <= 0:
                    continue
                if load[p] - weights[v] < min(lo, load[p]) or \
                        load[q] + weights[v] > max(hi, load[q]):
                    continue
                load[p] -= weights[v]
                load[q] += weights[v]
                part[v] = q
                moved = True
                break
        if not moved:
            return
