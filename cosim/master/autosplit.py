"""Automatic partitioning: a model cut into ``k`` units of balanced cost
(``CosimConfig(partition=k)``, ``cosim plan --partition k``).

The model is flattened to its blocks, which become the vertices of a graph weighted by their
estimated cost; every signal is an edge from its driving block to each block it feeds,
weighted 1, or :data:`FEEDTHROUGH_PENALTY` from an output with direct feedthrough: cutting
after a state (a delay, an integrator) creates no algebraic coupling, and a cut on a discrete
delay sampled at the macro step is exact (see docs/cosim-semantics.md). A graph partitioner
(METIS, :mod:`cosim.numerics.graphcut`) cuts it into ``k`` parts of minimum weighted cut,
every part's cost within ±:data:`BALANCE` of its share (``total / k``) as far as single
blocks' costs allow. Each part becomes an atomic subsystem ``part1``, ``part2``, … whose
Inports and Outports carry the cut signals.

The cost of a block is an estimate: 1 per block, :data:`STATE_COST` more for a block with
continuous state (evaluated at every solver stage), 1 more for one with discrete state; pass
``cost=`` to use your own (e.g. measured) figures.

On Ray, the parts are units like any other: ``CosimConfig(units={"part1": {"num_cpus": 1},
...})`` makes each reserve a CPU, so that Ray places them where CPUs are free (by default a
unit reserves none, and Ray may start every part on the driver's node).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np

from cosim.compile.flatten import flatten
from cosim.errors import ModelError
from cosim.model.diagram import Inport, Model, Outport, Subsystem
from cosim.model.events import lifted
from cosim.numerics.graphcut import BALANCE, partition_graph

__all__ = ["BALANCE", "Split", "signal_graph", "split_model"]

#: How many plain signals a cut signal from a direct-feedthrough output is worth.
FEEDTHROUGH_PENALTY = 8
#: Extra estimated cost of a block with continuous state.
STATE_COST = 3


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
        Block paths of each part, in the model's order.
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
    if getattr(model, "events", None) or lifted(model, atomic=False):
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
    weights = np.array([float(cost(p, b) if cost else block_cost(b))
                        for p, b in zip(flat.paths, flat.blocks)])
    part_of = partition_graph(weights, signal_graph(flat, index), k)
    return _assemble(model, own, flat, index, part_of, k, weights, config, shapes or {})


def signal_graph(flat, index: dict) -> dict:
    """The undirected weighted graph the partitioner cuts: ``(i, j) -> weight`` between
    blocks ``i < j`` (indices into ``flat.paths``), the sum over the signals between them of
    1, or :data:`FEEDTHROUGH_PENALTY` for a signal from a direct-feedthrough output (an
    output feeding several inputs of one block counts once)."""
    seen = set()
    edges: dict[tuple[int, int], float] = {}
    for s, sp, d, _ in flat.wires:
        i, j = index[s], index[d]
        if i == j or (i, sp, j) in seen:
            continue
        seen.add((i, sp, j))
        w = FEEDTHROUGH_PENALTY if flat.blocks[i].direct_feedthrough else 1.0
        key = (min(i, j), max(i, j))
        edges[key] = edges.get(key, 0.0) + w
    return edges


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

