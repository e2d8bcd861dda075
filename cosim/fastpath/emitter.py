"""The one emitter of the generated fast path: it walks a plan's groups of blocks and writes the
Python source of the step function, asking a strategy how to name values and assign them.

Both strategies share everything that decides *what* is computed and in which order: the
kernel-name substitution (``u_``, ``x_``, ``c_``, ``p_``, ``l_``, ``dt``, ``t``), the output
statements under their task guards, the log rows, the state updates (continuous ``cstate``
first, then the discrete states, a group's expressions all evaluated before any is assigned)
and the inline explicit Runge–Kutta stages written from the solver's tableau in the solver's
own operation order. A strategy (:mod:`cosim.fastpath.scalar`, :mod:`cosim.fastpath.vector`)
only decides *how* values are held: local floats or slices of numpy arrays. So every value is
computed by the same IEEE operations in the same order as the reference interpreter.
"""

from __future__ import annotations

import functools
import math
import re
import sys

import numpy as np

from cosim.fastpath import cache, chunked, frame, nested, structure
from cosim.fastpath.chunked import own_globals
from cosim.fastpath.runtime import FastPath, Unsupported
from cosim.run.state import FlatValues
from cosim.solvers.explicit import ExplicitRK

__all__ = ["CHUNK", "Strategy", "Writer", "build", "tableau"]


#: Statements per generated function of a large plan (see :mod:`cosim.fastpath.chunked`).
CHUNK = 1000

#: ``u_<input>``, ``x_<state>``, ``c_<i>``, ``p_<param>``, ``l_<i>`` in a kernel expression.
NAME = re.compile(r"\b([uxcpl])_([A-Za-z0-9_]+)\b")
DT = re.compile(r"\bdt\b")
#: A kernel expression reading a discrete state.
STATE = re.compile(r"\bx_")
T = re.compile(r"\bt\b")


class Strategy:
    """How generated code holds values: the contract between the emitter and a strategy.

    The emitter names every value by an *array* and the *slots* of a group's members in it:
    ``"S"`` signals and ``"D"`` discrete states (slots of :class:`~cosim.fastpath.layout.Layout`),
    ``"C"`` the continuous state, ``"Z"`` a Runge–Kutta stage's continuous state and ``"K<i>"``
    stage ``i``'s derivatives (indices into the continuous state vector). A strategy writes:

    1. :meth:`ref` — the source naming those values (one slot per group member);
    2. :meth:`set` — statements assigning one expression to such a ref;
    3. :meth:`assign` — statements assigning several expressions simultaneously;
    4. :meth:`row` — the statement appending a log row;
    5. :meth:`stage_sum` — the statements of one Runge–Kutta combination;
    6. :attr:`prologue` / :attr:`epilogue` — lines loading and storing values around the loop,
       :attr:`preamble` — module-level lines run once per fast path (its buffers).

    The base class holds the groups, the generated function's globals and :meth:`const`.

    Parameters
    ----------
    groups : list of list of int
        Plan indices of the blocks the emitter handles together, in execution order; the
        members of a group share one kernel template, level and task.
    label : str
        Pseudo file name of the generated code (shown in tracebacks).

    Attributes
    ----------
    namespace : dict
        Globals of the generated function (``math``, ``inf``, ``nan`` and constants).
    consts : Consts
        The constants in order of creation, ``(str, tuple or None, object)`` each (see
        :meth:`const`).
    vector : bool
        Whether the run state holds the flat values as numpy arrays (else Python lists).
    locate_modes : bool
        Hold the modes of blocks with switching surfaces through each Runge–Kutta step and
        hand the steps that change a surface's sign to ``_located(k, flags, held, slots)``
        (an ensemble's scalar code, :mod:`cosim.fastpath.ensemble_run`; False by default:
        such plans run on the interpreter).
    """

    vector = False
    locate_modes = False
    #: With ``locate_modes``: continuous-state slots whose zero crossings are watched too,
    #: ``(slot, "rising" | "falling" | "both")`` (an ensemble's events).
    watched: tuple = ()
    #: With ``locate_modes``: hand every step to ``_located``, with or without a surface
    #: (an ensemble's scheduled events, fired per member).
    every_step = False
    #: Names of the log lists and of a Runge–Kutta step's ``h`` in the generated code.
    rows, ticks, h = "rows", "ticks", "h"
    #: Statements per generated function of a large plan; None: :data:`CHUNK` (an
    #: ensemble's translation, which reads one function, asks for more).
    chunk: int | None = None

    def __init__(self, groups: list[list[int]], label: str):
        self.groups = groups
        self.label = label
        self.namespace = {"math": math, "inf": math.inf, "nan": math.nan}
        self.prologue: list[str] = []
        self.epilogue: list[str] = []
        self.preamble: list[str] = []
        self.consts = cache.Consts()
        self._named: dict[tuple, str] = {}      # recipe -> its global's name
        #: Globals holding live values (:class:`~cosim.model.diagram.Inport`'s, read as
        #: ``<name>[<i>]``) -> their length: a single step function reads them once per
        #: call (see :func:`~cosim.fastpath.frame.hoisted`).
        self.lives: dict[str, int] = {}

    def const(self, value, recipe: tuple | None = None) -> str:
        """Name of a new global of the generated function bound to ``value``.

        ``recipe`` says where a value that changes between runs of one structure comes from
        (see :func:`_recipe_value`): ``("p", group, name)``, a parameter of the members of
        ``group`` (a tuple of block indices, or one index); ``("l", i)``, the live values of block ``i``. Without one the value is
        structural (an index array), kept with the cached code and shared by its runs.
        A recipe named before gives the same name (a gain read by every Runge–Kutta stage is
        one global, bound once per run).
        """
        if recipe in self._named:
            return self._named[recipe]
        # Interned: the compiled code names it with this very string (not a copy per block).
        name = sys.intern(f"_k{len(self.namespace)}")
        if recipe is not None:
            self._named[recipe] = name
        self.namespace[name] = value
        self.consts.append(name, recipe, None if recipe else value)
        return name

    def ref(self, array: str, slots: list[int]) -> str:
        """Source of the values at ``slots`` of ``array`` (``S``, ``D``, ``C``, ``Z``, ``K<i>``)."""
        raise NotImplementedError

    def set(self, target: str, expr: str) -> list[str]:
        """Statements giving ``target`` (a :meth:`ref`) the value of ``expr``, which does not
        read it."""
        return [f"{target} = {expr}"]

    def assign(self, targets: list[str], exprs: list[str]) -> list[str]:
        """Statements giving each target its expression, all evaluated before any is assigned."""
        raise NotImplementedError

    def row(self, task: int, slots: list[int]) -> str:
        """Statement appending to ``rows[task]`` the signals at ``slots`` (a new row: an
        array of them, or the values themselves one after the other)."""
        raise NotImplementedError

    def stage_sum(self, target: str, terms) -> list[str]:
        """Statements setting ``target`` (``"Z"`` or ``"C"``) to ``C + h * (a * K<j> + ...)``
        over ``terms`` ``[(a, j)]`` (to ``C`` itself when empty), summed left to right."""
        raise NotImplementedError

    def whole_sum(self, target: str, terms) -> list[str] | None:
        """Lines of a chunked step function computing :meth:`stage_sum` over the whole
        vectors ``C``, ``Z`` and ``K<i>`` it binds (see :meth:`chunk_state`), or None (by
        default): the statements of :meth:`stage_sum` then run in chunk functions."""
        return None

    def chunk_reads(self, lines: list[str]) -> set:
        """Values that lines of a chunk function (or of the log statements) read from ``S``
        or ``D`` when the strategy holds values in locals (none by default: values named by
        :meth:`ref` are the arrays themselves)."""
        return set()

    def chunk_io(self, body: list[str], reads: set,
                 shared: set) -> tuple[list[str], list[str], list[str]]:
        """Lines around a chunk function's ``body`` (source lines, indented 4): loading what
        it reads (``reads``: its :meth:`chunk_reads`), storing every tick what it assigns and
        some function reads (``shared``: the union of every :meth:`chunk_reads`), and storing
        everything it assigns at the last tick of a call (none by default)."""
        return [], [], []

    def chunk_state(self, n_stages: int) -> tuple[list[str], list[str]]:
        """Lines of a chunked step function with continuous state (see
        :func:`~cosim.fastpath.chunked.frame`) before its loop and in its ``finally``
        clause: they bind what its functions receive as ``C``, ``Z`` and ``K0`` ..
        ``K<n_stages-1>`` (none by default: the arrays :meth:`ref` names are the run
        state's and the strategy's own)."""
        return [], []

    def direct(self, statement: str) -> str:
        """``statement`` reading ``S`` itself instead of values held elsewhere (identity by
        default)."""
        return statement


def guard(task, k: str = "k") -> str | None:
    """Source of the condition under which ``task`` runs at tick ``k`` (the variable named
    ``k``; None: every tick)."""
    if task.period == 1 and task.offset == 0:
        return None
    if not task.offset:
        return f"{k} % {task.period} == 0"
    return f"({k} - {task.offset}) % {task.period} == 0 and {k} >= {task.offset}"


def tableau(solver):
    """``(stage terms, nodes, weight terms)`` of a fixed-step explicit RK solver, else None."""
    if not isinstance(solver, ExplicitRK) or solver.adaptive:
        return None
    return solver.stage_terms, solver.nodes, solver.weight_terms


def build(plan, config, state, store, solver, layout, kernels, tab, strategy,
          release: bool = False) -> FastPath:
    """Generate, compile and bind the step function of ``plan`` written by ``strategy``.

    Parameters
    ----------
    plan : Plan
    config : SimulationConfig
        Base step ``dt`` and start time ``t0``.
    state : RunState
        Run state the step function owns (initialized); ``state.X`` has shape ``(n_c,)``.
    store : LogStore
        Log store the step function appends to.
    solver : Solver or None
        The continuous solver, whose counters the inline integration advances.
    layout : Layout
        Flat slots of the plan's values.
    kernels : list of Kernel
        Each block's kernel, in plan order.
    tab : tuple or None
        The solver's tableau (see :func:`tableau`); None without continuous state.
    strategy : Strategy
    release : bool
        The caller runs the step function next (the blocks' dicts may go stale now): the
        flat values are the truth from here on and the blocks' output and input dicts are
        emptied before the code is written, not at its first call, so the memory they free
        is reused while it is written (a large plan's peak, which the allocator keeps, is
        lower by about 0.2 kB per block); they are filled again if it fails.
    """
    flat = FlatValues(layout.signal_slots, layout.state_slots, vector=strategy.vector)
    if not release:
        return _build(plan, config, state, store, solver, layout, kernels, tab, strategy, flat)
    state.flat = flat
    state.mark_stale()
    try:
        return _build(plan, config, state, store, solver, layout, kernels, tab, strategy, flat)
    except BaseException:
        state.blocks_current()
        state.drop_flat()
        raise


def _build(plan, config, state, store, solver, layout, kernels, tab, strategy, flat):
    """:func:`build` once the flat values ``flat`` hold the run's values."""
    namespace = strategy.namespace
    key = structure.fingerprint(plan, config, store, layout, kernels, tab, strategy,
                                state.X.size, chunk_of(strategy))
    entry = cache.emitted(key)
    if entry is None:
        pieces, columns = Writer(plan, layout, kernels, strategy).pieces(config, store, tab,
                                                                          state.X.size)
        codes = cache.code_for(pieces, strategy.label)
        entry = cache.Emitted("".join(pieces), codes, tuple(map(tuple, columns)),
                              strategy.consts)
        del pieces
        cache.remember(key, entry)
    else:
        # The same structure: the source is the one written before; only the values differ.
        namespace.update((name, value if recipe is None else _recipe_value(recipe, kernels))
                         for name, recipe, value in entry.consts)
    for code in entry.code:
        exec(code, namespace)
    own_globals(namespace)
    fast = FastPath(state, store, entry.source, namespace["advance"], flat,
                    [list(c) for c in entry.columns], solver, len(tab[1]) + 1 if tab else 0)
    fast.key = key
    return fast


def _recipe_value(recipe: tuple, kernels):
    """The value of a constant of recipe ``("p", group, name)`` (a parameter: one float
    when the members of ``group`` share it, else their array; ``group`` is a tuple of block
    indices, or one index), ``("l", i)`` (block ``i``'s live values) or ``("n", i, ...)``
    (of atomic subsystem ``i``'s inlined plan, see :func:`~cosim.fastpath.nested.recipe_value`)
    in a plan of ``kernels``."""
    if recipe[0] == "l":
        return kernels[recipe[1]].live
    if recipe[0] == "n":
        return nested.recipe_value(recipe, kernels, _recipe_value)
    _, group, r = recipe
    if isinstance(group, int):
        return float(kernels[group].params[r])
    values = [float(kernels[i].params[r]) for i in group]
    if len(group) == 1 or values.count(values[0]) == len(values):
        return values[0]
    return np.array(values)


@functools.lru_cache(maxsize=4096)
def _parts(text: str, dt: str, tvar: str) -> tuple[str, ...]:
    """A kernel expression split once per spelling (a 100,000-block plan repeats a few):
    ``(source, kind, name, source, ..., source)``, the names of :data:`NAME` between pieces
    of source whose ``dt`` and ``t`` are already written as ``dt`` and ``tvar`` (a name
    starts and ends at a word boundary, so the pieces match these as the whole would)."""
    parts = NAME.split(text)
    for j in range(0, len(parts), 3):
        parts[j] = DT.sub(dt, parts[j])
        if tvar != "t":
            parts[j] = T.sub(tvar, parts[j])
    return tuple(parts)


class Writer:
    """Writes the statements of one plan's step function through a strategy.

    A plan inlined in another's step function (an atomic subsystem, see
    :mod:`cosim.fastpath.nested`) has a clock of its own: ``prefix`` names its tick
    ``<prefix>k``, time ``<prefix>t`` and stage time ``<prefix>ts``; ``top`` is the strategy
    of the outermost function (which loads and stores every inlined plan's values), and
    ``bound`` maps each of its Inports (plan index) to the source of the value it takes.
    """

    def __init__(self, plan, layout, kernels, strategy, prefix: str = "", top=None,
                 bound: dict | None = None):
        self.plan, self.layout, self.kernels, self.s = plan, layout, kernels, strategy
        self.prefix = prefix
        self.k, self.t, self.ts = prefix + "k", prefix + "t", prefix + "ts"
        self.top = top or strategy
        self.bound = bound or {}
        self.inlined: dict[int, nested.Inlined] = {}

    def nest(self, i: int) -> nested.Inlined:
        """The inlined plan of block ``i`` (an atomic subsystem), written on first use."""
        if i not in self.inlined:
            self.inlined[i] = nested.Inlined(self, i)
        return self.inlined[i]

    def subst(self, group, text: str, cvar: str = "C", tvar: str | None = None) -> str:
        """A kernel expression of ``group``'s template with its names bound to the values;
        ``cvar`` names the continuous state read, ``tvar`` the time (default the tick's)."""
        plan, layout, s = self.plan, self.layout, self.s
        tvar = tvar or self.t

        def name(kind, r):
            if kind == "u":
                return s.ref("S", [layout.input_slot(plan, i, r) for i in group])
            if kind == "x":
                return s.ref("D", [layout.state_at[(i, r)] for i in group])
            if kind == "c":
                return s.ref(cvar, [layout.cont_at[(i, r)] for i in group])
            if kind == "l":
                # Live values: singleton groups.
                recipe = ("l", group[0])
                values = _recipe_value(recipe, self.kernels)
                live = s.const(values, recipe)
                self.top.lives[live] = len(values)
                return f"{live}[{int(r)}]"
            # Parameters are data (globals of the generated code), never literals in its
            # source: the source then depends only on the plan's structure (see cache).
            # A value shared by the whole group (a parameter of a test) stays one float.
            # A singleton group is its block's index (a scalar plan has 100,000 of them).
            recipe = ("p", group[0] if len(group) == 1 else tuple(group), sys.intern(r))
            return s.const(_recipe_value(recipe, self.kernels), recipe)
        # The members of a group share a task, hence a sample period.
        parts = _parts(text, repr(plan.sample_period[group[0]]), tvar)
        out = [parts[0]]
        for j in range(1, len(parts), 3):
            out += (name(parts[j], parts[j + 1]), parts[j + 2])
        return "".join(out)

    def outputs(self, group, cvar: str = "C", tvar: str | None = None,
                held: bool = False) -> list[str]:
        """Statements computing ``group``'s outputs (``tvar``: the time, default the tick's;
        with ``held``, a block with modes gives its outputs with the mode held, as inside a
        solver step)."""
        at, s = self.layout.signal_at, self.s
        i = group[0]
        if i in self.bound:
            # Bound to a value held through the tick: not evaluated again at solver stages.
            if tvar not in (None, self.t):
                return []
            return s.set(s.ref("S", [at[(i, "out")]]), self.bound[i])
        if isinstance(self.kernels[i], nested.Nested):
            return self.nest(i).outputs()
        tvar = tvar or self.t
        kern = self.kernels[i]
        texts = kern.held if held and kern.held else kern.outputs
        return [st for p, text in texts.items()
                for st in s.set(s.ref("S", [at[(i, p)] for i in group]),
                                self.subst(group, text, cvar, tvar))]

    def updates(self) -> tuple[list[list], list[list]]:
        """``(guard, statement)`` of the state updates at the end of a tick, per group:
        ``(continuous, discrete)``.

        Continuous states held between solver intervals come first: like every state update
        they read this tick's discrete states, which the assignments after them replace.
        """
        plan, layout, s = self.plan, self.layout, self.s
        cont, disc = [], []
        for g in s.groups:
            cstate = self.kernels[g[0]].cstate
            if cstate:
                targets = [s.ref("C", [layout.cont_at[(i, str(j))] for i in g])
                           for j in range(len(cstate))]
                gd = guard(plan.tasks[plan.task_of[g[0]]], self.k)
                cont.append([(gd, st) for st in s.assign(targets,
                                                         [self.subst(g, e) for e in cstate])])
        for g in s.groups:
            gd = guard(plan.tasks[plan.task_of[g[0]]], self.k)
            if isinstance(self.kernels[g[0]], nested.Nested):
                # An atomic subsystem's state update: its inner ticks to its next hit.
                disc.append([(gd, self.nest(g[0]).step())])
                continue
            states = self.kernels[g[0]].state
            if states:
                targets = [s.ref("D", [layout.state_at[(i, n)] for i in g]) for n in states]
                exprs = [self.subst(g, e) for e in states.values()]
                disc.append([(gd, st) for st in s.assign(targets, exprs)])
        return cont, disc

    def logs(self, store, ticks: bool = True) -> tuple[list, list]:
        """``(guard, statement)`` of the log appends (without ``ticks``, only the rows: the
        caller appends the ticks), and per task ``(log key, column)``.

        Signals of a task that are one value (an Outport's recorded input and the output
        driving it) share a column: a row holds each value once, and the log store gives
        each key its own copy.
        """
        plan = self.plan
        columns = [[] for _ in plan.tasks]
        slots = [[] for _ in plan.tasks]
        at: list[dict[int, int]] = [{} for _ in plan.tasks]      # slot -> its column
        for i, p, key in store.refs:
            ti = plan.task_of[i]
            slot = self.layout.log_slot(plan, i, p)
            if slot not in at[ti]:
                at[ti][slot] = len(slots[ti])
                slots[ti].append(slot)
            columns[ti].append((key, at[ti][slot]))
        stmts = []
        for n, task in enumerate(plan.tasks):
            gd = guard(task, self.k)
            if ticks:
                stmts.append((gd, f"{self.s.ticks}[{n}].append({self.k})"))
            if slots[n]:
                stmts.append((gd, self.s.row(n, slots[n])))
        return stmts, columns

    def integration(self, config, tab, held: bool) -> list[tuple[list[str], list[str], tuple]]:
        """One explicit Runge–Kutta step of the continuous state to tick k+1, in segments
        ``(lines, statements, combination)``: lines of the step function itself (the step
        ``h``, a stage's time ``ts``), then statements a chunked frame may split into
        functions; ``combination`` is ``(target, terms)`` of a segment computing a
        Runge–Kutta combination (see :meth:`Strategy.stage_sum`), else None.

        Each stage recomputes the outputs of the blocks evaluated between stages (the
        plan's continuous blocks) at the stage's state and time, then their derivatives.
        The first stage's outputs are those of the tick itself unless a state update changed
        what they read: continuous states held between solver intervals (``held``), or a
        discrete state they read, or their task did not run.
        """
        terms, nodes, weights = tab
        plan, at, s = self.plan, self.layout.cont_at, self.s
        minor = [g for g in s.groups if plan.continuous[g[0]]]
        # Modes held through the step, and the steps that change a switching surface's sign
        # handed to the caller (``_located``): only for a strategy that asks (ensembles).
        modes = [g for g in minor if self.kernels[g[0]].surfaces] if s.locate_modes else []
        current = not held and not modes and not any(
            guard(plan.tasks[plan.task_of[g[0]]]) is not None or
            any(STATE.search(text) for text in self.kernels[g[0]].outputs.values())
            for g in minor)

        h = s.h

        def stage(si: int, cvar: str, tvar: str) -> list[str]:
            lines = []
            for g in minor:
                if si or not current:
                    lines.extend(self.outputs(g, cvar, tvar, held=bool(modes)))
            for g in minor:
                for j, text in enumerate(self.kernels[g[0]].derivatives):
                    lines.extend(s.set(s.ref(f"K{si}", [at[(i, str(j))] for i in g]),
                                       self.subst(g, text, cvar, tvar)))
            return lines

        k, t, ts = self.k, self.t, self.ts
        first = stage(0, "C", t)
        # Zero crossings of continuous states watched (ensembles' events): ``(slot, rule)``.
        watched = list(s.watched) if s.locate_modes else []
        located = bool(modes or watched or (s.locate_modes and s.every_step))
        if located:
            first = ["_tickstart()", *first, *self.surfaces(modes, watched, "vp", "C", t)]
        segments = [([f"{h} = ({config.t0!r} + ({k} + 1) * {config.dt!r}) - {t}"], first,
                     None)]
        # A stage's time is computed only where the stage reads it (a time-varying input of
        # a continuous block): most plans' stages read states only.
        reads_ts = re.compile(rf"\b{ts}\b")
        for si, (tm, node) in enumerate(zip(terms, nodes), start=1):
            segments.append(([], s.stage_sum("Z", tm), ("Z", tm)))
            lines = stage(si, "Z", ts)
            clock = [f"{ts} = {t} + {node!r} * {h}"] if any(map(reads_ts.search, lines)) else []
            segments.append((clock, lines, None))
        segments.append(([], s.stage_sum("C", weights), ("C", weights)))
        if located:
            # The surfaces at the step's end (the interpreter's check after a solver step).
            end = [st for g in minor for st in self.outputs(g, "C", "te", held=True)] \
                if modes else []
            end += self.surfaces(modes, watched, "vn", "C", "te")
            rules = ["both"] * sum(len(self.kernels[g[0]].surfaces) for g in modes) + \
                [rule for _, rule in watched]
            rising, falling = "vp{n} < 0.0 and vn{n} >= 0.0", "vp{n} > 0.0 and vn{n} <= 0.0"
            test = {"rising": rising, "falling": falling, "both": f"{rising} or {falling}"}
            flags = [f"vq{n} = (1.0 if {test[rule].format(n=n)} else 0.0)"
                     for n, rule in enumerate(rules)]
            # What the steps read that is not computed inside them: the held outputs of the
            # blocks outside (``_located`` restores them for the member's own step).
            inside = {id(plan.blocks[i]) for g in minor for i in g}
            driver, slots = self.layout.driver, self.layout.signal_slots
            read = sorted({driver[(i, p)] for g in minor for i in g
                           for p in plan.blocks[i].input_names
                           if (i, p) in driver and id(slots[driver[(i, p)]][0]) not in inside})
            held_in = "".join(f"{s.ref('S', [j])}, " for j in read)
            end += flags + [f"_located(k, ({''.join(f'vq{n}, ' for n in range(len(rules)))}), "
                            f"({held_in}), {tuple(read)!r})"]
            segments.append(([f"te = {config.t0!r} + (k + 1) * {config.dt!r}"], end, None))
        return segments

    def surfaces(self, modes, watched, prefix: str, cvar: str, tvar: str) -> list[str]:
        """``<prefix><n> = <surface n>`` of the mode blocks ``modes`` (groups), then of the
        watched continuous-state slots, numbered on."""
        out = []
        for g in modes:
            for text in self.kernels[g[0]].surfaces:
                out.append(f"{prefix}{len(out)} = {self.subst(g, text, cvar, tvar)}")
        for slot, _ in watched:
            # ``+c``: a value of its own (a bare name would be bound to the state's array)
            out.append(f"{prefix}{len(out)} = +{self.s.ref(cvar, [slot])}")
        return out

    def pieces(self, config, store, tab, n_c: int) -> tuple[list[str], list]:
        """Source of the step function in pieces of whole functions (compiled one by one,
        see :func:`~cosim.fastpath.cache.code_for`), and its per-task log columns."""
        plan, s = self.plan, self.s
        body = [[(guard(plan.tasks[plan.task_of[g[0]]]), st) for st in self.outputs(g)]
                for g in s.groups]
        log_stmts, columns = self.logs(store)
        cont, disc = self.updates()
        integ = self.integration(config, tab, bool(cont)) if n_c else []
        # Lines, not statements: an inlined atomic subsystem's tick is one statement of many.
        size = sum(st.count("\n") + 1 for part in (body, cont, disc) for x in part
                   for _, st in x)
        limit = chunk_of(s)
        if size + sum(len(stmts) for _, stmts, _ in integ) > limit:
            if self.inlined:
                raise Unsupported("atomic subsystems inlined in a plan too large for one "
                                  "function")
            n_stages = len(tab[1]) + 1 if n_c else 0
            # A combination the strategy writes over whole vectors is a line of the step
            # function, not a statement per component.
            segments = []
            for lines, stmts, combination in integ:
                whole = s.whole_sum(*combination) if combination else None
                segments.append((lines + whole, []) if whole is not None else (lines, stmts))
            return chunked.frame(config.t0, config.dt, body, log_stmts, cont + disc, segments,
                                 s, n_stages, limit), columns
        lines = [ln for lines, stmts, _ in integ for ln in lines + stmts]
        upd = [st for stmts in cont + disc for st in stmts]
        return [frame.hoisted(frame.single(config.t0, config.dt,
                                           [st for stmts in body for st in stmts], log_stmts,
                                           upd, lines, s.prologue, s.epilogue, s.preamble),
                              s.lives)], columns


def chunk_of(strategy) -> int:
    """Statements per generated function of a large plan for ``strategy``."""
    return CHUNK if strategy.chunk is None else strategy.chunk
