"""Source-writing pieces shared by the fast-path strategies: task guards, grouped statements,
the step function's frame, kernel-name substitution patterns and the solver's tableau."""

from __future__ import annotations

import re

__all__ = ["DT", "NAME", "T", "emit", "guard", "step_function", "tableau"]

#: ``u_<input>``, ``x_<state>``, ``c_<i>``, ``p_<param>``, ``l_<i>`` in a kernel expression.
NAME = re.compile(r"\b([uxcpl])_([A-Za-z0-9_]+)\b")
DT = re.compile(r"\bdt\b")
T = re.compile(r"\bt\b")


def guard(task) -> str | None:
    """Source of the condition under which ``task`` runs at tick ``k`` (None: every tick)."""
    if task.period == 1 and task.offset == 0:
        return None
    cond = f"(k - {task.offset}) % {task.period} == 0"
    return cond + (f" and k >= {task.offset}" if task.offset else "")


def emit(stmts, indent: int) -> list[str]:
    """Source lines of ``[(guard, statement)]``, consecutive statements of one guard grouped."""
    out, cur = [], object()
    for g, s in stmts:
        if g is None:
            out.append(" " * indent + s)
            cur = object()
        else:
            if g != cur:
                out.append(" " * indent + f"if {g}:")
                cur = g
            out.append(" " * (indent + 4) + s)
    return out


def step_function(t0: float, dt: float, body, log_stmts, upd, integ, prologue=(),
                  epilogue=()) -> str:
    """Source of ``advance(k, k_stop, last_logged, S, D, C, rows, ticks, k_full, k_log)``.

    Per tick ``k`` of ``k .. k_stop-1``: outputs (``body``); logs if
    ``last_logged < k < k_log``; and, if ``k < k_full``, the state updates (``upd``) and the
    integration (``integ``) to the next tick. Ticks from ``k_full`` on only compute outputs,
    so one call can run a unit's macro step and compute its outputs at the end.
    ``prologue`` / ``epilogue`` load and store the values (scalar mode keeps them in locals).
    An exception leaves with the tick it happened at as its ``cosim_tick`` attribute.
    """
    lines = ["def advance(k, k_stop, last_logged, S, D, C, rows, ticks, k_full, k_log):",
             *prologue, "    try:", "        while k < k_stop:",
             f"            t = {t0!r} + k * {dt!r}"]
    lines += emit(body, 12)
    lines.append("            if last_logged < k < k_log:")
    lines += emit(log_stmts, 16)
    lines.append("                last_logged = k")
    if upd or integ:
        lines.append("            if k < k_full:")
        lines += emit(upd, 16)
        lines += ["                " + s for s in integ]
    lines += ["            k += 1", "    except Exception as err:", "        err.cosim_tick = k",
              "        raise"]
    if epilogue:
        lines += ["    finally:", *epilogue]
    lines.append("    return k, last_logged")
    return "\n".join(lines) + "\n"


def tableau(solver):
    """``(stage terms, nodes, weight terms)`` of a fixed-step explicit RK solver, else None."""
    from cosim.solvers.explicit import ExplicitRK
    if not isinstance(solver, ExplicitRK) or solver.adaptive:
        return None
    return solver.stage_terms, solver.nodes, solver.weight_terms
