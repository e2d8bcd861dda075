"""Run N parameter sets of one model as one ensemble on the fast path.

A reference run (the first parameter set) is built, compiled and initialized once; its
generated scalar step function is translated for member arrays (:mod:`cosim.fastpath.ensemble`).
What differs between members is found without building N models
(:mod:`cosim.fastpath.ensemble_members`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

import numpy as np

from cosim.fastpath import ensemble, ensemble_ops
from cosim.fastpath.ensemble_events import Located
from cosim.fastpath.ensemble_logs import MemberLogs
from cosim.fastpath.ensemble_members import Members, const_values
from cosim.fastpath.layout import kernels_of
from cosim.fastpath.runtime import Unsupported, warm

__all__ = ["MAX_STATEMENTS", "reusable", "run_members", "scalar_fast_path", "why_not_fast"]

#: Compiled ensemble step functions by (scalar source, member constants).
_compiled: dict = {}


def reusable(sim, model, fast=None) -> None:
    """Check that runs of ``sim``'s model with other parameter values can reuse its
    generated code (:class:`~cosim.fastpath.ensemble_members.Members`,
    :func:`run_members`).

    Parameters
    ----------
    fast : FastPath, optional
        The scalar fast path to reuse (default: the simulator's own).

    Raises
    ------
    Unsupported
        Naming the reason and the block: no scalar fast path, a task with an offset (its
        signals' initial values are read), a block that does something at the end of a run
        (``finalize``), events, or the code no longer cached.
    """
    from cosim.fastpath import cache
    from cosim.model.block import Block
    fast = fast if fast is not None else sim.fast_path
    if fast is None:
        raise Unsupported(why_not_fast(sim))
    if fast.vector:
        raise Unsupported("the plan runs on the vector strategy")
    plan = sim.plan
    offset = next((t for t in plan.tasks if t.offset), None)
    if offset is not None:
        first = next(n for i, n in enumerate(plan.names)
                     if plan.tasks[plan.task_of[i]] is offset)
        raise Unsupported(f"block {first} runs in a task with an offset")
    ends = next((n for b, n in zip(plan.blocks, plan.names)
                 if type(b).finalize is not Block.finalize), None)
    if ends is not None:
        raise Unsupported(f"block {ends} finalizes its run")
    if getattr(model, "events", None) and not getattr(fast, "watching", False):
        raise Unsupported(f"events ({', '.join(e.name for e in model.events)})")
    if cache.by_source(fast.source) is None:
        raise Unsupported("generated code not in the cache")


def why_not_fast(sim) -> str:
    """Why ``sim``'s plan has no generated fast path, naming the block where one is the
    reason."""
    from cosim.fastpath import emitter
    from cosim.run.eventmonitor import switching_blocks
    plan = sim.plan
    if not sim.config.fast:
        return "SimulationConfig(fast=False)"
    if plan.loops:
        return "algebraic loops"
    modes = switching_blocks(plan)
    if modes:
        path, b = modes[0]
        return (f"block {path} ({type(b).__name__}) switches modes at located times "
                "(continuous input)")
    if sim.state.X.size and emitter.tableau(sim.interpreter.solver) is None:
        return f"solver {sim.config.solver!r} has no inline form"
    for b, n in zip(plan.blocks, plan.names):
        if b.kernel() is None:
            return f"block {n} ({type(b).__name__}) has no fast-path kernel"
    return "a block's signals or states are not scalars"


def _watched(sim) -> list[tuple[int, str]]:
    """``(continuous-state slot, direction)`` of each zero crossing of the model's events,
    which an ensemble locates per member (its scheduled events are fired per member too,
    see :class:`~cosim.fastpath.ensemble_events.Located`; stopping events end each member's run at its own time).

    Raises
    ------
    Unsupported
        Naming an event that watches a signal (and its block): crossings of signals are
        not located per member.
    """
    from cosim.compile.flatten import split_ref
    from cosim.model.events import ZeroCrossing
    events = getattr(sim, "events", None) or []
    slices = {sim.plan.path_of[id(b)]: sl for b, sl in sim.interpreter.cslices}
    out = []
    for ev in events:
        if not isinstance(ev, ZeroCrossing):
            continue
        if ev.watch not in slices:
            block = (split_ref(ev.watch) or (ev.watch,))[0]
            raise Unsupported(f"event {ev.name!r} watches the signal {ev.watch!r} of block "
                              f"{block}: an ensemble locates zero crossings of continuous "
                              "states per member, not of signals (watch the block's state, "
                              "or run without ensemble)")
        out.append((slices[ev.watch].start + ev.index, ev.direction.value))
    return out


def _scheduled(sim) -> bool:
    """True if ``sim``'s model has scheduled events."""
    from cosim.model.events import Scheduled
    return any(isinstance(ev, Scheduled) for ev in getattr(sim, "events", None) or [])


#: Most statements of a plan's step function that an ensemble translates (a larger plan's
#: members run as copies, saying so): its translation, a few numpy calls per statement in
#: one function, compiles in time about linear up to here (issue 17's chunks bound a single
#: run's functions at :data:`~cosim.fastpath.emitter.CHUNK` statements).
MAX_STATEMENTS = 20_000


def _chunked(fast) -> bool:
    """True if ``fast``'s step function is split into chunk functions (a large plan)."""
    from cosim.fastpath.chunked import CHUNK_PREFIXES
    return re.search(rf"^def ({'|'.join(CHUNK_PREFIXES)})", fast.source, re.M) is not None


def scalar_fast_path(sim):
    """The scalar strategy's fast path of ``sim``'s plan in one function: the simulator's
    own, or, where it chose the vector strategy (many blocks of one kind) or split a large
    plan's step function into chunks, one built for the ensemble (initialized, not run: its
    values are the reference's initial ones).

    Raises
    ------
    Unsupported
        The plan has no fast path (the reason names the block), or more than
        :data:`MAX_STATEMENTS` statements.
    """
    from cosim.run.eventmonitor import switching_blocks
    fast = sim.fast_path
    watched = _watched(sim)
    # Scheduled events inside a step: that step is handed to ``_located`` (every step is).
    every = _scheduled(sim) and sim.state.X.size > 0
    modes = bool(switching_blocks(sim.plan)) or bool(watched) or every
    if fast is None and not modes and not getattr(sim, "events", None):
        raise Unsupported(why_not_fast(sim))
    if fast is not None and not fast.vector and not _chunked(fast):
        return fast
    from cosim.fastpath import emitter
    from cosim.fastpath.layout import Layout
    from cosim.fastpath.scalar import Scalar
    plan, interp = sim.plan, sim.interpreter
    kernels = kernels_of(plan)
    n_c = sim.state.X.size
    tab = emitter.tableau(interp.solver) if n_c else None
    if kernels is None or (n_c and tab is None) or plan.loops or not sim.config.fast:
        raise Unsupported(why_not_fast(sim))
    layout = Layout(plan, interp.cslices)
    strategy = Scalar(plan, layout, n_c)
    strategy.chunk = MAX_STATEMENTS       # one function; a larger plan is chunked: refused
    if modes:
        # Modes held through each step; a step that changes a switching surface's or a
        # watched state's sign is handed to ``_located`` (run again on the interpreter,
        # member by member).
        strategy.locate_modes = True
        strategy.watched = tuple(watched)
        strategy.every_step = every
        strategy.label += f" (modes held, watching {strategy.watched}, every step {every})"
    # Its own run state's flat values: the simulator's stay its own path's.
    from cosim.run.state import RunState
    state = RunState(plan)
    state.X = sim.state.X.copy()
    fast = emitter.build(plan, sim.config, state, sim.store, interp.solver, layout, kernels,
                         tab, strategy)
    fast.watching = True                   # its events are fired per member
    if _chunked(fast):
        raise Unsupported(f"the plan's step function has more than {MAX_STATEMENTS:,} "
                          "statements (one function per ensemble)")
    return fast


def run_members(sim, model, overrides: Sequence[Mapping], others: list | None = None,
                switches: list | None = None, events: list | None = None) -> list:
    """Run ``sim``'s model for each parameter set of ``overrides`` as one ensemble.

    Parameters
    ----------
    sim : Simulator
        Built from ``model`` (with any parameter values of the members' structure),
        initialized, not run; its plan must have a fast path (the scalar strategy's is
        translated; built here when the simulator chose the vector one).
    model : Model
        Its model (evaluated).
    overrides : list of dict
        Each member's parameter values (over ``model.parameters``).
    others : list, optional
        Where given, members whose parameters change the structure are not run: their
        indices are appended to it and their logs are None (run them as an ensemble of
        their own structure). Else such a member raises.
    switches : list, optional
        Filled with each member's located mode switches ``(t, block path)``, as its own
        run's ``Simulator.switch_log`` (a relay on a continuous signal).
    events : list, optional
        Filled with each member's events ``(t, name)``, as its own run's
        ``Simulator.event_log`` (zero crossings of continuous states, located per member).

    Returns
    -------
    list of Logs
        Each member's logs, bit for bit what ``Simulator(model with overrides).run()`` logs.

    Raises
    ------
    Unsupported
        The model cannot run as an ensemble here (the message names the block and why).
    """
    from cosim import Logs
    from cosim.fastpath import cache
    from cosim.run import pacing
    fast = scalar_fast_path(sim)
    reusable(sim, model, fast)
    entry = cache.by_source(fast.source)
    found = Members(sim, model)
    skipped: list = [] if others is not None else None
    ref_kernels, differ = found.ref_kernels, found.of(overrides, skipped)
    keep = [j for j in range(len(overrides)) if not skipped or j not in skipped]
    if skipped:
        others.extend(skipped)
        differ = {i: tuple([lst[j] for j in keep] for lst in entry_) for i, entry_ in
                  differ.items()}
    n = len(keep)
    ns = dict(fast.fn.__globals__)
    members = const_values(entry.consts, ns, ref_kernels, differ, n)
    n_c = sim.state.X.size
    # Shared constants of value 1.0 (gains of one): their products are left out.
    ones = frozenset(name for name, _, _ in entry.consts if name not in members and
                     type(ns.get(name)) is float and ns[name] == 1.0)
    key = (fast.source, frozenset(members), ensemble.EXTREMA_EXACT, ones)
    hit = _compiled.get(key)
    if hit is None:
        tr = ensemble.translate(fast.source, set(members), n_c, _owners(sim, fast), ones)
        hit = _compiled[key] = (tr, compile(tr.source, "<cosim ensemble>", "exec"))
        while len(_compiled) > 8:
            _compiled.pop(next(iter(_compiled)))
    tr, code = hit
    ns.update(ensemble_ops.UFUNCS)
    ns.update(math=math)
    exec(code, ns)
    for text in tr.not_nan:
        if np.isnan(eval(text, ns, dict(members))).any():
            raise Unsupported(f"a NaN limit ({text})")
    V, D = _bind(tr, ns, members, sim, fast, differ, n, n_c)
    located = None
    cfg = sim.config
    k_end = pacing.end_tick(sim, None, None)
    if "_located" in tr.source or getattr(sim, "events", None):
        located = Located(sim, model, fast, [overrides[j] for j in keep],
                           dict(zip(tr.names, V)), D, k_end)
        ns["_located"] = located
    columns = sim.store.columns
    logs = MemberLogs(columns, k_end + 1, n)
    L = (logs.blocks, logs.flush)
    ticks = [[] for _ in columns]
    # Scheduled events at tick times fire before the tick's outputs: the run is cut there
    # and each member's events fired between two calls.
    fire_at = located.fire_ticks if located is not None else []
    k, last = 0, -1
    with np.errstate(all="ignore"):
        # (specialized by the interpreter before its one long call: runtime.warm)
        warm(ns["advance"], 0, 0, last, ticks, k_end, k_end + 1, V, L)
        for k_fire in [*fire_at, k_end + 1]:
            if k_fire > k:
                k, last = ns["advance"](k, k_fire, last, ticks, k_end, k_end + 1, V, L)
            if k_fire <= k_end:
                located.at_tick(k_fire)
    # The step function's globals hold it (a cycle): its arrays are freed now, not by the
    # collector's next full pass.
    ns.clear()
    logs.close([len(t) for t in ticks])
    base = cfg.t0 + np.arange(0, k_end + 1, dtype=np.float64) * cfg.dt
    keyed = []
    for task, cols in enumerate(columns):
        rows = len(ticks[task])
        tk = np.asarray(ticks[task], dtype=np.intp)
        t = cfg.t0 + tk.astype(np.float64) * cfg.dt
        keyed += [(key, logs.full[task][col][:, :rows], t, tk) for key, col in cols]
    out = [None] * len(overrides)
    stopped = located.stopped if located is not None else {}
    for m, j in enumerate(keep):
        if m in stopped:
            # Its own run ended with the tick of its stopping event: so do its logs.
            k_stop = stopped[m]
            rows = {key: int(np.searchsorted(tk, k_stop, "right")) for key, _, _, tk in keyed}
            out[j] = Logs({key: a[m, :rows[key], None] for key, a, _, _ in keyed},
                          {key: t[:rows[key]] for key, _, t, _ in keyed}, base[:k_stop + 1])
            continue
        # (rows, 1): a member's row of the member-major logs.
        out[j] = Logs({key: a[m, :, None] for key, a, _, _ in keyed},
                      {key: t for key, _, t, _ in keyed}, base)
    if switches is not None:
        switches[:] = [[] for _ in overrides]
        for m, j in enumerate(keep):
            switches[j] = located.switch_log(m) if located is not None else []
    if events is not None:
        events[:] = [[] for _ in overrides]
        for m, j in enumerate(keep):
            events[j] = located.event_log(m) if located is not None else []
    return out


def _owners(sim, fast) -> dict:
    """The block path of each value the scalar step function names (``s<j>``, ``x<j>``,
    ``c<j>``, ``z<j>``, ``k<i>_<j>``): a translation that fails names the block."""
    plan = sim.plan
    out = {f"s{j}": plan.path_of[id(b)] for j, (b, _) in enumerate(fast.flat.signal_slots)}
    out.update((f"x{j}", plan.path_of[id(b)]) for j, (b, _) in enumerate(fast.flat.state_slots))
    for b, sl in sim.interpreter.cslices:
        for j in range(sl.start, sl.stop):
            out[f"c{j}"] = out[f"z{j}"] = plan.path_of[id(b)]
            out[f"k_{j}"] = plan.path_of[id(b)]
    return out


def _bind(tr, ns: dict, members: dict, sim, fast, differ: dict, n: int, n_c: int) -> tuple:
    """The arrays the translated function unpacks, in ``tr.names`` order, and the discrete
    states' initial values ``(n_d, N)``."""
    slot_of = {(id(b), name): j for j, (b, name) in enumerate(fast.flat.state_slots)}
    plan = sim.plan
    D = np.repeat(np.asarray(fast.flat.D, dtype=np.float64)[:, None], n, axis=1)
    C = np.repeat(np.asarray(sim.state.X, dtype=np.float64)[:, None], n, axis=1)
    cslice = {plan.index[plan.path_of[id(b)]]: sl for b, sl in sim.interpreter.cslices}
    for i, (_, states, cstates) in differ.items():
        b = plan.blocks[i]
        for j in range(n):
            if states[j] is not None:
                for name, v in states[j].items():
                    D[slot_of[(id(b), name)], j] = v
            if cstates[j] is not None:
                C[cslice[i], j] = cstates[j]
    stacked = {"C": C}

    def value_of(text: str):
        v = members[text] if text in members else eval(text, ns, dict(members))
        return v if isinstance(v, np.ndarray) else float(v)
    made: dict = {}

    def buffer(name: str) -> np.ndarray:
        if name in tr.owned:
            owner, attr, item = tr.owned[name]
            kept = getattr(table(owner), attr)
            return kept if item is None else kept[item]
        if name not in made:
            shape = tr.buffers[name]
            dtype = {"bool": bool, "int": np.intp}.get(shape[0] if shape else None, np.float64)
            dims = tuple({"N": n, "C": n_c}.get(d, d) for d in shape if d not in ("bool", "int"))
            made[name] = np.zeros(dims, dtype=dtype)
        return made[name]
    alike: dict = {}

    def spelt(name: str) -> tuple:
        """What a table is made of: lookups repeated in each Runge-Kutta stage are spelt
        alike and share one table object (and the cells it keeps: see Cells)."""
        spec = tr.tables[name]
        return (spec["kind"], tuple(map(tuple, spec["texts"])), tuple(spec.get("ops", ())),
                tuple(map(tuple, spec.get("masks", ()))),
                tuple(spelt(c) for c in spec.get("chains", ())))

    def table(name: str):
        if name not in made:
            key = spelt(name)
            if key not in alike:
                spec = tr.tables[name]
                chains = [table(c) for c in spec.get("chains", ())]
                alike[key] = ensemble_ops.make_table(spec, value_of, n, chains)
            made[name] = alike[key]
        return made[name]
    out = []
    for name in tr.names:
        if name in members:
            out.append(members[name])
        elif name in tr.zero_d:
            text = tr.zero_d[name]
            v = eval(text, ns, dict(members))
            if isinstance(v, np.ndarray):
                out.append(np.array(v))
            else:
                out.append(np.full(n, float(v)) if tr.buffers[name] == ("N",) else
                           np.array(float(v)))
        elif name in tr.buffers and tr.buffers[name] == ("table",):
            out.append(table(name))
        elif name in tr.owned or name in tr.buffers:
            out.append(buffer(name))
        elif name[0] == "x":
            out.append(D[int(name[1:])].copy())
        elif name in ("C", "Z") or name[0] == "K":
            out.append(stacked.setdefault(name, np.zeros((n_c, n))))
        elif name[0] in "cz":
            out.append(stacked.setdefault(name[0].upper(), np.zeros((n_c, n)))[int(name[1:])])
        elif name[0] == "k":
            si, comp = name[1:].split("_")
            out.append(stacked.setdefault(f"K{si}", np.zeros((n_c, n)))[int(comp)])
        else:
            raise Unsupported(f"unknown value {name}")
    return tuple(out), D
