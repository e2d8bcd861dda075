"""Watching a co-simulation for the dashboard: a cheap :class:`Observer` and its thread.

On the master's thread, :meth:`RunMonitor.observe` appends the chosen signals' values (a few
floats per macro step) and, about every :attr:`RunMonitor.period` seconds of wall time,
queues a snapshot (time, step count, stats, the length of the step log, the port values).
A thread of its own turns snapshots into dashboard deltas (:mod:`cosim.dashboard.board`):
per-unit wall time per macro step from the master's ``calls.step_times``, coupling
iterations and rejected steps from its ``step_log``, recoveries and stops as marks, the
link values, the rate and the time left. The macro loop never waits for the page.
"""

from __future__ import annotations

import collections
import math
import threading
import time

from cosim.dashboard.diagram import unit_facts
from cosim.master.observer import Observer
from cosim.master.partition import REST
from cosim.master.records import StepStatus

__all__ = ["RunMonitor", "port_label", "unit_placement"]

#: Signals recorded per macro step when none are chosen: the first few scalar ports.
DEFAULT_SIGNALS = 4
#: Wall seconds the compiled exchange or the pipeline may run between two observer calls.
CHUNK_SECONDS = 0.02

_MARKS = {StepStatus.RECOVERED: "recovery", StepStatus.REJECTED: "rejected",
          StepStatus.STOPPED: "stop", StepStatus.CONTINUED: "nonconverged"}


def port_label(unit: str, port: str) -> str:
    """How the page names a unit's output port: ``unit.port``; the top-level unit's
    ``block__port`` outputs as the model's ``block.port``."""
    if unit == REST and "__" in port:
        return port.replace("__", ".", 1)
    return f"{unit}.{port}"


def _finite(x: float):
    return x if math.isfinite(x) else None


def _shown(x):
    """A port value's element for the page: a finite float or None, a String port's text,
    a Binary port's bytes as hex."""
    if type(x) is str:
        return x
    if type(x) is bytes:
        return x.hex()
    return _finite(float(x))


def unit_placement(sim) -> dict:
    """Where each unit of co-simulation ``sim`` runs: unit -> ``backend``, ``kind`` (``in
    process``, ``process``, ``ray``, ``remote``), ``where`` (the proxy's
    :meth:`~cosim.master.proxy.Proxy.where`), ``label`` (one line for people), ``dt``,
    ``solver``, ``options``."""
    placement = sim.placement()["units"]
    out = {}
    for u, proxy in sim.master.proxies.items():
        p = placement.get(u, {})
        backend = p.get("backend", "?")
        try:
            where = dict(proxy.where())
        except Exception as err:  # noqa: BLE001 - a host that cannot say stays unnamed
            where = {"error": f"{type(err).__name__}: {err}"}
        kind = "in process" if backend == "local" and proxy.in_process() is not None else \
            "ray" if backend == "ray" else "remote" if backend == "remote" else "process"
        bits = ["in process" if kind == "in process" else backend]
        if "node" in where:
            bits.append(f"node {str(where['node'])[:8]}")
        if "pid" in where:
            bits.append(f"pid {where['pid']}")
        if "address" in where:
            bits.append(str(where["address"]))
        out[u] = {"backend": backend, "kind": kind, "where": where, "label": " ".join(bits),
                  "dt": p.get("dt"), "solver": p.get("solver"),
                  "options": {k: str(v) for k, v in p.get("options", {}).items()}}
    return out


class _Recorder:
    """One chosen signal: element ``index`` of unit output ``key``, sampled per call."""

    __slots__ = ("key", "index", "label", "samples")

    def __init__(self, key, index, label):
        self.key, self.index, self.label = key, index, label
        # (t, value) pairs not yet handed to the board: one append per sample on the master's
        # thread, taken off the front by the monitor's thread (list ops are atomic).
        self.samples: list[tuple[float, float]] = []


class RunMonitor(Observer):
    """The dashboard's observer of one co-simulation.

    Parameters
    ----------
    sim : CoSimulation
    board : Board
        Receives the deltas.
    signals : sequence of str, optional
        Signals to record per macro step, as the page names them (``unit.port``, or
        ``unit.port[i]`` for element ``i`` of a vector port); default: the first
        :data:`DEFAULT_SIGNALS` scalar ports. The page can choose others while it runs.
    period : float
        Wall seconds between snapshots (the page's update rate).
    """

    def __init__(self, sim, board, signals=None, period: float = 0.1):
        self.sim = sim
        self.board = board
        self.period = period
        self.stride = 1
        self._wanted = None if signals is None else list(signals)
        self._recorders: tuple[_Recorder, ...] = ()
        self._candidates: dict[str, tuple] = {}
        self._due = 0.0
        self._n_last, self._t_last = 0, time.perf_counter()
        self._snaps: collections.deque = collections.deque()
        self._wake = threading.Event()
        self._stop = False
        self._lock = threading.Lock()        # one delta at a time, published in order
        self._published = 0.0                # wall time of the latest snapshot published
        self._started = False
        self._facts = None
        self._log_at = 0
        self._step_at: dict[str, int] = {}
        self._rate = collections.deque(maxlen=40)      # (wall, T, n) of recent snapshots
        self._t_wall0 = time.perf_counter()
        self._thread = threading.Thread(target=self._loop, name="cosim-dashboard",
                                        daemon=True)
        self._thread.start()

    # -- on the master's thread -----------------------------------------------------------

    def observe(self, master) -> None:
        T = master.T
        values = master.values
        for r in self._recorders:
            v = values.get(r.key)
            if v is not None:
                r.samples.append((T, float(v.flat[r.index])))
        now = time.perf_counter()
        # Chunks of the compiled exchange / pipeline about CHUNK_SECONDS long: grown fast
        # from 1 (at most x8 per call), shrunk at once when steps get slower.
        n = master.n
        if n > self._n_last and now > self._t_last:
            self.stride = max(1, min(8 * self.stride, int(
                (n - self._n_last) * CHUNK_SECONDS / (now - self._t_last))))
        self._n_last, self._t_last = n, now
        if now < self._due:
            return
        self._due = now + self.period
        if not self._started:
            self._start(master)
        self._snaps.append((now, T, master.n, dict(master.stats), len(master.step_log),
                            dict(values)))
        self._wake.set()

    def _start(self, master) -> None:
        """First call: the ports there are, the signals to record (the master's thread)."""
        self._started = True
        for (u, p), v in master.values.items():
            if v.dtype == object:
                continue            # text (String / Binary): shown on its link, not plotted
            label = port_label(u, p)
            if v.size == 1:
                self._candidates[label] = ((u, p), 0)
            else:
                for i in range(min(v.size, 16)):
                    self._candidates[f"{label}[{i}]"] = ((u, p), i)
        wanted = self._wanted
        if wanted is None:
            wanted = [k for k in self._candidates if "[" not in k][:DEFAULT_SIGNALS]
        self.select(wanted)

    @property
    def recording(self) -> list[str]:
        """The signals recorded every macro step (labels as the page shows them)."""
        return [r.label for r in self._recorders]

    def select(self, labels) -> list[str]:
        """Record these signals from now on (labels the page shows); returns the unknown
        ones (ignored). Callable from any thread: the master sees the new set at its next
        call."""
        known = [k for k in labels if k in self._candidates]
        old = {r.label: r for r in self._recorders}
        self._recorders = tuple(old.get(k) or _Recorder(*self._candidates[k], k)
                                for k in known)
        self.board.publish({"set": {"selected": known,
                                    "signal_keys": list(self._candidates)}})
        return [k for k in labels if k not in self._candidates]

    # -- the monitor's own thread ---------------------------------------------------------

    def _loop(self) -> None:
        while not self._stop:
            self._wake.wait(1.0)
            self._wake.clear()
            while self._snaps:
                snap = self._snaps.popleft()
                if self._snaps:
                    continue            # behind: only the latest snapshot matters
                try:
                    with self._lock:
                        if snap[0] > self._published:   # not older than a flush
                            self._published = snap[0]
                            self.board.publish(self._delta(*snap))
                except Exception as err:  # noqa: BLE001 - the run goes on without its page
                    self.board.publish({"marks": [{"t": snap[1], "kind": "error",
                                                   "text": f"dashboard: {err}"}]})

    def _units(self) -> dict:
        """Where each unit runs, with what its description says (step, feedthrough)."""
        units = unit_placement(self.sim)
        for u, f in self._facts["units"].items():
            mine = units.setdefault(u, {})
            mine["feedthrough"] = f["feedthrough"]
            if mine.get("dt") is None:
                mine["dt"] = f["dt"]
        return units

    def _delta(self, wall, T, n, stats, n_log, values) -> dict:
        master = self.sim.master
        cfg = self.sim.config
        delta: dict = {}
        first = self._facts is None
        if first:
            self._facts = unit_facts(master)
        # Progress: the rate over the last few seconds of wall time.
        self._rate.append((wall, T, n))
        w0, T0, n0 = self._rate[0]
        span = wall - w0
        rate = (n - n0) / span if span > 0 else 0.0
        speed = (T - T0) / span if span > 0 else 0.0
        left = max(0.0, cfg.t_end - T)
        delta["set"] = {"progress": {
            "t": T, "t0": cfg.t0, "t_end": cfg.t_end, "steps": n, "rate": rate,
            "eta": left / speed if speed > 0 else None, "wall": wall - self._t_wall0,
            "stats": stats, "status": "done" if left <= 1e-9 * max(1.0, abs(cfg.t_end))
            else "running"},
            "links": {port_label(u, p): [_shown(x) for x in v.flat[:4]]
                      for (u, p), v in values.items()}}
        if first:
            delta["set"]["units"] = self._units()
            delta["set"]["couplings"] = self._facts["couplings"]
        # Per-unit wall time per macro step since the last snapshot.
        timing = {}
        for u, (ts, secs) in list(master.calls.step_times.items()):
            i = self._step_at.get(u, 0)
            new_t, new_s = ts[i:], secs[i:]
            self._step_at[u] = i + len(new_t)
            if len(new_t):
                timing[u] = 1e3 * sum(new_s) / max(1, len(set(new_t)))
        if timing:
            delta["timing"] = {"t": [T], "units": {u: [v] for u, v in timing.items()}}
        # Iterations, rejections and marks from the step log.
        log = master.step_log
        start = min(self._log_at, n_log)
        records = log[start:n_log]
        self._log_at = n_log
        if records:
            its = max((r.iterations for r in records), default=0)
            rej = sum(r.status is StepStatus.REJECTED for r in records)
            delta["steps"] = {"t": [T], "iterations": [its], "rejected": [rej]}
            marks = [{"t": r.t, "kind": _MARKS[r.status], "text": r.message or
                      r.status.value} for r in records if r.status in _MARKS]
            if marks:
                delta["marks"] = marks[:200]
                if any(m["kind"] == "recovery" for m in marks):
                    delta["set"]["units"] = self._units()       # new pids
        signals = {}
        for r in self._recorders:
            end = len(r.samples)
            if end:
                new = r.samples[:end]
                del r.samples[:end]             # the board keeps them (thinned when long)
                signals[r.label] = [[t for t, _ in new], [_finite(v) for _, v in new]]
        if signals:
            delta["signals"] = signals
        return delta

    def finish_thread(self) -> None:
        """Stop the thread (no last update)."""
        self._stop = True
        self._wake.set()
        self._thread.join(timeout=5)

    def flush(self, status: str | None = None) -> None:
        """Publish the run as it is now (after a run or a failure; any thread). ``status``:
        what the page says (default ``done`` at the end time, ``paused`` before it)."""
        master = self.sim.master
        if not master.initialized:
            self.board.publish({"set": {"progress": {**self.board.state["progress"],
                                                     "status": status or "paused"}}})
            return
        if not self._started:
            self._start(master)
        snap = (time.perf_counter(), master.T, master.n, dict(master.stats),
                len(master.step_log), dict(master.values))
        with self._lock:
            self._published = snap[0]
            delta = self._delta(*snap)
            progress = delta["set"]["progress"]
            if status is not None:
                progress["status"] = status
            elif self.board.state["progress"].get("status") == "failed":
                progress["status"] = "failed"       # a look after the failure
            elif master.step_log and master.step_log[-1].status is StepStatus.STOPPED:
                progress["status"] = "stopped"      # by a unit's stop event
            elif progress["status"] == "running":
                progress["status"] = "paused"
            self.board.publish(delta)
