"""Timing helpers for the opt-in benchmarks: best of k runs, µs per step, a printed table.

Machines here are noisy (2 vCPUs); every benchmark measures its references in the same run
and reports ratios, and takes the best of several repetitions of each measurement.
"""

from __future__ import annotations

import time


def best_us_per_step(build_and_run, steps: int, repeat: int = 3) -> float:
    """Best time per step (µs) of ``build_and_run()``, which returns a callable to time.

    ``build_and_run`` builds (untimed) and returns ``run``; only ``run()`` is timed.
    """
    best = float("inf")
    for _ in range(repeat):
        run = build_and_run()
        t0 = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - t0)
    return best / steps * 1e6


def table(title: str, rows: list[tuple[str, float]], reference: str | None = None) -> str:
    """Rows of (name, µs/step), with ratios to ``reference`` when given."""
    ref = dict(rows).get(reference)
    lines = [f"\n{title}", f"{'implementation':<34} {'us/step':>12}" +
             (f" {'vs ' + reference:>22}" if ref else "")]
    for name, us in rows:
        line = f"{name:<34} {us:12.2f}"
        if ref:
            line += f" {us / ref:21.1f}x"
        lines.append(line)
    text = "\n".join(lines)
    print(text)
    return text


def process_tree_cpu() -> dict[str, float]:
    """CPU seconds (user + system) used so far by this process (``"driver"``) and each of its
    descendants, summed by command name (Linux ``/proc``; empty elsewhere). Processes that
    ended in between are not counted: take differences over intervals they live through
    (Ray's workers and daemons outlive a study)."""
    import os
    try:
        tick = os.sysconf("SC_CLK_TCK")
        stats, parent = {}, {}
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/stat") as fh:
                    text = fh.read()
            except OSError:
                continue
            name = text[text.index("(") + 1:text.rindex(")")]
            fields = text[text.rindex(")") + 2:].split()
            parent[int(pid)] = int(fields[1])
            stats[int(pid)] = (name, (int(fields[11]) + int(fields[12])) / tick)
    except (OSError, ValueError):
        return {}
    me = os.getpid()
    children: dict[int, list[int]] = {}
    for pid, ppid in parent.items():
        children.setdefault(ppid, []).append(pid)
    out: dict[str, float] = {}
    todo = [me]
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        if pid in stats:
            name = "driver" if pid == me else stats[pid][0]
            out[name] = out.get(name, 0.0) + stats[pid][1]
    return out
