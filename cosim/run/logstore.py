"""The log store of one run: which signals are logged, their samples, and their tick lists.

Every logged signal ``"block.port"`` has a :class:`~cosim.run.logs.SampleList` and shares the
tick list of its block's task (a multirate signal is logged at its own rate). The interpreter
appends samples one at a time; the generated fast path appends one *row* of the task's logged
values per active tick to ``rows[task]`` (the values one after the other, or an array of
them), and :meth:`flush` moves the rows into the sample lists as chunks. Readers (:meth:`logs`, :meth:`since`, snapshots) flush first,
so they always see every sample.
"""

from __future__ import annotations

from itertools import islice

import numpy as np

from cosim.compile.flatten import ALL_OUTPUTS, split_ref
from cosim.errors import SimulationError
from cosim.run.logs import Logs, SampleList

__all__ = ["LogStore"]


class LogStore:
    """Samples of the logged signals of one plan.

    Parameters
    ----------
    plan : Plan
        The compiled plan (blocks initialized: port shapes are known).
    wanted : tuple of str, optional
        ``"block.port"`` signals to log; None (or ``"*"`` among them) logs every output. Inputs of blocks that record
        their inputs (``records_inputs``) are always logged.
    k0 : int
        First tick of the logs (a run resumed from a checkpoint starts there).

    Attributes
    ----------
    refs : list of (int, str, str)
        ``(block index, port, key)`` of every logged signal, in plan order.
    task_ticks : list of list of int
        Per task, the ticks at which it logged.
    rows : list of list
        Per task, rows appended by the fast path and not yet flushed: floats, a row's values
        one after the other (:meth:`width` values a row), or an array per row.
    columns : list of list of (str, int)
        Per task, ``(key, column)`` of each logged signal in a row (set by the fast path;
        signals that are one value share a column).
    last : int
        Last logged tick (-1 before any).
    """

    def __init__(self, plan, wanted, k0: int = 0, last: int = -1):
        self.plan = plan
        self.k0 = k0
        self.last = last
        if wanted is None:
            wanted = (ALL_OUTPUTS,)
        refs = []
        if ALL_OUTPUTS in wanted:
            refs = [(i, p) for i, b in enumerate(plan.blocks) for p in b.output_names]
            wanted = tuple(k for k in wanted if k != ALL_OUTPUTS)
        # Refs under a nested plan ("sub/x.out") are that plan's (compile checked them).
        have = set(refs)
        refs += [(plan.index[bn], p) for bn, p in map(split_ref, wanted)
                 if bn in plan.index and (plan.index[bn], p) not in have]
        refs += [(i, p) for i, b in enumerate(plan.blocks)
                 if getattr(b, "records_inputs", False) for p in b.input_names
                 if f"{plan.names[i]}.{p}" not in wanted]
        self.task_ticks: list[list[int]] = [[] for _ in plan.tasks]
        self.lists: dict[str, tuple[SampleList, list]] = {}
        self.refs: list[tuple[int, str, str]] = []
        for i, p in refs:
            b = plan.blocks[i]
            key = f"{plan.names[i]}.{p}"
            src = b.outputs if p in b.output_names else b.inputs
            self.lists[key] = (SampleList(src[p].shape), self.task_ticks[plan.task_of[i]])
            self.refs.append((i, p, key))
        self.rows: list[list] = [[] for _ in plan.tasks]
        self.columns: list[list[tuple[str, int]]] = [[] for _ in plan.tasks]
        #: Samples after the last tick, off the grid: key -> [(t, value)] (a block's outputs
        #: where it stopped the run between ticks, :meth:`add_late`).
        self.late: dict[str, list[tuple[float, np.ndarray]]] = {}

    def add_late(self, key: str, t: float, value) -> None:
        """Log ``value`` as signal ``key``'s sample at ``t`` (s), after its tick samples:
        where a block stopped the run between ticks."""
        self.late.setdefault(key, []).append((t, np.asarray(value)))

    def _with_late(self, key: str, start: int, n: int, t: np.ndarray, v: np.ndarray):
        """Samples ``start:`` of ``key`` (``t``, ``v``: its tick samples ``start:n``) with
        its late samples after them."""
        late = self.late[key][max(0, start - n):]
        if not late:
            return t, v
        return (np.concatenate([t, [tt for tt, _ in late]]),
                np.concatenate([v.reshape((len(v),) + late[0][1].shape),
                                [x for _, x in late]]))

    def appender(self, key: str):
        """The bound ``append`` of signal ``key``'s sample list (for the interpreter's lists)."""
        return self.lists[key][0].append

    def width(self, task: int) -> int:
        """Values in a row of ``task`` (its columns)."""
        return 1 + max((c for _, c in self.columns[task]), default=-1)

    def flush(self) -> None:
        """Move the fast path's rows into the sample lists (one chunk per task and signal)."""
        lists = self.lists
        for task, (rows, cols) in enumerate(zip(self.rows, self.columns)):
            if not rows or not cols:
                rows.clear()
                continue
            if isinstance(rows[0], np.ndarray):
                arr = np.array(rows, dtype=np.float64)
            else:
                # Floats (the scalar strategy) read in one pass.
                arr = np.fromiter(rows, np.float64, len(rows)).reshape(-1, self.width(task))
            for key, c in cols:
                lists[key][0].add_chunk(arr[:, c:c + 1])
            rows.clear()

    def unlog(self, k: int, active) -> None:
        """Drop the samples of tick ``k`` (the last logged one) of the ``active`` tasks."""
        self.flush()
        task_of = self.plan.task_of
        for i, _, key in self.refs:
            if active[task_of[i]]:
                self.lists[key][0].pop_last()
        for n, on in enumerate(active):
            ticks = self.task_ticks[n]
            if on and ticks and ticks[-1] == k:
                ticks.pop()
        self.last = k - 1

    # -- reading ----------------------------------------------------------------------------

    def values(self, t0: float, dt: float) -> tuple[dict, dict, np.ndarray]:
        """``(values, times, base time vector)`` of everything logged so far."""
        self.flush()
        values, times = {}, {}
        # Signals of a task have one time vector: converted once, copied for each (a copy
        # costs a twentieth of the conversion; each Logs entry owns its array).
        spans: dict[tuple[int, int], np.ndarray] = {}
        for key, (samples, ticks) in self.lists.items():
            n = min(samples.length(), len(ticks))
            try:
                values[key] = samples.array(0, n)
            except ValueError as err:
                raise SimulationError(f"signal {key} changed shape during the run ({err}); an "
                                      "output must keep the shape it had at initialize") from err
            span = (id(ticks), n)
            t = spans.get(span)
            if t is None:
                t = spans[span] = t0 + _ticks(ticks, 0, n) * dt
                times[key] = t
            else:
                times[key] = t.copy()
            if key in self.late:
                times[key], values[key] = self._with_late(key, 0, n, times[key], values[key])
        base = t0 + np.arange(self.k0, self.last + 1, dtype=np.float64) * dt
        if self.late:
            ends = [tt for samples in self.late.values() for tt, _ in samples]
            base = np.concatenate([base, [max(ends)]])
        return values, times, base

    def logs(self, t0: float, dt: float) -> Logs:
        """Everything logged so far as :class:`~cosim.run.logs.Logs`."""
        return Logs(*self.values(t0, dt))

    def since(self, marks: dict[str, int], t0: float, dt: float) -> dict:
        """Samples after ``marks[key]``, as ``{key: (time, values)}``; updates ``marks``."""
        self.flush()
        out = {}
        times: dict[tuple[int, int, int], np.ndarray] = {}    # signals of a task share them
        for key, (samples, ticks) in self.lists.items():
            n = min(samples.length(), len(ticks))
            start = marks.get(key, 0)
            span = (id(ticks), start, n)
            t = times.get(span)
            if t is None:
                t = times[span] = t0 + _ticks(ticks, start, n) * dt
            out[key] = (t, samples.array(start, n))
            marks[key] = n
            if key in self.late:
                out[key] = self._with_late(key, start, n, t[:max(0, n - start)], out[key][1])
                marks[key] = n + len(self.late[key])
        return out

    # -- snapshots --------------------------------------------------------------------------

    def position(self) -> dict:
        """Where the logs stand: sample counts per signal and tick counts per task."""
        self.flush()
        return {"log_lengths": {key: samples.length() for key, (samples, _) in self.lists.items()},
                "task_ticks": [len(ticks) for ticks in self.task_ticks],
                "last_logged": self.last,
                "late": {key: len(v) for key, v in self.late.items()}}

    def cut(self, position: dict) -> None:
        """Go back to ``position`` (from :meth:`position`): later samples are dropped."""
        self.flush()
        for key, (samples, _) in self.lists.items():
            samples.truncate(position["log_lengths"][key])
        for ticks, n in zip(self.task_ticks, position["task_ticks"]):
            del ticks[n:]
        self.last = position["last_logged"]
        kept = position.get("late", {})
        self.late = {key: v[:kept[key]] for key, v in self.late.items() if kept.get(key)}


def _ticks(ticks: list, start: int, stop: int) -> np.ndarray:
    """Ticks ``start:stop`` of a tick list as floats, shape ``(stop - start,)``: read as
    integers first (converting a list of Python ints to float64 directly takes twice as
    long; the values are the same, ticks being far below 2**53)."""
    n = max(stop - start, 0)
    part = ticks if start == 0 and stop == len(ticks) else islice(ticks, start, stop)
    return np.fromiter(part, np.int64, n).astype(np.float64)
