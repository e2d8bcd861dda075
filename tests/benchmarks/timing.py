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
