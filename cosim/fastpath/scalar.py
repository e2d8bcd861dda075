"""The scalar fast-path strategy: one statement per block, every value a local float.

When every block of a plan returns a :class:`~cosim.model.block.Kernel` and every signal and
state is a scalar (shape ``(1,)``), this module writes the Python source of a function that runs
many ticks in one call with every signal and state held in local variables, compiles it once,
and runs it instead of the interpreter. Per block and tick this costs a few bytecodes instead of
a method call and numpy dispatch (~0.03 µs vs ~1 µs). Continuous state is integrated inline
when the solver is a fixed-step explicit Runge–Kutta method: each stage is written out from
the tableau with the solver's own operation order.

The kernels and the stage sums compute the same IEEE operations in the same order as the
blocks' methods and the solver, so results are bit-identical to the reference interpreter;
the tests check that.
"""

from __future__ import annotations

import math

from cosim.fastpath.emit import DT, NAME, T, guard, step_function
from cosim.fastpath.runtime import FastPath
from cosim.run.state import FlatValues

__all__ = ["build"]


def build(plan, config, state, store, solver, layout, kernels, tableau) -> FastPath:
    """Generate the scalar step function (see :func:`cosim.fastpath.choose.build`)."""
    blocks = plan.blocks
    sig_name = {key: f"s{j}" for key, j in layout.signal_at.items()}
    state_name = {key: f"x{j}" for key, j in layout.state_at.items()}
    cont_name = {key: f"c{j}" for key, j in layout.cont_at.items()}
    n_c = state.X.size
    namespace = {"math": math, "inf": math.inf, "nan": math.nan}

    def subst(i: int, expr: str, cvar: str = "c", tvar: str = "t") -> str:
        """Kernel expression of block ``i`` with its names bound to generated locals."""
        def name(m):
            kind, ref = m.group(1), m.group(2)
            key = (i, ref)
            if kind == "u":
                return f"s{layout.input_slot(plan, i, ref)}"
            if kind == "x":
                return state_name[key]
            if kind == "p":
                return repr(float(kernels[i].params[ref]))
            if kind == "l":
                namespace[f"L{i}"] = kernels[i].live
                return f"L{i}[{int(ref)}]"
            return cvar + cont_name[key][1:]
        out = DT.sub(repr(plan.sample_period[i]), NAME.sub(name, expr))
        return T.sub(tvar, out) if tvar != "t" else out

    # Per-task log columns (a row tuple per active tick).
    task_logs = [[] for _ in plan.tasks]
    task_cols = [[] for _ in plan.tasks]
    for i, p, key in store.refs:
        ti = plan.task_of[i]
        task_logs[ti].append((key, len(task_cols[ti])))
        task_cols[ti].append(f"s{layout.log_slot(plan, i, p)}")

    body: list[tuple[str | None, str]] = []      # (guard, statement)
    for i, b in enumerate(blocks):
        g = guard(plan.tasks[plan.task_of[i]])
        for p in b.output_names:
            body.append((g, f"{sig_name[(i, p)]} = {subst(i, kernels[i].outputs[p])}"))
    log_stmts = []
    for n, task in enumerate(plan.tasks):
        g = guard(task)
        cols = task_cols[n]
        row = f"rows[{n}].append(({', '.join(cols)},))" if cols else None
        stmts = [f"ticks[{n}].append(k)"] + ([row] if row else [])
        log_stmts += [(g, s) for s in stmts]
    upd = []
    # Continuous states first: like every state update, they read the discrete states'
    # values of this tick, which the assignments below replace.
    for i, b in enumerate(blocks):
        if kernels[i].cstate:
            g = guard(plan.tasks[plan.task_of[i]])
            names = [cont_name[(i, str(j))] for j in range(len(kernels[i].cstate))]
            exprs = [subst(i, e) for e in kernels[i].cstate]
            upd.append((g, f"{', '.join(names)} = {', '.join(exprs)}"))
    for i, b in enumerate(blocks):
        st = kernels[i].state
        if not st:
            continue
        g = guard(plan.tasks[plan.task_of[i]])
        names = [state_name[(i, n)] for n in st]
        exprs = [subst(i, e) for e in st.values()]
        upd.append((g, f"{', '.join(names)} = {', '.join(exprs)}"))

    integ: list[str] = []
    if n_c:
        terms, nodes, bterms = tableau
        minor = [i for i in range(len(blocks)) if plan.continuous[i]]

        def stage(si: int, cvar: str, tvar: str) -> None:
            for i in minor:
                for p in blocks[i].output_names:
                    integ.append(f"{sig_name[(i, p)]} = "
                                 f"{subst(i, kernels[i].outputs[p], cvar, tvar)}")
            for i in minor:
                for j, e in enumerate(kernels[i].derivatives):
                    g = int(cont_name[(i, str(j))][1:])
                    integ.append(f"k{si}_{g} = {subst(i, e, cvar, tvar)}")

        def combo(tm, g):
            return " + ".join(f"{a!r} * k{j}_{g}" for a, j in tm)

        integ.append(f"h = ({config.t0!r} + (k + 1) * {config.dt!r}) - t")
        stage(0, "c", "t")
        for si, (tm, node) in enumerate(zip(terms, nodes), start=1):
            for g in range(n_c):
                integ.append(f"z{g} = c{g} + h * ({combo(tm, g)})" if tm else f"z{g} = c{g}")
            integ.append(f"ts = t + {node!r} * h")
            stage(si, "z", "ts")
        for g in range(n_c):
            integ.append(f"c{g} = c{g} + h * ({combo(bterms, g)})")

    sig_vars = [f"s{j}" for j in range(len(layout.signal_slots))]
    st_vars = [f"x{j}" for j in range(len(layout.state_slots))]
    c_vars = [f"c{j}" for j in range(n_c)]
    groups = [(v, src) for v, src in ((sig_vars, "S"), (st_vars, "D"), (c_vars, "C.tolist()"))
              if v]
    # The continuous state is the run state's numpy vector: unpacked to Python floats.
    source = step_function(
        config.t0, config.dt, body, log_stmts, upd, integ,
        prologue=[f"    {', '.join(v)}, = {src}" for v, src in groups],
        epilogue=[f"        {src[:1]}[:] = [{', '.join(v)}]" for v, src in groups])
    exec(compile(source, f"<cosim plan {plan.name}>", "exec"), namespace)
    flat = FlatValues(layout.signal_slots, layout.state_slots, vector=False)
    return FastPath(state, store, source, namespace["advance"], flat, task_logs, solver,
                    len(tableau[1]) + 1 if tableau else 0)
