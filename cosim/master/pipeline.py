"""Pipelined macro steps: each remote unit is sent its next macro step as soon as the outputs
its inputs come from are in, not when every unit has finished the current one.

A Jacobi macro step ``n`` of a unit needs only its drivers' outputs up to the macro point
``T_n``. The lockstep master waits for every unit at every macro point: each step lasts as
long as its slowest unit plus a round trip, and a unit that finished early sleeps meanwhile
(on a loaded machine it then also waits to be scheduled again). :class:`Pipeline` drives each
unit from a thread of its own that sends step ``n`` once the drivers have reported ``T_n``:
a unit without inputs (or whose drivers are ahead) never waits for the others, and jitter of
one unit's steps is absorbed instead of adding up step by step. In a loop of units (A feeds B
feeds A) the pipeline degenerates to lockstep.

Every unit receives exactly the requests of the lockstep path (:meth:`Master.step
<cosim.master.master.Master.step>`), in its order, computed from the same macro points
(:class:`~cosim.master.extrapolation.PortHistory`), so results are bit-identical; only the
interleaving in time of different units' steps differs. A failing step stops the chunk where
the lockstep path raises: the units behind are driven up to that step, the error of the
earliest step (the first unit in the master's order on a tie) is raised. (Units that had run
ahead stay ahead: after a failure or a stop event their own state may be past the macro point
the master reports; the central logs are cut at a stop as on the lockstep path.)

A unit whose proxy offers a :class:`~cosim.master.proxy.Lane` and whose inputs hold their
value over the step (extrapolation order 0) takes its fused steps through a lane batch of its
own (:class:`_LaneSteps`): its ``Step`` written from a prepared header and the driving
outputs' float64 buffers, its ``Stepped`` read in place — the bytes of the ``Step`` message,
without the message objects and the codec (as :mod:`cosim.master.engine` does in lockstep).
When the lane offers a stream (:meth:`Lane.stream <cosim.master.proxy.Lane.stream>`, a
connection of the unit's own), step ``n + 1`` is sent as soon as its inputs are in, while
step ``n`` is still computed: the unit finds it waiting when it is done, instead of idling
for a round trip through the master (and, on a busy machine, for the master's thread to be
scheduled) every step. The unit then has run one step further than the master reports when
it or another unit fails or stops (its state, as the notes above say; that step's reply is
received and dropped).

Used for plain Jacobi macro steps (no algebraic coupling, no refresh at macro points, not
adaptive, not traced) when every unit's proxy may be driven from its own thread
(:attr:`Proxy.concurrent <cosim.master.proxy.Proxy.concurrent>`); the master steps the rest
through the protocol.
"""

from __future__ import annotations

import math
import threading
import time
from array import array

import numpy as np

from cosim.config import Scheme
from cosim.master import protocol as P
from cosim.master.calls import raise_error
from cosim.master.compiled import Chunk
from cosim.master.extrapolation import KEPT, PortHistory
from cosim.errors import TransportError

_F64 = np.dtype(np.float64)

__all__ = ["Pipeline"]


class Pipeline:
    """Pipelined macro steps of one co-simulation (see the module notes).

    Parameters
    ----------
    master : Master
        Initialized; the pipeline reads its proxies, graph (``inputs``), history (order and
        periods), ``delayed``, ``calls`` (step times), ``cfg`` and start time.
    quantum : Fraction
        The macro-step grid; ``H`` is ``nq_step`` quanta.
    nq_step : int
    """

    def __init__(self, master, quantum, nq_step: int):
        self.proxies = master.proxies
        self.names = list(master.names)
        self.inputs = {u: list(master.graph.inputs[u]) for u in self.names}
        self.drivers = {u: sorted({key[0] for _, key in self.inputs[u]} - {u})
                        for u in self.names}
        self.history = master.history
        self.delayed = master.delayed
        self.calls = master.calls
        self.fused = master.fused             # units sent one fused Step per macro step
        self.cfg = master.cfg
        self.H = master.cfg.H
        self.t0 = master.config.t0
        self.quantum = float(quantum)
        self.nq_step = nq_step
        self.lanes = {u: lane for u in self.names
                      if (lane := _LaneSteps.build(master, u)) is not None}

    @classmethod
    def build(cls, master):
        """The pipeline of an initialized master, or None when its macro steps cannot be
        pipelined (see the module notes) or there is nothing to overlap (one unit)."""
        cfg, control = master.cfg, master.control
        if (not cfg.pipelined or cfg.adaptive or cfg.trace or master.couplings
                or master.refresh_levels or cfg.scheme is not Scheme.JACOBI
                or len(master.names) < 2
                or not all(p.concurrent for p in master.proxies.values())):
            return None
        nq_step = control.quanta(cfg.H)
        if not nq_step or control.on_grid(cfg.H) != cfg.H:
            return None
        return cls(master, control.quantum, nq_step)

    def run(self, T: float, nq: int, n: int, n_stop: int, t_end: float, eps: float,
            values: dict, points: dict) -> Chunk | None:
        """Whole macro steps of ``H`` from ``T`` while ``T + H <= t_end`` and ``n < n_stop``,
        and no further than the next log collection (every ``log_every`` steps).

        Parameters are those of :meth:`CompiledExchange.run
        <cosim.master.compiled.CompiledExchange.run>`.

        Returns
        -------
        Chunk or None
            None when no whole step fits.
        """
        every = self.cfg.log_every
        n_stop = min(n_stop, (n // every + 1) * every)
        starts, nqs = [T], [nq]
        while (len(starts) - 1 < n_stop - n and starts[-1] < t_end - eps
               and t_end - starts[-1] >= self.H):
            nqs.append(nqs[-1] + self.nq_step)
            starts.append(self.t0 + nqs[-1] * self.quantum)
        steps = len(starts) - 1
        if steps == 0:
            return None
        run = _Run(self, starts, points)
        run.go()
        done = run.accepted()
        out_points, out_values = {}, {}
        for key, series in run.series.items():
            end = run.base[key] + done
            out_points[key] = series[max(0, end + 1 - KEPT):end + 1]
            out_values[key] = series[end][1]
        stopped = run.stopped if run.error is None else None
        chunk = Chunk(starts[:done], starts[done], nqs[done], out_values, out_points,
                      error=run.error, stopped=stopped or None, events=dict(run.next_event))
        for u, (ts, secs) in run.times.items():
            mine = self.calls.step_times.setdefault(u, (array("d"), array("d")))
            mine[0].extend(ts)
            mine[1].extend(secs)
        return chunk


class _Run:
    """One chunk of pipelined steps: the threads, and what they share under :attr:`cond`."""

    def __init__(self, pipe: Pipeline, starts: list, points: dict):
        self.pipe = pipe
        self.starts = starts
        self.steps = len(starts) - 1
        # Every output's macro points, oldest first: those before the chunk, then one per
        # step as its unit reports it (lists only grow: readers slice them under the lock).
        self.series = {key: list(pts) for key, pts in points.items()}
        self.base = {key: len(pts) - 1 for key, pts in points.items()}   # index of T_0
        self.done = {u: 0 for u in pipe.names}
        self.cond = threading.Condition()
        self.stop_at = self.steps          # no step past this one is started
        self.failures: list[tuple[int, int, BaseException]] = []
        self.stopped: dict[str, float] = {}
        self.stop_step: int | None = None
        self.next_event: dict[str, float] = {}
        self.times = {u: (array("d"), array("d")) for u in pipe.names}
        self.error: BaseException | None = None

    def go(self) -> None:
        threads = [threading.Thread(target=self._drive, args=(i, u), daemon=True,
                                    name=f"cosim-pipeline-{u}")
                   for i, u in enumerate(self.pipe.names)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if self.stop_step is not None:
            # A stop ends the run at its step: failures of units that ran past it are not
            # the lockstep path's (a failure in the stop's own step is).
            self.failures = [f for f in self.failures if f[0] <= self.stop_step]
        if self.failures:
            self.error = min(self.failures, key=lambda f: (f[0], f[1]))[2]

    def accepted(self) -> int:
        """Steps every unit completed that the master accepts: those before the earliest
        failure, or up to and including the step a unit stopped in."""
        if self.failures:
            return min(f[0] for f in self.failures)
        if self.stop_step is not None:
            return self.stop_step + 1
        return self.steps

    def _ready(self, u: str, i: int) -> bool:
        return i > self.stop_at or all(self.done[d] >= i for d in self.pipe.drivers[u])

    def _drive(self, index: int, u: str) -> None:
        """Unit ``u``'s steps, each once its drivers reported its start (a thread)."""
        at = [0]                            # the step a failure is of
        lane = self.pipe.lanes.get(u)
        try:
            if lane is not None:
                self._stream(u, lane, at)
                return
            for i in range(self.steps):
                at[0] = i
                if not self._step(u, i):
                    return
        except BaseException as err:  # noqa: BLE001 - raised by the master, in order
            with self.cond:
                self.failures.append((at[0], index, err))
                self.stop_at = min(self.stop_at, at[0])
                self.cond.notify_all()

    def _step(self, u: str, i: int) -> bool:
        """Step ``i`` of unit ``u``: its inputs from the macro points before it, the requests
        of the lockstep path, its outputs added to the series; False past the last step."""
        pipe = self.pipe
        view = PortHistory(pipe.history.order, pipe.history.period)
        with self.cond:
            self.cond.wait_for(lambda: self._ready(u, i))
            if i > self.stop_at:
                return False
            view.points = {key: self.series[key][max(0, self.base[key] + i + 1 - KEPT):
                                                 self.base[key] + i + 1]
                           for _, key in pipe.inputs[u]}
        self._done(u, i, *self._protocol_step(u, view, self.starts[i]))
        return True

    def _stream(self, u: str, lane: _LaneSteps, at: list) -> None:
        """Unit ``u``'s steps through its lane: step ``i + 1`` is sent while step ``i`` is
        still in flight when its inputs are in (up to the lane's depth), so that the unit
        finds it waiting when it is done; replies are taken in order. Every reply is
        received before this returns or raises (nothing of this unit is left in flight)."""
        batch, H = lane.batch, self.pipe.H
        flight: list = []                   # (step, T, when sent), oldest first
        i = 0                               # the next step to send
        last = 0.0                          # when the last reply came
        try:
            while i < self.steps or flight:
                held = None
                if i < self.steps and len(flight) < lane.depth:
                    with self.cond:
                        if not flight:
                            self.cond.wait_for(lambda: self._ready(u, i))
                        if i <= self.stop_at and self._ready(u, i):
                            held = [self.series[key][self.base[key] + i][1]
                                    for key in lane.keys]
                        elif not flight:
                            return          # past the last step that may be taken
                if held is not None:
                    payload = lane.payload(held)
                    if payload is not None:
                        T = self.starts[i]
                        at[0] = i
                        batch.send(T, H, [payload])
                        flight.append((i, T, time.perf_counter()))
                        i += 1
                        continue
                    if not flight:          # a value of another size: the ordinary path
                        at[0] = i
                        view = PortHistory(self.pipe.history.order, self.pipe.history.period)
                        view.points = {key: [(self.starts[i], v)]
                                       for key, v in zip(lane.keys, held)}
                        self._done(u, i, *self._protocol_step(u, view, self.starts[i]))
                        i += 1
                        continue
                j, T, sent = flight[0]
                at[0] = j
                rep = batch.receive(T)[0]
                del flight[0]
                now = time.perf_counter()
                ts, secs = self.times[u]
                ts.append(T)
                secs.append(now - max(sent, last))   # not the wait behind the step before
                last = now
                if type(rep) is tuple:
                    t_reached, event, nxt, out = rep
                else:
                    t_reached, event, nxt, out = unusual_reply(u, lane.fused, rep, T)
                self.next_event[u] = nxt
                if j > self.stop_at:
                    continue                # sent before another unit failed or stopped
                self._done(u, j, t_reached if event else None, lane.outputs(out))
        finally:
            for j, T, _ in flight:          # after a failure: drained, answers dropped
                try:
                    batch.receive(T)
                except Exception:  # noqa: BLE001 - the first failure is the one raised
                    break

    def _done(self, u: str, i: int, event: float | None, outputs: dict) -> None:
        """Step ``i`` of unit ``u`` reported: its outputs at the next macro point, and the
        time it stopped at (None: it did not)."""
        t_next = self.starts[i + 1]
        with self.cond:
            for key, v in outputs.items():
                self.series[key].append((t_next, v))
            self.done[u] = i + 1
            if event is not None and i <= self.stop_at:
                if self.stop_step is None or i < self.stop_step:
                    self.stopped = {}
                self.stop_step = i
                self.stopped[u] = event
                self.stop_at = i
            self.cond.notify_all()

    def _protocol_step(self, u: str, view: PortHistory, T: float) -> tuple:
        """Unit ``u``'s step as protocol requests through its proxy: the time it stopped at
        (or None) and its outputs."""
        pipe = self.pipe
        H = pipe.H
        values = {key: pts[-1][1] for key, pts in view.points.items()}
        fused = pipe.fused.get(u)
        if fused is not None:
            reqs = [fused.request(view, values, T, H, {}, {},
                                  P.STEP_REFRESH if pipe.delayed else 0)]
        else:
            reqs = [view.inputs(pipe.inputs[u], values, H, {}, {}), P.DoStep(T, H)]
            if pipe.delayed:
                reqs.append(P.RefreshOutputs())
            reqs.append(P.GetOutputs())
        proxy = pipe.proxies[u]
        started = time.perf_counter()
        handle = proxy.submit(reqs)
        proxy.flush()
        replies = proxy.result(handle)
        ts, secs = self.times[u]
        ts.append(T)
        secs.append(time.perf_counter() - started)
        event = self._check(u, reqs, replies, T)
        if fused is not None:
            outputs = {}
            fused.outputs(replies[-1], outputs)
        else:
            outputs = {(u, p): v for p, v in replies[-1].values.items()}
        return event, outputs

    def _check(self, u: str, reqs: list, replies: list, T: float) -> float | None:
        """Raise the error of an ErrorReply (as the lockstep call does); the time the unit
        stopped at in this step, or None."""
        stopped = None
        for req, rep in zip(reqs, replies):
            if isinstance(rep, P.ErrorReply):
                raise_error(u, req, rep, T)
            elif type(rep) is P.StepDone or type(rep) is P.Stepped:
                self.next_event[u] = rep.next_event
                stopped = rep.t_reached if rep.event else None
        return stopped


class _LaneSteps:
    """One unit's fused steps through a lane batch of its own (see the module notes)."""

    __slots__ = ("batch", "depth", "fused", "keys", "sizes", "layout", "whole")

    #: Steps of a unit in flight at once when its lane offers a stream: the next one waits
    #: at the unit while it computes the current one.
    DEPTH = 2

    def __init__(self, batch, depth: int, fused, sizes: list):
        self.batch = batch
        self.depth = depth
        self.fused = fused
        self.keys = fused.keys              # the outputs driving its inputs, in order
        self.sizes = sizes                  # values each of them packs into the Step
        self.layout, self.whole = output_layout(fused)

    @classmethod
    def build(cls, master, u: str) -> _LaneSteps | None:
        """Unit ``u``'s lane steps, or None when it takes no fused steps, its inputs are
        extrapolated, its proxy has no lane or the lane cannot carry its layout."""
        fused = master.fused.get(u)
        if fused is None or master.history.order != 0:
            return None
        lane = master.proxies[u].lane()
        if lane is None:
            return None
        out_sizes = output_sizes(master)
        spec = lane_spec(master, u, out_sizes)
        if spec is None:
            return None                     # the ordinary path reports what is wrong
        sizes = [out_sizes[key] for key in fused.keys]
        batch = lane.stream([spec], cls.DEPTH)
        if batch is not None:
            return cls(batch, cls.DEPTH, fused, sizes)
        batch = lane.batch([spec])
        return None if batch is None else cls(batch, 1, fused, sizes)

    def payload(self, held: list):
        """The Step's input values from the driving outputs ``held`` (in :attr:`keys`
        order): a C-contiguous float64 buffer, or None when one has not its input's size."""
        if len(held) == 1:
            return step_values(held[0], self.sizes[0])
        parts = []
        for v, n in zip(held, self.sizes):
            if (v := step_values(v, n)) is None:
                return None
            parts.append(v)
        return b"".join(parts)

    def outputs(self, out) -> dict:
        """The unit's outputs by key from a Stepped's packed ``out`` (views of it)."""
        if self.whole is not None:
            return {self.whole: out}
        return {key: out[a:b].reshape(shape) for key, shape, a, b in self.layout}


def output_sizes(master) -> dict:
    """Every unit output's key -> the number of values it packs into a Step."""
    return {(u, p.name): math.prod(p.shape) for u, d in master.desc.items()
            for p in d.outputs}


def lane_spec(master, u: str, sizes: dict) -> tuple | None:
    """Unit ``u``'s spec for :meth:`Lane.batch <cosim.master.proxy.Lane.batch>`,
    ``(unit, input names, orders (zeros), mode, input values, output values)``, or None when
    an input's
    size is not that of the output driving it (``sizes``: :func:`output_sizes`)."""
    fused = master.fused[u]
    shapes = {p.name: p.shape for p in master.desc[u].inputs}
    n_in = 0
    for name, key in fused.ports:
        if name not in shapes or math.prod(shapes[name]) != sizes.get(key):
            return None
        n_in += sizes[key]
    return (u, fused.names, fused.held, P.STEP_REFRESH if master.delayed else 0, n_in,
            fused.size)


def output_layout(fused) -> tuple[list, tuple | None]:
    """Where a unit's outputs sit in its Stepped's packed values: ``(key, shape, start,
    end)`` per output, and the key of a single output of shape ``(n,)`` (the packed array
    itself), else None."""
    layout = [((fused.unit, name), shape, a, b) for name, shape, a, b in fused.layout]
    whole = layout[0][0] if len(layout) == 1 and layout[0][1] == (
        layout[0][3] - layout[0][2],) else None
    return layout, whole


def step_values(value, n: int):
    """``value`` as the float64 values a Step carries (itself when it is such an array), or
    None when it has not ``n`` values."""
    v = np.ascontiguousarray(value, dtype=_F64).reshape(-1)
    return v if v.size == n else None


def unusual_reply(name: str, fused, rep, T: float) -> tuple:
    """A lane's reply that is not a plain Stepped of the expected size (see
    :meth:`LaneBatch.receive <cosim.master.proxy.LaneBatch.receive>`): its error raised, or
    ``(t_reached, event, next_event, outputs)`` of a Stepped the master checks as the
    protocol path does.

    Parameters
    ----------
    name : str
        The unit.
    fused : FusedStep
        Its fused step (the outputs' layout).
    rep : Reply
        The decoded reply.
    T : float
        Start of the macro step, s.
    """
    if isinstance(rep, P.ErrorReply):
        raise_error(name, P.Step((), (), 0, T, 0.0, np.zeros(0)), rep, T)
    if type(rep) is not P.Stepped:
        raise TransportError(name, "Step", f"answered {type(rep).__name__} to a Step", t=T)
    out: dict = {}
    fused.outputs(rep, out)                     # raises for outputs of the wrong size
    return rep.t_reached, rep.event, rep.next_event, rep.outputs
