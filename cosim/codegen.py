"""The generated fast path: one Python function per plan, over plain floats, no dispatch.

When every block of a plan returns a :class:`~cosim.block.Kernel` and every signal and state is
a scalar (shape ``(1,)``), this module writes the Python source of a function that runs many
ticks in one call with every signal and state held in local variables, compiles it once, and
runs it instead of the interpreter. Per block and tick this costs a few bytecodes instead of a
method call and numpy dispatch (~0.03 µs vs ~1 µs). The kernels compute the same IEEE
operations in the same order as the blocks' own methods, so results are bit-identical to the
reference interpreter; the tests check that on every block that has a kernel.
"""

from __future__ import annotations

import math
import re

import numpy as np

from cosim.block import Kernel
from cosim.errors import SimulationError

__all__ = ["FastPath", "build"]

_NAME = re.compile(r"\b([ux])_([A-Za-z_][A-Za-z0-9_]*)\b")
_DT = re.compile(r"\bdt\b")


class FastPath:
    """A compiled step function bound to one initialized simulator.

    Attributes
    ----------
    source : str
        The generated Python source (for inspection and debugging).
    """

    def __init__(self, sim, source, fn, sig_slots, state_slots, task_logs):
        self.sim = sim
        self.source = source
        self._fn = fn
        self._sig_slots = sig_slots          # [(block, port)] in S order
        self._state_slots = state_slots      # [(block, state name)] in X order
        self._task_logs = task_logs          # per task: [(key, column)]
        self.S = [float(b.outputs[p][0]) for b, p in sig_slots]
        self.X = [float(b.state[n][0]) for b, n in state_slots]
        self.rows = [[] for _ in sim.plan.tasks]
        self.ticks = sim._task_ticks

    def advance(self, k_stop: int) -> None:
        """Run ticks ``sim.k .. k_stop-1``."""
        sim = self.sim
        try:
            sim.k, sim._last_logged = self._fn(sim.k, k_stop, sim._last_logged, self.S, self.X,
                                               self.rows, self.ticks)
        except Exception as err:
            k = getattr(err, "_cosim_tick", sim.k)
            raise SimulationError(f"{type(err).__name__}: {err} (in the generated fast path; "
                                  "rerun with SimulationConfig(fast=False) to find the block)",
                                  t=sim.config.t0 + k * sim.config.dt) from err
        self._sync()

    def outputs_only(self, k: int, log: bool = True) -> None:
        """Compute (and log) the outputs of tick ``k`` only (no state update)."""
        sim = self.sim
        state = list(self.X)
        last = sim._last_logged if log else k
        k_new, last = self._fn(k, k + 1, last, self.S, self.X, self.rows, self.ticks)
        if log:
            sim._last_logged = last
        sim.k = k
        self.X[:] = state
        self._sync()

    def _sync(self) -> None:
        """Write the floats back into the blocks' dicts, so blocks always show the truth."""
        for (b, p), v in zip(self._sig_slots, self.S):
            b.outputs[p] = np.array([v])
        for (b, n), v in zip(self._state_slots, self.X):
            b.state[n] = np.array([v])
        fan = self.sim._fanout
        for i in range(len(self.sim.plan.blocks)):
            for dins, dport, souts, sport in fan[i]:
                dins[dport] = souts[sport]

    def flush_logs(self) -> None:
        """Move the generated function's row tuples into the simulator's sample lists."""
        lists = self.sim._log_lists
        for rows, cols in zip(self.rows, self._task_logs):
            if not rows or not cols:
                rows.clear()
                continue
            arr = np.array(rows, dtype=np.float64)
            for key, c in cols:
                lists[key][0].extend(arr[:, c:c + 1])
            rows.clear()


def _scalar(a) -> bool:
    return isinstance(a, np.ndarray) and a.shape == (1,) and a.dtype == np.float64


def build(sim) -> FastPath | None:
    """Generate the fast path for an initialized simulator, or None if a block cannot.

    Parameters
    ----------
    sim : Simulator
        Initialized; its blocks' outputs and states give the starting values.
    """
    plan = sim.plan
    blocks = plan.blocks
    kernels: list[Kernel] = []
    for b in blocks:
        kern = b.kernel()
        if kern is None:
            return None
        if not all(_scalar(b.outputs.get(p)) for p in b.output_names):
            return None
        if not all(_scalar(v) for v in b.state.values()) or set(kern.state) != set(b.state):
            return None
        if set(kern.outputs) != set(b.output_names):
            return None
        kernels.append(kern)

    sig_slots, sig_name = [], {}
    for i, b in enumerate(blocks):
        for p in b.output_names:
            sig_name[(i, p)] = f"s{len(sig_slots)}"
            sig_slots.append((b, p))
    state_slots, state_name = [], {}
    for i, b in enumerate(blocks):
        for n in b.state:
            state_name[(i, n)] = f"x{len(state_slots)}"
            state_slots.append((b, n))
    driver = {(w.dst, w.dst_port): sig_name[(w.src, w.src_port)] for w in plan.wires}

    def subst(i: int, expr: str) -> str:
        """Kernel expression of block ``i`` with its names bound to generated locals."""
        def name(m):
            kind, port = m.group(1), m.group(2)
            key = (i, port)
            if kind == "u":
                if key not in driver:
                    raise KeyError(f"{plan.names[i]}: kernel reads unknown input {port!r}")
                return driver[key]
            return state_name[key]
        return _DT.sub(repr(plan.sample_period[i]), _NAME.sub(name, expr))

    def guard(task) -> str | None:
        if task.period == 1 and task.offset == 0:
            return None
        cond = f"(k - {task.offset}) % {task.period} == 0"
        return cond + (f" and k >= {task.offset}" if task.offset else "")

    # Per-task log columns (a row tuple per active tick).
    task_logs = [[] for _ in plan.tasks]
    task_cols = [[] for _ in plan.tasks]
    for i, p, key in sim._log_refs:
        b = blocks[i]
        ti = plan.task_of[i]
        expr = sig_name[(i, p)] if p in b.output_names else driver[(i, p)]
        task_logs[ti].append((key, len(task_cols[ti])))
        task_cols[ti].append(expr)

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
    for i, b in enumerate(blocks):
        st = kernels[i].state
        if not st:
            continue
        g = guard(plan.tasks[plan.task_of[i]])
        names = [state_name[(i, n)] for n in st]
        exprs = [subst(i, e) for e in st.values()]
        upd.append((g, f"{', '.join(names)} = {', '.join(exprs)}"))

    def emit(stmts, indent):
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

    sig_vars = [f"s{j}" for j in range(len(sig_slots))]
    st_vars = [f"x{j}" for j in range(len(state_slots))]
    lines = ["def advance(k, k_stop, last_logged, S, X, rows, ticks):"]
    if sig_vars:
        lines.append(f"    {', '.join(sig_vars)}, = S")
    if st_vars:
        lines.append(f"    {', '.join(st_vars)}, = X")
    lines += ["    try:",
              "        while k < k_stop:",
              f"            t = {sim.config.t0!r} + k * {sim.config.dt!r}"]
    lines += emit(body, 12)
    lines.append("            if k > last_logged:")
    lines += emit(log_stmts, 16)
    lines.append("                last_logged = k")
    lines += emit(upd, 12)
    lines.append("            k += 1")
    lines += ["    except Exception as err:",
              "        err._cosim_tick = k",
              "        raise",
              "    finally:"]
    if sig_vars:
        lines.append(f"        S[:] = [{', '.join(sig_vars)}]")
    if st_vars:
        lines.append(f"        X[:] = [{', '.join(st_vars)}]")
    lines.append("        pass")
    lines.append("    return k, last_logged")
    source = "\n".join(lines) + "\n"
    namespace = {"math": math}
    exec(compile(source, f"<cosim plan {plan.name}>", "exec"), namespace)
    return FastPath(sim, source, namespace["advance"], sig_slots, state_slots, task_logs)
