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


def _role(pid: int, name: str, me: int) -> str:
    """What a process of the tree is, for CPU accounting: Ray's workers are renamed by the
    task they run (``ray::IDLE``, ``ray::pull``), so they are counted together."""
    if pid == me:
        return "driver"
    if name.startswith("ray::") and name not in ("ray::DashboardA", "ray::RuntimeEnv"):
        return "ray workers"
    return name


def process_tree_cpu() -> dict[int, tuple[str, float]]:
    """CPU seconds used so far by this process and each of its descendants, by process id:
    ``(role, seconds)``, the role ``"driver"`` (this process), ``"ray workers"`` or the
    command name; the sum over the process's threads of their time on a CPU
    (``/proc/<pid>/task/<tid>/schedstat``, nanoseconds; Linux only, empty elsewhere).
    Take differences over intervals the processes live through (:func:`cpu_used`)."""
    import os
    try:
        parent, names = {}, {}
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/stat") as fh:
                    text = fh.read()
            except OSError:
                continue
            names[int(pid)] = text[text.index("(") + 1:text.rindex(")")]
            parent[int(pid)] = int(text[text.rindex(")") + 2:].split()[1])
    except (OSError, ValueError):
        return {}
    me = os.getpid()
    children: dict[int, list[int]] = {}
    for pid, ppid in parent.items():
        children.setdefault(ppid, []).append(pid)
    out: dict[int, tuple[str, float]] = {}
    todo = [me]
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        ns = 0
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                try:
                    with open(f"/proc/{pid}/task/{tid}/schedstat") as fh:
                        ns += int(fh.read().split()[0])
                except OSError:
                    continue            # a thread that ended meanwhile
        except OSError:
            continue                    # the process ended meanwhile
        out[pid] = (_role(pid, names[pid], me), ns / 1e9)
    return out


def cpu_used(before: dict, after: dict) -> dict[str, float]:
    """CPU seconds used between two :func:`process_tree_cpu` snapshots, by role (a process
    started in between counts whole)."""
    used: dict[str, float] = {}
    for pid, (role, seconds) in after.items():
        spent = seconds - before.get(pid, (role, 0.0))[1]
        if spent > 0:
            used[role] = used.get(role, 0.0) + spent
    return used
