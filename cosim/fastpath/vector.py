"""The batched fast path: blocks that share a kernel template run as one numpy operation.

Large diagrams are mostly many copies of few block types (a chain of 1000 lags, a grid of
identical cells). Blocks whose kernels are the same template (differing only in ``p_*``
parameter values), at the same level of the plan and in the same task, form a *group*; the
generated step function evaluates a group as one vector expression over the flat signal,
state and continuous-state arrays, indexing them with slices where the members' slots are
contiguous. Elementwise numpy arithmetic rounds exactly as scalar arithmetic does, so results
are bit-identical to the reference interpreter (templates calling ``math.*`` are evaluated
member by member, with ``math``, for the same reason).
"""

from __future__ import annotations

import math

import numpy as np

from cosim.fastpath.emit import DT, NAME, T, guard, step_function
from cosim.fastpath.runtime import FastPath
from cosim.run.state import FlatValues

__all__ = ["build", "worthwhile"]

#: Mean group size from which vector operations beat one statement per block.
MIN_MEAN_GROUP = 6


def _template(kern) -> tuple:
    return (tuple(sorted(kern.outputs.items())), tuple(sorted(kern.state.items())),
            kern.derivatives, kern.cstate, tuple(sorted(kern.params)))


def _groups(plan, kernels) -> list[list[int]]:
    """Blocks grouped by (level, task, stage-evaluated, template), in level order."""
    level = {id(b): lv for lv, blocks in enumerate(plan.levels) for b in blocks}
    groups: dict = {}
    for i, b in enumerate(plan.blocks):
        tpl = _template(kernels[i])
        key = (level[id(b)], plan.task_of[i], plan.continuous[i], tpl)
        vectorizable = kernels[i].live is None and not any(
            "math." in e for e in list(kernels[i].outputs.values()) +
            list(kernels[i].state.values()) + list(kernels[i].derivatives) +
            list(kernels[i].cstate))
        if not vectorizable:
            key += (i,)
        groups.setdefault(key, []).append(i)
    return [g for _, g in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[1][0]))]


def worthwhile(plan, kernels) -> bool:
    """True when grouping makes the plan much shorter than one statement per block."""
    n = len(plan.blocks)
    return n >= 2 * MIN_MEAN_GROUP and n / max(1, len(_groups(plan, kernels))) >= MIN_MEAN_GROUP


def _index(idx: list[int]) -> str:
    """Source text of an index: an int, a slice when contiguous, else a named constant."""
    if len(idx) == 1:
        return str(idx[0])
    if idx == list(range(idx[0], idx[0] + len(idx))):
        return f"{idx[0]}:{idx[-1] + 1}"
    return None


def build(plan, config, state, store, solver, layout, kernels, tableau) -> FastPath:
    """Generate the vector step function (see :func:`cosim.fastpath.choose.build`)."""
    blocks = plan.blocks
    consts: dict[str, object] = {"math": math, "np": np, "inf": math.inf, "nan": math.nan}

    def const(value) -> str:
        name = f"_k{len(consts)}"
        consts[name] = value
        return name

    sig_at, state_at, cont_at = layout.signal_at, layout.state_at, layout.cont_at

    def ref(arr: str, idx: list[int]) -> str:
        ix = _index(idx)
        return f"{arr}[{ix if ix is not None else const(np.array(idx))}]"

    def expr(group, text, cvar="C", tvar="t") -> str:
        """A template expression over a group's members."""
        kern = kernels[group[0]]

        def name(m):
            kind, r = m.group(1), m.group(2)
            if kind == "u":
                return ref("S", [layout.input_slot(plan, i, r) for i in group])
            if kind == "x":
                return ref("D", [state_at[(i, r)] for i in group])
            if kind == "c":
                return ref(cvar, [cont_at[(i, r)] for i in group])
            if kind == "l":
                return f"{const(kern.live)}[{int(r)}]"     # live values: singleton groups
            vals = [float(kernels[i].params[r]) for i in group]
            return repr(vals[0]) if len(group) == 1 else const(np.array(vals))
        out = NAME.sub(name, text)
        periods = {plan.sample_period[i] for i in group}
        out = DT.sub(repr(periods.pop()), out)
        assert kern is not None and not periods
        return T.sub(tvar, out) if tvar != "t" else out

    groups = _groups(plan, kernels)
    body, upd = [], []
    # Continuous states held between intervals first (as in the scalar strategy): like every
    # state update they read this tick's discrete states, which the assignments below replace.
    for g in groups:
        kern = kernels[g[0]]
        if kern.cstate:
            gd = guard(plan.tasks[plan.task_of[g[0]]])
            temps = []
            for j, text in enumerate(kern.cstate):
                tmp = f"_c{len(upd)}_{j}"
                temps.append((tmp, j))
                upd.append((gd, f"{tmp} = {expr(g, text)}"))
            for tmp, j in temps:
                upd.append((gd, f"{ref('C', [cont_at[(i, str(j))] for i in g])} = {tmp}"))
    for g in groups:
        kern = kernels[g[0]]
        gd = guard(plan.tasks[plan.task_of[g[0]]])
        for p, text in kern.outputs.items():
            body.append((gd, f"{ref('S', [sig_at[(i, p)] for i in g])} = {expr(g, text)}"))
        if kern.state:
            temps = []
            for n, text in kern.state.items():
                tmp = f"_n{len(upd)}_{len(temps)}"
                temps.append((tmp, n))
                upd.append((gd, f"{tmp} = {expr(g, text)}"))
            for tmp, n in temps:
                upd.append((gd, f"{ref('D', [state_at[(i, n)] for i in g])} = {tmp}"))

    task_logs = [[] for _ in plan.tasks]
    task_idx = [[] for _ in plan.tasks]
    for i, p, key in store.refs:
        ti = plan.task_of[i]
        slot = layout.log_slot(plan, i, p)
        task_logs[ti].append((key, len(task_idx[ti])))
        task_idx[ti].append(slot)
    log_stmts = []
    for n, task in enumerate(plan.tasks):
        gd = guard(task)
        log_stmts.append((gd, f"ticks[{n}].append(k)"))
        idx = task_idx[n]
        if idx:
            # A row is a copy: a slice (contiguous columns) copied, or fancy indexing.
            ix = _index(idx) if len(idx) > 1 else f"{idx[0]}:{idx[0] + 1}"
            src = f"S[{ix}].copy()" if ix is not None else f"S[{const(np.array(idx))}]"
            log_stmts.append((gd, f"rows[{n}].append({src})"))

    integ = []
    n_c = state.X.size
    if n_c:
        terms, nodes, bterms = tableau
        minor = [g for g in groups if plan.continuous[g[0]]]

        def stage(si, cvar, tvar):
            for g in minor:
                for p, text in kernels[g[0]].outputs.items():
                    integ.append(f"{ref('S', [sig_at[(i, p)] for i in g])} = "
                                 f"{expr(g, text, cvar, tvar)}")
            for g in minor:
                for j, text in enumerate(kernels[g[0]].derivatives):
                    integ.append(f"{ref(f'K{si}', [cont_at[(i, str(j))] for i in g])} = "
                                 f"{expr(g, text, cvar, tvar)}")

        def combo(tm):
            return " + ".join(f"{a!r} * K{j}" for a, j in tm)

        consts.update({f"K{si}": np.zeros(n_c) for si in range(len(nodes) + 1)})
        integ.append(f"h = ({config.t0!r} + (k + 1) * {config.dt!r}) - t")
        stage(0, "C", "t")
        for si, (tm, node) in enumerate(zip(terms, nodes), start=1):
            integ.append(f"Z = C + h * ({combo(tm)})" if tm else "Z = C.copy()")
            integ.append(f"ts = t + {node!r} * h")
            stage(si, "Z", "ts")
        integ.append(f"C[:] = C + h * ({combo(bterms)})")

    source = step_function(config.t0, config.dt, body, log_stmts, upd, integ)
    exec(compile(source, f"<cosim batched plan {plan.name}>", "exec"), consts)
    flat = FlatValues(layout.signal_slots, layout.state_slots, vector=True)
    return FastPath(state, store, source, consts["advance"], flat, task_logs, solver,
                    len(tableau[1]) + 1 if tableau else 0)
