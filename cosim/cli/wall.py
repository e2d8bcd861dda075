"""Where a command's wall time went: start-up, reading, compiling, backends, the run, saving.

``cosim run`` reports the simulation's own run time; on a loaded machine, or with Ray to
start, the wall time a user measures is much longer. :class:`Phases` times each phase and
says what the rest was, so that the two numbers agree or the difference is explained.
"""

from __future__ import annotations

import os
import time

__all__ = ["Phases", "since_process_start"]


def since_process_start() -> float | None:
    """Seconds since this process started (Linux ``/proc``, 10 ms resolution), or None."""
    try:
        with open("/proc/self/stat", encoding="ascii") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        with open("/proc/uptime", encoding="ascii") as fh:
            uptime = float(fh.read().split()[0])
        return max(0.0, uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, AttributeError):
        return None


class Phases:
    """Named durations of one command, in the order they happened.

    The time before the first phase (the interpreter starting, importing cosim) is
    ``start-up``, measured from the process's start where the system tells it.
    """

    def __init__(self):
        self.started = time.perf_counter()
        self.startup = since_process_start()
        self.durations: dict[str, float] = {}

    def add(self, name: str, seconds: float) -> None:
        """Count ``seconds`` under ``name`` (added to what it already holds)."""
        self.durations[name] = self.durations.get(name, 0.0) + seconds

    def timed(self, name: str):
        """A context manager counting the time of its block under ``name``."""
        phases = self

        class _Timer:
            def __enter__(self):
                self.t0 = time.perf_counter()

            def __exit__(self, *exc):
                phases.add(name, time.perf_counter() - self.t0)

        return _Timer()

    def summary(self) -> str:
        """``wall 1.23 s = start-up 0.40 s (Python, imports) + reading ... + other 0.01 s``."""
        elapsed = time.perf_counter() - self.started
        parts = []
        total = elapsed
        if self.startup is not None:
            total += self.startup
            parts.append(f"start-up {self.startup:.2f} s (Python, imports)")
        parts += [f"{name} {seconds:.3f} s" for name, seconds in self.durations.items()
                  if seconds >= 0.0005]
        other = elapsed - sum(self.durations.values())
        if other >= 0.005:
            parts.append(f"other {other:.2f} s")
        return f"wall time {total:.2f} s = " + " + ".join(parts)
