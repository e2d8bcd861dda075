"""Automatic partitioning: a model cut into ``k`` units of balanced cost
(``CosimConfig(partition=k)``, ``cosim plan --partition k``).

The model is flattened to its blocks, which are laid out in one line by a depth-first
topological walk along the wires (so a chain stays together, and parallel chains follow one
another), and the line is cut into ``k`` runs of about equal estimated cost. Each cut is then
moved, within a window that keeps every part within ±5 % of its share, to where the fewest
signals cross it, a signal from an output with direct feedthrough counting
:data:`FEEDTHROUGH_PENALTY` times: cutting after a state (a delay, an integrator) creates no
algebraic coupling, and a cut on a discrete delay sampled at the macro step is exact (see
docs/cosim-semantics.md). Each run of blocks becomes an atomic subsystem ``part1``, ``part2``,
… whose Inports and Outports carry the cut signals.

The cost of a block is an estimate: 1 per block, :data:`STATE_COST` more for a block with
continuous state (evaluated at every solver stage), 1 more for one with discrete state; pass
``cost=`` to use your own (e.g. measured) figures.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np

from cosim.compile.flatten import flatten
from cosim.errors import ModelError
from cosim.model.diagram import Inport, Model, Outport, Subsystem

__all__ = ["Split", "split_model"]

#: How many plain signals a cut signal from a direct-feedthrough output is worth.
FEEDTHROUGH_PENALTY = 8
#: Extra estimated cost of a block with continuous state.
STATE_COST = 3
#: How far (fraction of a part's share) a cut may move to cross fewer signals.
WINDOW = 0.05


def block_cost(block) -> float:
    """The default cost estimate of one block (see the module notes)."""
    return (1.0 + (STATE_COST if block.has_derivative else 0.0)
            + (1.0 if block.has_state_update else 0.0))


@dataclass
class Split:
    """A model cut into parts.

    Attributes
    ----------
    model : Model
        The parts as atomic subsystems ``part1`` … ``partk`` wired together.
    parts : list of list of str
        Block paths of each part, in the order they run.
    costs : list of float
        Estimated cost of each part.
    cuts : list of str
        The cut signals, ``"path.port"``, with ``*`` after those from a direct-feedthrough
        output.
    keys : dict of str to str or None
        Log key of the split run -> the key of the same signal in the model's own run (None:
        not shown, a cut signal's copies as the sending part's port and inside the part that
        receives it).
    """

    model: Model
    parts: list
    costs: list
    cuts: list
    keys: dict = field(default_factory=dict)

    def table(self) -> str:
        """Parts, their blocks and cost share, and the cut signals."""
        total = sum(self.costs) or 1.0
        lines = [f"{'unit':<8} {'blocks':>7} {'cost':>9} {'share':>6}"]
        for i, (paths, c) in enumerate(zip(self.parts, self.costs), 1):
            lines.append(f"part{i:<4} {len(paths):>7} {c:>9.0f} {100 * c / total:>5.1f}%")
        ft = sum(c.endswith("*") for c in self.cuts)
        lines.append(f"cut signals: {len(self.cuts)}" + (f" ({ft} with direct feedthrough, *)"
                                                         if ft else ""))
        shown = self.cuts[:20]
        if shown:
            lines.append("  " + ", ".join(shown) + (" ..." if len(self.cuts) > 20 else ""))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


def split_model(model, k: int, config, cost=None, shapes: dict | None = None) -> Split:
    """Cut an evaluated ``model`` into ``k`` units of balanced estimated cost.

    Parameters
    ----------
    model : Model
        Evaluated (``cosim.model.evaluate.evaluate``); without atomic subsystems or blocks
        that are units by themselves (they are units already) and without model events.
        Not modified: the parts hold copies of its blocks.
    k : int
        Number of parts, ``1 <= k <=`` number of blocks.
    config : SimulationConfig
        Its ``dt`` and ``solver`` become each part's.
    cost : callable, optional
        ``cost(path, block) -> float``; default :func:`block_cost`.
    shapes : dict of str to tuple, optional
        ``"path.port"`` -> shape of the signals the cuts carry (default ``(1,)``).

    Returns
    -------
    Split
    """
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ModelError(f"partition must be a whole number of units >= 1, got {k!r}")
    whole = [b.name for b in model.blocks
             if (isinstance(b, Subsystem) and b.atomic) or hasattr(b, "as_unit")]
    if whole:
        raise ModelError(f"partition={k}: {model.name!r} has atomic subsystems or unit blocks "
                         f"({', '.join(whole)}): they are its units already; partition a "
                         "model of plain blocks and virtual subsystems")
    if getattr(model, "events", None):
        raise ModelError(f"partition={k}: {model.name!r} has model events, which name block "
                         "paths a split renames; partition the model without them")
    own = copy.deepcopy(model)
    flat = flatten(own)
    if flat.problems:
        raise ModelError(f"partition={k}: the model does not flatten: "
                         + "; ".join(flat.problems))
    n = len(flat.blocks)
    if k > n:
        raise ModelError(f"partition={k}: the model has only {n} blocks")
    index = {p: i for i, p in enumerate(flat.paths)}
    succ: list[list[int]] = [[] for _ in range(n)]
    for s, _, d, _ in flat.wires:
        succ[index[s]].append(index[d])
    order = _line(n, succ)
    weights = np.array([float(cost(p, b) if cost else block_cost(b))
                        for p, b in zip(flat.paths, flat.blocks)])
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    crossing = _crossings(n, flat, index, pos)
    bounds = _cuts(weights[order], crossing, k)
    part_of = np.empty(n, dtype=np.int64)
    for j in range(k):
        part_of[order[bounds[j]:bounds[j + 1]]] = j
    return _assemble(model, own, flat, index, part_of, k, weights, config, shapes or {})


def _line(n: int, succ: list[list[int]]) -> np.ndarray:
    """Blocks in reverse postorder of a depth-first walk along the wires (a topological order
    where the wires allow one), roots taken in model order; iterative, for deep chains."""
    indeg = [0] * n
    for out in succ:
        for d in out:
            indeg[d] += 1
    seen = [False] * n
    post: list[int] = []
    roots = [i for i in range(n) if indeg[i] == 0] + list(range(n))
    for r in roots:
        if seen[r]:
            continue
        seen[r] = True
        stack = [(r, iter(succ[r]))]
        while stack:
            node, it = stack[-1]
            for d in it:
                if not seen[d]:
                    seen[d] = True
                    stack.append((d, iter(succ[d])))
                    break
            else:
                stack.pop()
                post.append(node)
    return np.array(post[::-1], dtype=np.int64)


def _crossings(n: int, flat, index: dict, pos: np.ndarray) -> np.ndarray:
    """``c[i]``: weighted signals crossing a cut between line positions ``i-1`` and ``i``
    (each driving output counted once however many inputs it drives)."""
    diff = np.zeros(n + 1)
    reach: dict[tuple[int, str], tuple[int, int]] = {}
    for s, sp, d, _ in flat.wires:
        a, b = pos[index[s]], pos[index[d]]
        lo, hi = reach.get((index[s], sp), (a, a))
        reach[(index[s], sp)] = (min(lo, b), max(hi, b))
    for (i, _), (lo, hi) in reach.items():
        w = FEEDTHROUGH_PENALTY if flat.blocks[i].direct_feedthrough else 1.0
        diff[lo + 1] += w                 # cuts at positions lo+1 .. hi separate the ends
        diff[hi + 1] -= w
    return np.cumsum(diff)[:n + 1]


def _cuts(w: np.ndarray, crossing: np.ndarray, k: int) -> list[int]:
    """Line positions ``0 = b0 < b1 < … < bk = n`` of balanced parts with few crossings."""
    n = len(w)
    prefix = np.concatenate([[0.0], np.cumsum(w)])
    total = prefix[-1]
    share = total / k
    bounds = [0]
    for j in range(1, k):
        target = j * share
        lo = int(np.searchsorted(prefix, target - WINDOW * share, side="left"))
        hi = int(np.searchsorted(prefix, target + WINDOW * share, side="right"))
        lo = max(lo, bounds[-1] + 1)
        hi = min(max(hi, lo + 1), n - (k - j) + 1)
        if lo >= hi:
            lo, hi = bounds[-1] + 1, bounds[-1] + 2
        window = np.arange(lo, hi)
        # fewest crossings, then closest to the share
        score = crossing[window] + np.abs(prefix[window] - target) / (total + 1.0)
        bounds.append(int(window[np.argmin(score)]))
    bounds.append(n)
    return bounds


def _assemble(model, own, flat, index, part_of, k, weights, config, shapes) -> Split:
    parts = [Subsystem(f"part{j + 1}", atomic=True, dt=config.dt, solver=config.solver)
             for j in range(k)]
    names = {}
    keys = {}
    for p, b in zip(flat.paths, flat.blocks):
        j = part_of[index[p]]
        b.name = names[p] = p.replace("/", "__")
        parts[j].blocks.append(b)
        for port in b.output_names:
            keys[f"part{j + 1}/{b.name}.{port}"] = f"{p}.{port}"
    top = Model(model.name)
    top.parameters = dict(getattr(model, "parameters", {}))
    top.context = dict(getattr(own, "context", {}))
    top.add(*parts)
    cuts, outs, ins = [], set(), set()
    for s, sp, d, dp in flat.wires:
        i, j = part_of[index[s]], part_of[index[d]]
        src, dst = f"{names[s]}.{sp}", f"{names[d]}.{dp}"
        if i == j:
            parts[i].connect(src, dst)
            continue
        port = f"{names[s]}__{sp}"
        if (i, port) not in outs:
            outs.add((i, port))
            parts[i].add(Outport(port))
            parts[i].connect(src, f"{port}.in")
            keys[f"part{i + 1}.{port}"] = None      # the source's signal again, as a unit port
            cuts.append(f"{s}.{sp}" + ("*" if flat.blocks[index[s]].direct_feedthrough
                                       else ""))
        if (j, port) not in ins:
            ins.add((j, port))
            # Before the part's blocks, where the source would be: the plan then orders its
            # readers as in the whole model, and the vector strategy reads their groups as
            # slices (an Inport added last put its readers out of order: a gather per group).
            parts[j].blocks.insert(0, Inport(port, shape=shapes.get(f"{s}.{sp}", (1,))))
            keys[f"part{j + 1}/{port}.out"] = None       # the source's signal again
            top.connect(f"part{i + 1}.{port}", f"part{j + 1}.{port}")
        parts[j].connect(f"{port}.out", dst)
    costs = [float(weights[part_of == j].sum()) for j in range(k)]
    paths = [[p for p in flat.paths if part_of[index[p]] == j] for j in range(k)]
    return Split(top, paths, costs, cuts, keys)

