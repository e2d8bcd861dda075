"""Watching a co-simulation for the dashboard: a cheap :class:`Observer` and its thread.

On the master's thread, :meth:`RunMonitor.observe` writes the master's time and the chosen
unit outputs' values into preallocated rings (no allocation, no lock: a few stores per
macro step) and, about every :attr:`RunMonitor.period` seconds of wall time, queues a
snapshot (time, step count, stats, the length of the step log, the port values, the new
log batches of the chosen logged signals). A thread of its own turns snapshots into
dashboard deltas (:mod:`cosim.dashboard.board`): the new samples of every chosen signal,
cut to at most :data:`POINTS` per update (minimum and maximum per time slice,
:mod:`cosim.dashboard.decimate`); per-unit wall time per macro step from the master's
``calls.step_times`` (for every path that fills it); coupling iterations and rejected steps
from its ``step_log``; recoveries and stops as marks; the link values, the rate and the
time left. The macro loop never waits for the page, and the page gets a bounded number of
bounded updates whatever the run's rate.

Signals the page can choose: every unit output (``unit.port``, ``unit.port[i]``; sampled
every macro step) and every signal of the central logs as the master collects them (blocks
logged inside units, ``unit/block.port``, and top-level blocks, ``block.port``; every
``log_every`` macro steps), named as the run's logs name them.
"""

from __future__ import annotations

import collections
import math
import threading
import time
from array import array

import numpy as np

from cosim.dashboard.decimate import jsonable, minmax
from cosim.dashboard.diagram import unit_facts
from cosim.master.observer import Observer
from cosim.master.partition import REST
from cosim.master.records import StepStatus

__all__ = ["RunMonitor", "port_label", "unit_placement"]

#: Signals shown when none are chosen: the first few scalar unit outputs.
DEFAULT_SIGNALS = 4
#: Observer calls a chosen output's ring holds: the monitor's thread reads it several
#: times a second, so it keeps up unless the master takes over 16,000 steps between reads.
RING = 1 << 14
#: Most samples of a signal in one update (the minimum and maximum of POINTS // 2 time
#: slices, the first and the last): the page's data grows by a bounded amount per update.
POINTS = 200
#: Elements of a vector signal offered one by one (``key[i]``).
MAX_ELEMENTS = 16
NAN = math.nan
#: Wall seconds the compiled exchange or an engine window may run between two observer calls.
CHUNK_SECONDS = 0.02
#: Wall seconds between two readings of the clock by the observer (at the recent call
#: rate: a clock read costs as much as the rest of a call).
CHECK_SECONDS = 0.005

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


class _Output:
    """A chosen unit output: element ``index`` of port ``key``, one sample per observer
    call in a ring of :data:`RING` floats (slot ``count % RING``), from call ``start`` on
    (to ``stop`` once dropped)."""

    __slots__ = ("label", "key", "index", "ring", "start", "stop", "row")

    def __init__(self, label: str, key: tuple, index: int, start: int):
        self.label, self.key, self.index = label, key, index
        self.ring = array("d", bytes(8 * RING))
        self.start, self.stop = start, None
        self.row = (key, index, self.ring)         # what observe() reads, as one tuple


class _Logged:
    """A chosen signal of the central logs: element ``index`` of logged signal ``name``,
    read from batch ``at`` on."""

    __slots__ = ("label", "name", "index", "at")

    def __init__(self, label: str, name: str, index: int, at: int):
        self.label, self.name, self.index, self.at = label, name, index, at


def _ring_slice(ring: array, a: int, b: int) -> np.ndarray:
    """Slots of calls ``a`` to ``b`` (``b - a <= RING``) of a ring, as a new array."""
    if b <= a:
        return np.zeros(0)
    i, j = a % RING, b % RING
    buf = np.frombuffer(ring, dtype=np.float64)
    if i < j:
        return buf[i:j].copy()
    return np.concatenate([buf[i:], buf[:j]])


def _latest_run(t: np.ndarray) -> int:
    """Where the samples ``t`` last went back in time (a recovery replays from a
    checkpoint): the index the latest stretch starts at (0 when t never goes back)."""
    back = np.flatnonzero(np.diff(t) < 0)
    return int(back[-1]) + 1 if len(back) else 0


class RunMonitor(Observer):
    """The dashboard's observer of one co-simulation.

    Parameters
    ----------
    sim : CoSimulation
    board : Board
        Receives the deltas.
    signals : sequence of str, optional
        Signals to show from the start, as the page names them (``unit.port``,
        ``unit/block.port``, ``block.port``, ``...[i]`` for element ``i`` of a vector);
        names not known yet (logged signals before the first log collection) are taken
        when they appear. Default: the first :data:`DEFAULT_SIGNALS` scalar unit outputs.
        The page can choose others while it runs.
    period : float
        Wall seconds between snapshots (the page's update rate).
    """

    def __init__(self, sim, board, signals=None, period: float = 0.5):
        self.sim = sim
        self.board = board
        self.period = period
        self.stride = 1
        # -- written on the master's thread only
        self._count = 0                     # observer calls so far (the rings' clock)
        self._times = array("d", bytes(8 * RING))
        self._rows: tuple = ()              # (key, index, ring) of the chosen outputs
        self._due = 0.0
        self._n_last, self._t_last = 0, time.perf_counter()
        self._i_last = self._check_at = 0
        self._started = False
        # -- handed from any thread to the master's (installed at its next call)
        self._asked: tuple[list, list] | None = None
        # -- the monitor's thread (and flush, under _lock)
        self._wanted = None if signals is None else list(signals)
        self._chosen: list[str] = []        # as chosen, in order
        self._waiting: list[str] = []       # chosen, not known yet
        self._outputs: tuple[_Output, ...] = ()
        self._logged: tuple[_Logged, ...] = ()
        self._reading: dict[int, _Output] = {}  # outputs with samples not yet published
        self._read = 0                      # rings read up to this call
        self._candidates: dict[str, tuple] = {}
        self._n_names = 0
        self._snaps: collections.deque = collections.deque()
        self._wake = threading.Event()
        self._stop = False
        self._lock = threading.Lock()        # one delta at a time, published in order
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
        if self._asked is not None:
            self._install()
        i = self._count
        j = i % RING
        self._times[j] = master.T
        values = master.values
        for key, index, ring in self._rows:
            v = values.get(key)
            ring[j] = NAN if v is None else v.item(index)
        self._count = i + 1
        if i < self._check_at:
            return                          # the clock is read every CHECK_SECONDS or so
        now = time.perf_counter()
        n = master.n
        if now > self._t_last:
            # Chunks of the compiled exchange / engine windows about CHUNK_SECONDS long: grown fast
            # from 1 (at most x8 per call), shrunk at once when steps get slower.
            if n > self._n_last + 1:
                self.stride = max(1, min(8 * self.stride, int(
                    (n - self._n_last) * CHUNK_SECONDS / (now - self._t_last))))
            calls = (i - self._i_last) / (now - self._t_last)
            self._check_at = i + max(1, min(1000, int(calls * CHECK_SECONDS)))
        self._n_last, self._t_last, self._i_last = n, now, i
        if now >= self._due:
            self._due = now + self.period
            self._snaps.append(self._snapshot(master, now))
            self._wake.set()

    def _snapshot(self, master, now: float) -> tuple:
        """What the monitor's thread needs of the master now (its thread: nothing races)."""
        if not self._started:
            self._start(master)
        central = master.central
        logged = []
        for sig in self._logged:
            ts, vs, sig.at = central.batches(sig.name, sig.at)
            if ts:
                logged.append((sig, ts, vs))
        return (now, master.T, master.n, dict(master.stats), len(master.step_log),
                dict(master.values), self._count, logged)

    def _install(self) -> None:
        """Take the signals :meth:`select` chose (on the master's thread, between steps)."""
        outputs, logged = self._asked
        self._asked = None
        kept = {id(o) for o in outputs}
        for old in self._outputs:
            if id(old) not in kept:
                old.stop = self._count      # set before the tuple below drops it
        for o in outputs:
            if o.start is None:
                o.start = self._count
        self._outputs, self._logged = tuple(outputs), tuple(logged)
        self._rows = tuple(o.row for o in outputs)

    def _start(self, master) -> None:
        """First snapshot: the ports there are, the signals to record."""
        self._started = True
        for (u, p), v in master.values.items():
            if v.dtype == object:
                continue            # text (String / Binary): shown on its link, not plotted
            label = port_label(u, p)
            if v.size == 1:
                self._candidates[label] = ("port", (u, p), 0)
            else:
                for i in range(min(v.size, MAX_ELEMENTS)):
                    self._candidates[f"{label}[{i}]"] = ("port", (u, p), i)
        self._discover(master.central)
        wanted = self._wanted
        if wanted is None:
            wanted = [k for k, c in self._candidates.items()
                      if c[0] == "port" and "[" not in k][:DEFAULT_SIGNALS]
        with self._lock:
            self._choose(wanted)
        self._install()

    def _discover(self, central) -> bool:
        """Add the central logs' new signals to the candidates; True if there were any."""
        names = central.names()
        if len(names) == self._n_names:
            return False
        self._n_names = len(names)
        new = False
        for name in names:
            if name in self._candidates or f"{name}[0]" in self._candidates:
                continue                    # known (a unit output the top level logs too)
            ts, vs, _ = central.batches(name, 0)
            if not vs or np.asarray(vs[0]).dtype == object:
                continue                    # (nothing yet, or text: not plotted)
            size = int(np.prod(np.shape(vs[0])[1:], dtype=np.int64))
            if size == 1:
                self._candidates[name] = ("log", name, 0)
            else:
                for i in range(min(size, MAX_ELEMENTS)):
                    self._candidates[f"{name}[{i}]"] = ("log", name, i)
            new = True
        return new

    @property
    def recording(self) -> list[str]:
        """The signals shown (labels as the page shows them)."""
        return [s.label for s in self._outputs + self._logged]

    def select(self, labels) -> list[str]:
        """Show these signals from now on (labels the page shows); returns the unknown ones
        (ignored). Callable from any thread: the master takes the new set at its next
        call."""
        with self._lock:
            return self._choose(list(labels))

    def _choose(self, labels: list) -> list[str]:
        known = [k for k in labels if k in self._candidates]
        unknown = [k for k in labels if k not in self._candidates]
        self._chosen, self._waiting = labels, unknown
        old_out = {o.label: o for o in self._outputs}
        old_log = {s.label: s for s in self._logged}
        outputs, logged = [], []
        for k in known:
            kind, key, index = self._candidates[k]
            if kind == "port":
                o = old_out.get(k) or _Output(k, key, index, None)
                outputs.append(o)
            else:
                logged.append(old_log.get(k) or _Logged(k, key, index, 0))
        self._asked = (outputs, logged)
        self.board.publish({"set": {"selected": known,
                                    "signal_keys": list(self._candidates)}})
        return unknown

    # -- the monitor's own thread ---------------------------------------------------------

    def _loop(self) -> None:
        while not self._stop:
            self._wake.wait(1.0)
            self._wake.clear()
            try:
                with self._lock:
                    self._publish()
            except Exception as err:  # noqa: BLE001 - the run goes on without its page
                self.board.publish({"marks": [{"t": self.sim.master.T, "kind": "error",
                                               "text": f"dashboard: {err}"}]})

    def _publish(self, status=None) -> None:
        """Publish the queued snapshots (under :attr:`_lock`; when behind, those carrying
        only what later ones carry too are skipped); ``status(delta)`` edits the last."""
        while self._snaps:
            snap = self._snaps.popleft()
            if self._snaps and not snap[7]:
                continue                # the rings, stats and logs are read up to the latest
            delta = self._delta(*snap)
            if status is not None and not self._snaps:
                status(delta)
            self.board.publish(delta)

    def _units(self) -> dict:
        """Where each unit runs, with what its description says (step, feedthrough)."""
        units = unit_placement(self.sim)
        for u, f in self._facts["units"].items():
            mine = units.setdefault(u, {})
            mine["feedthrough"] = f["feedthrough"]
            if mine.get("dt") is None:
                mine["dt"] = f["dt"]
        return units

    def _delta(self, wall, T, n, stats, n_log, values, count, logged) -> dict:
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
        if self._discover(master.central):
            delta["set"]["signal_keys"] = list(self._candidates)
            if any(k in self._candidates for k in self._waiting):
                self._choose(self._chosen)          # in the order they were chosen
        # Per-unit wall time per macro step since the last snapshot (every path that
        # records its unit calls in calls.step_times: the engine, the compiled exchange
        # when observed).
        timing = {}
        for u, (ts, secs) in list(master.calls.step_times.items()):
            i = self._step_at.get(u, 0)
            end = min(len(ts), len(secs))
            self._step_at[u] = end
            if end > i:
                # Copies (array slices): a buffer exported from an array the master appends
                # to would make its next append fail.
                t = np.frombuffer(ts[i:end], dtype=np.float64)
                steps = 1 + int(np.count_nonzero(np.diff(t)))   # iterations: one step
                timing[u] = 1e3 * float(np.sum(np.frombuffer(secs[i:end], np.float64))) \
                    / steps
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
        signals = self._samples(count, logged)
        if signals:
            delta["signals"] = signals
        return delta

    def _samples(self, count: int, logged: list) -> dict:
        """The chosen signals' samples since the last delta, at most :data:`POINTS` each;
        a signal that went back in time (a recovery's replay) sends only its latest
        stretch, which the board and the page put in place of what they held from then."""
        out = {}
        lo = max(self._read, count - RING)          # older slots were overwritten
        times = _ring_slice(self._times, lo, count)
        reading = self._reading
        for o in self._outputs:
            reading.setdefault(id(o), o)
        for key, o in list(reading.items()):
            a = max(lo, o.start if o.start is not None else count)
            b = count if o.stop is None else min(count, o.stop)
            if b > a:
                out[o.label] = (times[a - lo:b - lo], _ring_slice(o.ring, a, b))
            if o.stop is not None and o.stop <= count:
                del reading[key]            # dropped, and all of it published
        self._read = count
        for sig, ts, vs in logged:
            pairs = [(t, v) for t, v in zip(ts, vs) if len(t)]
            if pairs:
                out[sig.label] = (np.concatenate([t for t, _ in pairs]), np.concatenate(
                    [np.reshape(v, (len(v), -1))[:, sig.index] for _, v in pairs]))
        signals = {}
        for label, (t, v) in out.items():
            k = _latest_run(t)
            t, v = minmax(t[k:], v[k:], POINTS)
            signals[label] = [t.tolist(), jsonable(v)]
        return signals

    def finish_thread(self) -> None:
        """Stop the thread (no last update)."""
        self._stop = True
        self._wake.set()
        self._thread.join(timeout=5)

    def flush(self, status: str | None = None) -> None:
        """Publish the run as it is now (after a run or a failure; on the master's thread or
        while it does not step). ``status``: what the page says (default ``done`` at the
        end time, ``paused`` before it)."""
        master = self.sim.master
        if not master.initialized:
            self.board.publish({"set": {"progress": {**self.board.state["progress"],
                                                     "status": status or "paused"}}})
            return
        said = self.board.state["progress"].get("status")

        def last(delta):
            progress = delta["set"]["progress"]
            if status is not None:
                progress["status"] = status
            elif said == "failed":
                progress["status"] = "failed"       # a look after the failure
            elif master.step_log and master.step_log[-1].status is StepStatus.STOPPED:
                progress["status"] = "stopped"      # by a unit's stop event
            elif progress["status"] == "running":
                progress["status"] = "paused"
        for _ in range(2):          # again if this update found signals chosen in waiting
            if self._asked is not None:
                self._install()
            snap = self._snapshot(master, time.perf_counter())
            with self._lock:                # queued here: the thread cannot take it unedited
                self._snaps.append(snap)
                self._publish(last)
            if self._asked is None:
                break
