"""Compilation: a pure pass from a model to an execution plan, reporting every problem at once.

Checks every wire names existing blocks and ports, every input is driven exactly once, every
sample time is an integer multiple of the base step, and that no algebraic loop exists (a
strongly connected component of the direct-feedthrough graph). Orders the blocks topologically
over the feedthrough edges, groups them into levels (bdsim's plan: blocks in one level are
independent) and into tasks by sample time. Nothing here mutates the model.
"""

from __future__ import annotations

import array
import functools
from dataclasses import dataclass

from cosim.compile.flatten import ALL_OUTPUTS, flatten, split_ref
from cosim.errors import CompileError, Problem
from cosim.numerics.graph import (condensation_levels, cycle_through, is_cycle,
                                  strongly_connected_components)
from cosim.numerics.timegrid import ticks

__all__ = ["Plan", "Task", "Wire", "compile_model", "split_ref"]

@dataclass(frozen=True, slots=True)
class Wire:
    """A resolved connection: output ``src.src_port`` drives input ``dst.dst_port``.

    ``src`` and ``dst`` are indices into :attr:`Plan.blocks`.
    """

    src: int
    src_port: str
    dst: int
    dst_port: str


@dataclass(frozen=True)
class Task:
    """Blocks sharing one sample time.

    Attributes
    ----------
    period, offset : int
        In ticks of the base step: the task runs at ticks ``k >= offset`` with
        ``(k - offset) % period == 0``.
    blocks : tuple of int
        Indices into :attr:`Plan.blocks`, in execution order.
    """

    period: int
    offset: int
    blocks: tuple[int, ...]

    def active(self, k: int) -> bool:
        """True if the task runs at tick ``k``."""
        return k >= self.offset and (k - self.offset) % self.period == 0


class Plan:
    """The compiled form of a model: execution order, levels, tasks and wires.

    Attributes
    ----------
    name : str
        Model name.
    dt : float
        Base step (s).
    blocks : tuple of Block
        In execution (topological) order.
    names : tuple of str
        Path name of each block (``"sub/inner"`` inside virtual subsystems).
    positions : tuple of int
        ``0 .. len(blocks) - 1``, as the objects the tasks hold.
    index : dict of str to int
        Position of each block by path name.
    path_of : dict of int to str
        Path name of each block by ``id(block)``.
    levels : list of tuple of Block
        ``levels[i]`` holds blocks whose feedthrough inputs come only from lower levels
        (built when first asked for, from :attr:`level`).
    level : array of int
        Each block's level.
    n_levels : int
        Number of levels.
    tasks : tuple of Task
        One per distinct (period, offset), fastest first.
    task_of : tuple of int
        Task index of each block.
    wires : tuple of Wire
        Every connection, resolved to block indices.
    sample_period : tuple of float
        Each block's sample period in seconds (``period * dt``), passed as ``dt`` to it.
    loops : tuple of tuple of int
        Algebraic loops (strongly connected feedthrough components), each as block indices in
        execution order; empty unless compiled with ``allow_loops``.
    continuous : tuple of bool
        Per block: evaluated at every solver stage (continuous time, or inherited rate in a
        model with continuous state).
    """

    def __init__(self, name, dt, blocks, level, tasks, task_of, wires, loops=(),
                 continuous=None, names=None):
        self.name = name
        self.names = names if names is not None else tuple(b.name for b in blocks)
        self.loops = loops
        self.continuous = continuous if continuous is not None else (False,) * len(blocks)
        self.dt = dt
        self.blocks = blocks
        # Levels as one int per block (a chain has a level per block: a tuple each would
        # cost 56 bytes).
        self.level = array.array("q", level)
        self.n_levels = max(self.level, default=-1) + 1
        self.tasks = tasks
        self.task_of = task_of
        self.wires = wires
        # The position ints the tasks and wires hold, not a new one per block (28 bytes a
        # copy, and the fast path names positions too).
        positions = list(range(len(blocks)))
        for task in tasks:
            for j in task.blocks:
                positions[j] = j
        self.positions = tuple(positions)
        self.index = dict(zip(self.names, self.positions))
        periods = [task.period * dt for task in tasks]      # one float per task, shared
        self.sample_period = tuple(periods[n] for n in task_of)

    @functools.cached_property
    def path_of(self) -> dict[int, str]:
        """``id(block)`` -> its path name; built when first asked for (error messages,
        continuous blocks): about 85 bytes per block that a run of discrete blocks never
        reads."""
        return {id(b): n for b, n in zip(self.blocks, self.names)}

    @functools.cached_property
    def levels(self) -> list[tuple]:
        """Blocks by level (see the class docstring)."""
        levels = [[] for _ in range(self.n_levels)]
        for b, lv in zip(self.blocks, self.level):
            levels[lv].append(b)
        return [tuple(lv) for lv in levels]

    def table(self) -> str:
        """The plan as a text table: order, level, block, type, rate, feedthrough."""
        rows = [("#", "level", "block", "type", "period", "offset", "feedthrough")]
        for i, b in enumerate(self.blocks):
            task = self.tasks[self.task_of[i]]
            rows.append((str(i), str(self.level[i]), self.names[i], type(b).__name__,
                         f"{task.period * self.dt:g}", f"{task.offset * self.dt:g}",
                         "yes" if b.direct_feedthrough else "no"))
        widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
        lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(lines)

    def to_dot(self) -> str:
        """The plan as Graphviz DOT: one cluster per level, feedthrough wires solid."""
        out = [f'digraph "{self.name}" {{', "  rankdir=LR;", "  node [shape=box];"]
        for lv, blocks in enumerate(self.levels):
            out.append(f"  subgraph cluster_level{lv} {{ label=\"level {lv}\";")
            for b in blocks:
                n = self.path_of[id(b)]
                out.append(f'    "{n}" [label="{n}\\n{type(b).__name__}"];')
            out.append("  }")
        for w in self.wires:
            dst = self.blocks[w.dst]
            style = "solid" if dst.direct_feedthrough else "dashed"
            out.append(f'  "{self.names[w.src]}" -> "{self.names[w.dst]}" [label="{w.src_port}->{w.dst_port}", '
                       f"style={style}];")
        out.append("}")
        return "\n".join(out) + "\n"

    def __repr__(self) -> str:
        return (f"Plan({self.name!r}, {len(self.blocks)} blocks, {self.n_levels} levels, "
                f"{len(self.tasks)} tasks)")


def _check_drivers(paths, blocks, wires, attempted, problems) -> None:
    # The wire driving each input; the names of its drivers are spelt only for an input
    # driven more than once (a list and a string per wire would cost 120 bytes each).
    driver: dict[tuple[int, str], tuple] = {}
    more: dict[tuple[int, str], list] = {}
    for w in wires:
        key = (w[2], w[3])
        if key in driver:
            more.setdefault(key, [driver[key]]).append(w)
        else:
            driver[key] = w
    for i, b in enumerate(blocks):
        for p in b.input_names:
            key = (i, p)
            found = more.get(key) or ([driver[key]] if key in driver else [])
            srcs = [f"{paths[s]}.{sp}" for s, sp, _, _ in found]
            if not srcs and p not in b.optional_inputs and (paths[i], p) not in attempted:
                problems.append(Problem(f"input {paths[i]}.{p} is not connected; drive it from "
                                        "an output (a Constant block gives a fixed value)",
                                        paths[i], p))
            elif len(srcs) > 1:
                problems.append(Problem(f"input {paths[i]}.{p} is driven {len(srcs)} times (by "
                                        f"{', '.join(srcs)}); an input takes exactly one wire "
                                        "(use a Sum to add signals)", paths[i], p))


def _check_kinds(paths, blocks, wires, problems) -> None:
    """A String or Binary port (Block rule 11) is wired only to a port of its kind."""
    if not any(b.input_kinds or b.output_kinds for b in blocks):
        return
    for s, sp, d, dp in wires:
        have, want = blocks[s].output_kinds.get(sp), blocks[d].input_kinds.get(dp)
        if have != want:
            problems.append(Problem(
                f"{paths[s]}.{sp} ({have or 'numeric'}) -> {paths[d]}.{dp} ({want or 'numeric'}"
                f" input): a {have or want} port connects only to a {have or want} port "
                "(text and numbers do not convert)", paths[d], dp))


def feedthrough_graph(blocks, wires) -> list:
    """Successors of each block in the direct-feedthrough graph: ``s -> d`` when ``d`` has
    feedthrough; a successor may be listed more than once (the graph algorithms accept it).

    Lists, and one shared empty tuple for blocks without successors: a set per block would
    cost 216 bytes each while the plan is compiled.
    """
    succ: list = [()] * len(blocks)
    for s, _, d, _ in wires:
        if blocks[d].direct_feedthrough:
            out = succ[s]
            if not out:
                succ[s] = [d]
            elif out[-1] != d:
                out.append(d)
    return succ


def compile_model(model, dt: float, log: tuple[str, ...] | None = None, *,
                  allow_loops: bool = False) -> Plan:
    """Compile ``model`` for base step ``dt`` into a :class:`Plan`.

    Parameters
    ----------
    model : Model
        The diagram.
    dt : float
        Base step (s).
    log : tuple of str, optional
        Signals the caller wants logged; unknown ones are reported with the other problems.
    allow_loops : bool
        Accept algebraic loops (they become :attr:`Plan.loops`, solved by iteration at run
        time); otherwise each loop is a problem reported with its path.

    Raises
    ------
    CompileError
        Listing every problem found.
    """
    flat = flatten(model)
    problems: list[str] = list(flat.problems)
    blocks, paths = flat.blocks, flat.paths
    by_name = {p: i for i, p in enumerate(paths)}
    wires = [(by_name[s], sp, by_name[d], dp) for s, sp, d, dp in flat.wires]
    _check_drivers(paths, blocks, wires, flat.attempted, problems)
    _check_kinds(paths, blocks, wires, problems)
    # The wires by path name are not needed any more: freed before the graph is built,
    # whose memory reuses theirs (a large plan's peak, kept by the allocator, is lower).
    del flat

    # Sample times -> integer (period, offset) ticks. With continuous state in the model, blocks
    # that inherit their rate are evaluated at every solver stage too (as in bdsim/Simulink).
    has_cstate = any(b.has_derivative for b in blocks)
    rates: list[tuple[int, int] | None] = []
    continuous = []
    for i, b in enumerate(blocks):
        st = b.sample_time
        continuous.append(st == 0 or (st is None and has_cstate and b.runs_at_stages))
        if st is None or st == 0:
            rates.append((1, 0))
            continue
        if b.has_derivative:
            problems.append(Problem(f"block {paths[i]}: it has continuous state but sample "
                                    f"time {st!r}; leave sample_time unset (or 0)", paths[i]))
        period, offset = st if isinstance(st, tuple) else (st, 0.0)
        p, o = ticks(period, dt), ticks(offset, dt)
        if p is None or o is None or p < 1:
            what = "sample time" if p is None or p < 1 else "offset"
            val = period if what == "sample time" else offset
            problems.append(Problem(f"block {paths[i]}: {what} {val:g} is not an integer "
                                    f"multiple of the base step dt={dt:g}; choose a multiple "
                                    "or reduce dt", paths[i]))
            rates.append(None)
        else:
            rates.append((p, o))

    succ = feedthrough_graph(blocks, wires)
    nodes = range(len(blocks))
    comps = strongly_connected_components(nodes, succ)
    for comp in comps:
        if not is_cycle(comp, succ):
            continue
        cycle = cycle_through(comp, succ)
        path = " -> ".join(paths[i] for i in cycle)
        if not allow_loops:
            problems.append(Problem(f"algebraic loop: {path} (every block on it has direct "
                                    "feedthrough); break it with a UnitDelay or a block "
                                    "without direct feedthrough, or enable the loop solver",
                                    paths[cycle[0]]))
        elif len({rates[i] for i in comp}) > 1 or len({continuous[i] for i in comp}) > 1:
            subs = [i for i in cycle if blocks[i].nests_plan]
            if subs:
                # Atomic subsystems (co-simulation units) coupled algebraically at different
                # steps: the loop solver cannot, and the master's coupling iteration then
                # has no monolithic run to equal.
                steps = ", ".join(f"{paths[i]}: {blocks[i].sample_time}" for i in subs)
                problems.append(Problem(
                    f"algebraic loop {path} couples atomic subsystems (co-simulation units) "
                    f"with different steps ({steps}) through direct feedthrough; give them "
                    "one step, or break the loop with a state (a UnitDelay) in one of them",
                    paths[cycle[0]]))
            else:
                problems.append(Problem(f"algebraic loop {path} mixes sample times; give its "
                                        "blocks one rate", paths[cycle[0]]))

    if log is not None:
        # "path/inner.port" under a block that runs its own plan is checked by that plan.
        nested = tuple(p + "/" for p, b in zip(paths, blocks) if b.nests_plan)
        for ref in log:
            if ref == ALL_OUTPUTS:
                continue
            parts = split_ref(ref)
            ok = parts is not None and parts[0] in by_name and \
                (parts[1] in blocks[by_name[parts[0]]].output_names
                 or parts[1] in blocks[by_name[parts[0]]].input_names)
            if not ok and not (nested and isinstance(ref, str) and ref.startswith(nested)):
                problems.append(f"log: {ref!r} is not a port of the model (write 'block.port')")

    if problems:
        raise CompileError(problems, model.name)

    # Topological order of the condensation (a loop is one node, its blocks in insertion
    # order); ties by insertion order, so plans are stable.
    corder, clevel = condensation_levels(nodes, comps, succ)
    order = [i for c in corder for i in comps[c]]
    level = [0] * len(blocks)
    for c, comp in enumerate(comps):
        for i in comp:
            level[i] = clevel[c]
    # One int object per position, shared by the wires and the tasks (a 100,000-block plan
    # would otherwise hold each index several times over, 28 bytes a copy).
    ints = list(range(len(order)))
    pos = {old: ints[new] for new, old in enumerate(order)}
    loops = tuple(tuple(pos[i] for i in comp) for comp in comps if is_cycle(comp, succ))
    ordered = tuple(blocks[i] for i in order)

    keys = sorted({rates[i] for i in range(len(blocks))})
    task_index = {k: n for n, k in enumerate(keys)}
    task_of = tuple(task_index[rates[i]] for i in order)
    tasks = tuple(Task(p, o, tuple(j for j in ints if task_of[j] == n))
                  for n, (p, o) in enumerate(keys))
    resolved = tuple(Wire(pos[s], sp, pos[d], dp) for s, sp, d, dp in wires)
    return Plan(model.name, dt, ordered, [level[i] for i in order], tasks, task_of, resolved,
                names=tuple(paths[i] for i in order),
                loops=tuple(sorted(loops)), continuous=tuple(continuous[i] for i in order))
