"""The frame of a plan's step function written as one function (a plan small enough, see
:mod:`cosim.fastpath.chunked` for the others): its tick loop around the emitter's statements,
and its live inputs read once a call."""

from __future__ import annotations

import re

from cosim.fastpath.chunked import ADVANCE, define, grouped, loop_end

__all__ = ["hoisted", "single"]

_T = re.compile(r"\bt\b")


def hoisted(source: str, lives: dict) -> str:
    """``source`` (one step function) reading the live values of ``lives`` (their globals'
    names -> the lists' lengths) from locals unpacked once when it is called, not from the
    lists at every use (an Inport's input polynomial reads five of them at each Runge–Kutta
    stage). The lists change only between calls (the master or the parent sets an Inport
    before it calls the step function), so every value read is the same. A list read by
    one statement only (no stage reads it) stays as it is: a call of one tick (a unit's
    macro step) would read it once anyway, and its unpacking costs more than a held input's
    two reads."""
    if not lives:
        return source
    lines = [ln for ln in source.split("\n") if "[" in ln]
    used = [name for name in lives if sum(f"{name}[" in ln for ln in lines) > 1]
    if not used:
        return source
    read = re.compile(rf"\b({'|'.join(map(re.escape, used))})\[(\d+)\]")
    head, sep, rest = read.sub(r"\1_\2", source).partition(f"def {ADVANCE}):\n")
    loads = "".join(f"    {', '.join(f'{name}_{i}' for i in range(lives[name]))}, = {name}\n"
                    for name in used)
    return head + sep + loads + rest


def single(t0: float, dt: float, body, log_stmts, upd, integ, prologue, epilogue,
           preamble) -> str:
    """Source of ``advance(k, k_stop, last_logged, S, D, C, rows, ticks, k_full, k_log)``.

    Per tick ``k`` of ``k .. k_stop-1``: outputs (``body``); logs if
    ``last_logged < k < k_log``; and, if ``k < k_full``, the state updates (``upd``) and the
    integration (``integ``) to the next tick. Ticks from ``k_full`` on only compute outputs,
    so one call can run a unit's macro step and compute its outputs at the end.
    ``prologue`` / ``epilogue`` load and store the values (the scalar strategy keeps them in
    locals); ``preamble``, module-level lines, makes the strategy's buffers. An exception
    leaves with the tick it happened at as its ``cosim_tick`` attribute.
    """
    loop = grouped(body, 12)
    loop.append("            if last_logged < k < k_log:")
    loop += grouped(log_stmts, 16)
    loop.append("                last_logged = k")
    if upd or integ:
        loop.append("            if k < k_full:")
        loop += grouped(upd, 16)
        loop += ["                " + s for s in integ]
    # The tick's time only where a statement reads it (a plan of discrete blocks may not).
    clock = [f"            t = {t0!r} + k * {dt!r}"] if any(map(_T.search, loop)) else []
    lines = [*prologue, "    try:", "        while k < k_stop:", *clock, *loop]
    lines += loop_end(epilogue)
    return "\n".join([*preamble, *define(ADVANCE, lines)]) + "\n"
