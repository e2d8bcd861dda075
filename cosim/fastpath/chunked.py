"""Chunked step functions: a large plan's step function split into functions of bounded size.

Python's compiler and the first calls of a function (bytecode specialization) cost more than
linearly in the function's size; bounded functions keep a 100,000-block plan's compile time
linear (issue 17). :func:`frame` writes them from the statements the emitter
(:mod:`cosim.fastpath.emitter`) wrote; :func:`own_globals` gives each its own globals.
"""

from __future__ import annotations

import types

__all__ = ["ADVANCE", "CHUNK_PREFIXES", "define", "frame", "grouped", "loop_end",
           "own_globals"]

#: The generated step function's name and arguments (see :func:`~cosim.fastpath.frame.single`).
ADVANCE = "advance(k, k_stop, last_logged, S, D, C, rows, ticks, k_full, k_log"

#: Name prefixes of the functions of a chunked step function (see :func:`frame`).
CHUNK_PREFIXES = ("_out", "_upd", "_rk")


def grouped(stmts, indent: int) -> list[str]:
    """Source lines of ``[(guard, statement)]``, consecutive statements of one guard grouped.

    A statement of several lines (an inlined atomic subsystem's, see
    :mod:`cosim.fastpath.nested`) is indented as a whole.
    """
    out, cur = [], object()
    for g, s in stmts:
        if g is None:
            pad = " " * indent
            cur = object()
        else:
            if g != cur:
                out.append(" " * indent + f"if {g}:")
                cur = g
            pad = " " * (indent + 4)
        out.append(pad + s.replace("\n", "\n" + pad) if "\n" in s else pad + s)
    return out


def loop_end(finally_lines) -> list[str]:
    """The end of ``advance``'s tick loop, chunked or not: the next tick, an exception
    marked with the tick it happened at (``cosim_tick``), ``finally_lines`` (the strategy's
    stores, may be empty) and the return."""
    lines = ["            k += 1", "    except Exception as err:", "        err.cosim_tick = k",
             "        raise"]
    if finally_lines:
        lines += ["    finally:", *finally_lines]
    lines.append("    return k, last_logged")
    return lines


def _chunks(groups: list, size: int) -> list[list[str]]:
    """Bodies (source lines, indented 4) of functions running ``groups`` (lists of
    ``(guard, statement)``, never split) in order, about ``size`` statements each.

    Consumes ``groups`` (its entries become None): each chunk's statements are freed once
    its lines are written, so a large plan's statements and lines are not all held at once
    (about 200 bytes per block less at the peak of generating its code).
    """
    chunks, cur = [], []
    for n, stmts in enumerate(groups):
        groups[n] = None
        if cur and len(cur) + len(stmts) > size:
            chunks.append(grouped(cur, 4))
            cur = []
        cur.extend(stmts)
    if cur:
        chunks.append(grouped(cur, 4))
    return chunks


def frame(t0: float, dt: float, body, log_stmts, upd, integ, strategy, n_stages: int,
          size: int) -> list[str]:
    """Pieces of ``advance`` (see :func:`~cosim.fastpath.frame.single`) for a large plan:
    outputs, state updates and the statements of each segment ``(lines, statements)`` of
    the integration (see :meth:`~cosim.fastpath.emitter.Writer.integration`; ``lines`` are
    the step function's own) run in functions of at most about ``size`` statements each, the
    last piece defining ``advance``.

    Python's compiler and the first calls of a function (bytecode specialization) cost more
    than linearly in the function's size; bounded functions keep a 100,000-block plan's
    compile time linear. A function's values live in locals only while it runs: it loads what
    it reads from ``S`` and ``D`` (and with continuous state ``C``, the stage state ``Z`` and
    derivatives ``K<i>``), stores every tick what some function reads, and all it assigns at
    its last call of the step (see :meth:`~cosim.fastpath.emitter.Strategy.chunk_io`); the
    logs read ``S`` itself.
    The functions take ``(k, t, S, D, last)``, with continuous state
    ``(k, t, ts, h, S, D, C, Z, K0, .., last)``.
    """
    phases = [("_out", body), ("_upd", upd)]
    phases += [("_rk", [[(None, st)] for st in stmts]) for _, stmts in integ]
    bodies = [_chunks(groups, size) for _, groups in phases]
    reads = [[strategy.chunk_reads(b) for b in chunks] for chunks in bodies]
    shared = set(strategy.chunk_reads([st for _, st in log_stmts]))
    for rs in reads:
        shared = shared.union(*rs)
    args = "k, t, S, D, last"
    if n_stages:
        args = f"k, t, ts, h, S, D, C, Z, {''.join(f'K{i}, ' for i in range(n_stages))}last"
    pieces, calls = [], []
    for (prefix, _), chunks, rs in zip(phases, bodies, reads):
        calls.append([])
        for chunk, rd in zip(chunks, rs):
            load, store, final = strategy.chunk_io(chunk, rd, shared)
            fn = [*load, *chunk, *store]
            if final:
                fn += ["    if last:", *("    " + ln for ln in final)]
            name = f"{prefix}{len(pieces)}"
            pieces.append("\n".join(define(f"{name}({args}", fn)) + "\n")
            # Functions after the outputs run only up to k_full: their last call is there.
            calls[-1].append(f"{name}({args if prefix == '_out' else args[:-4] + 'end'})")
    enter, leave = [], []
    if n_stages:
        # Every function takes the step and stage time; the outputs' ignore them.
        enter, leave = strategy.chunk_state(n_stages)
        enter = ["    h = ts = 0.0", *enter]
    lines = [*enter, "    try:", "        while k < k_stop:", f"            t = {t0!r} + k * {dt!r}",
             "            last = k + 1 == k_stop"]
    lines += ["            " + c for c in calls[0]]
    lines.append("            if last_logged < k < k_log:")
    lines += grouped([(g, strategy.direct(st)) for g, st in log_stmts], 16)
    lines.append("                last_logged = k")
    if any(calls[1:]):
        lines += ["            if k < k_full:", "                end = last or k + 1 == k_full"]
        lines += ["                " + c for c in calls[1]]
        for (pre, _), cs in zip(integ, calls[2:]):
            lines += ["                " + ln for ln in pre]
            lines += ["                " + c for c in cs]
    lines += loop_end(leave)
    pieces.append("\n".join(define(ADVANCE, lines)) + "\n")
    if strategy.preamble:
        # Module-level buffers, made before any function runs (known once all are written).
        pieces.insert(0, "\n".join(strategy.preamble) + "\n")
    return pieces


def define(signature: str, body: list[str]) -> list[str]:
    """Lines defining a function (``signature``: its name and arguments without the closing
    parenthesis) of ``body``."""
    return [f"def {signature}):", *body]


def own_globals(namespace: dict) -> None:
    """Give each chunk function (see :func:`frame`) globals of its own, holding only
    the names it reads, as ``namespace`` binds them (after the generated code is executed in
    it, or in a copy given other constants' values).

    A global read is specialized (about as fast as a literal) only in a namespace of fewer
    than 65,536 names; a 100,000-block plan has more constants than that.
    """
    chunks = [k for k in namespace if k.startswith(CHUNK_PREFIXES)]
    if not chunks:
        return
    shared = {k: v for k, v in namespace.items()
              if not k.startswith("_") or k == "__builtins__"}
    for name in chunks:
        fn = namespace[name]
        own = dict(shared)
        own.update((n, namespace[n]) for n in fn.__code__.co_names if n in namespace)
        namespace[name] = types.FunctionType(fn.__code__, own, name)
