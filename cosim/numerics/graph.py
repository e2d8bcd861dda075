"""Graph algorithms on dependency graphs: strongly connected components, cycles, levels.

Used wherever a directed "feeds" relation has to be ordered: blocks by their direct-feedthrough
wires at compile time (a strongly connected component is an algebraic loop), units by their
couplings in the co-simulation master (a component is an algebraic coupling).

A graph is given as its ``nodes`` (any hashable values, in a meaningful order such as insertion
order) and ``succ``, indexable by node, giving each node's successors. Every result depends
only on the node order, never on the iteration order of the successor collections (sets of
strings iterate in a per-process hash order), so plans and unit orders are reproducible.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Sequence
from typing import Any

__all__ = ["condensation_levels", "cycle_through", "is_cycle", "strongly_connected_components"]


def strongly_connected_components(nodes: Sequence[Hashable], succ: Any) -> list[list[Hashable]]:
    """Strongly connected components (Tarjan's algorithm, iterative).

    Parameters
    ----------
    nodes : sequence of hashable, length n
        The graph's nodes; their order fixes every order in the result.
    succ : mapping or sequence
        ``succ[v]`` is an iterable of the successors of node ``v`` (each one of ``nodes``).

    Returns
    -------
    list of list
        Every node in exactly one component. Components come in reverse topological order
        (a component is listed before every component that has an edge into it), as Tarjan's
        algorithm finds them when it starts from the nodes in order and visits each node's
        successors in node order. Each component's members are in node order.

    Notes
    -----
    Iterative, so deep chains (thousands of blocks) do not hit Python's recursion limit.
    """
    pos = {v: i for i, v in enumerate(nodes)}

    def successors(v):
        s = succ[v]
        # Most blocks have one successor or none (sorting those costs half the compile).
        return iter(s) if len(s) < 2 else iter(sorted(s, key=pos.__getitem__))

    index: dict[Hashable, int] = {}
    low: dict[Hashable, int] = {}
    on_stack: set[Hashable] = set()
    stack: list[Hashable] = []
    comps: list[list[Hashable]] = []
    for root in nodes:
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work = [(root, successors(root))]
        while work:
            v, it = work[-1]
            descended = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, successors(w)))
                    descended = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if descended:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                comps.append(comp if len(comp) < 2 else sorted(comp, key=pos.__getitem__))
    return comps


def is_cycle(comp: Sequence[Hashable], succ: Any) -> bool:
    """True if component ``comp`` contains a cycle: two or more nodes, or a self-loop."""
    return len(comp) > 1 or comp[0] in succ[comp[0]]


def cycle_through(comp: Sequence[Hashable], succ: Any) -> list[Hashable]:
    """One shortest cycle through the component's first node, as ``[v0, ..., v0]``.

    Breadth-first search from ``comp[0]`` back to it, inside the component, visiting
    successors in ``comp`` order, so the cycle shown in an error message is reproducible.

    Parameters
    ----------
    comp : sequence of hashable
        A component for which :func:`is_cycle` holds, members in node order.
    succ : mapping or sequence
        As for :func:`strongly_connected_components`.

    Returns
    -------
    list
        The cycle, its first node repeated at the end (``[v, v]`` for a self-loop).
    """
    pos = {v: i for i, v in enumerate(comp)}
    start = comp[0]
    parent = {start: None}
    queue = [start]
    for v in queue:
        for w in sorted((w for w in succ[v] if w in pos), key=pos.__getitem__):
            if w == start:
                path = [v]
                while parent[path[-1]] is not None:
                    path.append(parent[path[-1]])
                return path[::-1] + [start]
            if w not in parent:
                parent[w] = v
                queue.append(w)
    return list(comp) + [start]


def condensation_levels(nodes: Sequence[Hashable], comps: Sequence[Sequence[Hashable]],
                        succ: Any) -> tuple[list[int], list[int]]:
    """Topological order and levels of the components (Kahn's algorithm on the condensation).

    Parameters
    ----------
    nodes : sequence of hashable
        The graph's nodes, in the order that breaks ties.
    comps : sequence of sequence
        A partition of ``nodes`` into strongly connected components, members in node order
        (as :func:`strongly_connected_components` returns them, in any order).
    succ : mapping or sequence
        As for :func:`strongly_connected_components`.

    Returns
    -------
    order : list of int
        Indices into ``comps`` in topological order; among components that are ready
        together, the one whose first member comes first in ``nodes`` goes first.
    level : list of int, length len(comps)
        Per component: the length of the longest path reaching it in the condensation
        (0 for a component with no predecessor). Components on one level are independent.
    """
    pos = {v: i for i, v in enumerate(nodes)}
    comp_of = {v: c for c, comp in enumerate(comps) for v in comp}
    # Lists (a set per component would cost 216 bytes each, for a plan of blocks one per
    # block); an edge repeated is counted in and out as often, so the levels are the same.
    csucc: list = [()] * len(comps)
    for v in nodes:
        for w in succ[v]:
            c, d = comp_of[v], comp_of[w]
            if c != d:
                if csucc[c]:
                    csucc[c].append(d)
                else:
                    csucc[c] = [d]
    indeg = [0] * len(comps)
    for targets in csucc:
        for d in targets:
            indeg[d] += 1
    # Heap keys are the first members' positions: unique, so the order is total.
    ready = [(pos[comps[c][0]], c) for c in range(len(comps)) if indeg[c] == 0]
    heapq.heapify(ready)
    order, level = [], [0] * len(comps)
    while ready:
        _, c = heapq.heappop(ready)
        order.append(c)
        for d in csucc[c]:
            level[d] = max(level[d], level[c] + 1)
            indeg[d] -= 1
            if indeg[d] == 0:
                heapq.heappush(ready, (pos[comps[d][0]], d))
    return order, level
