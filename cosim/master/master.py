"""The co-simulation master: the macro loop that advances units macro step by macro step.

Per macro step ``[T, T+H]`` the master sets every unit's inputs (their value at ``T`` plus
derivatives from past macro points, :mod:`~cosim.master.extrapolation`; Gauss–Seidel:
interpolated to values already computed for ``T+H``), steps the units (Jacobi: all at once;
Gauss–Seidel: in the order of the :mod:`~cosim.master.unitgraph`), iterates algebraic
couplings with rollback (:mod:`~cosim.master.coupling`), accepts or rejects an adaptive step
(:mod:`~cosim.master.stepsize`) and exchanges outputs. Logs are collected in batches
(:mod:`~cosim.master.central_logs`), checkpoints gathered centrally
(:mod:`~cosim.master.checkpoints`, :mod:`~cosim.master.recovery`). The master sees units only
through :class:`~cosim.master.proxy.Proxy` objects speaking :mod:`cosim.master.protocol`.
"""

from __future__ import annotations

import math
import sys
import warnings
from dataclasses import replace

import numpy as np

from cosim.config import Feedthrough
from cosim.errors import TransportError
from cosim.master import checkpoints, coupling
from cosim.master import protocol as P
from cosim.master.calls import UnitCalls
from cosim.master.central_logs import CentralLogs
from cosim.master.compiled import CompiledExchange
from cosim.master.engine import WINDOW, Engine
from cosim.master.extrapolation import PortHistory
from cosim.master.reference import Reference
from cosim.master.records import StepRecord, StepStatus, step_log_arrays
from cosim.master.recovery import bring_back, recover
from cosim.master.stepsize import StepControl
from cosim.master.unitgraph import UnitGraph
from cosim.run.logs import Logs
from cosim.numerics.timegrid import EXCHANGE_RTOL, time_tolerance

__all__ = ["Master"]


class Master:
    """Drive units through macro steps.

    Parameters
    ----------
    proxies : dict of str to Proxy
        Unit name -> its proxy; the master submits the requests of a call to every unit
        involved, flushes them, then collects the replies (so remote units overlap).
    links : list of Link
        Unit-to-unit connections.
    config : SimulationConfig
        ``config.cosim`` holds the master's options; ``t0`` / ``t_end`` the interval.
    keys : dict of str to str, optional
        Log keys to show instead of the units' own (see :class:`CentralLogs`).

    Attributes
    ----------
    step_log : list of StepRecord
        One record per macro step attempt, co-initialization that did not converge, recovery
        and stop.
    stats : dict of str to int
        ``macro_steps``, ``rejected``, ``iterations`` (coupling evaluations), ``recoveries``.
    identity : dict or None
        The model's identity (:func:`cosim.run.checkpoint.identity`, set by the
        CoSimulation): checkpoints carry it, and one of another model is refused.
    """

    identity: dict | None = None

    def __init__(self, proxies: dict, links, config, keys: dict | None = None):
        self.proxies = proxies
        self.names = list(proxies)
        self.links = list(links)
        self.config = config
        self.cfg = config.cosim
        self.calls = UnitCalls(proxies, self.cfg.trace)
        self.step_log: list[StepRecord] = []
        self.stats = {"macro_steps": 0, "rejected": 0, "iterations": 0, "recoveries": 0}
        self.central = CentralLogs(self.names, keys)
        self.desc = {}
        self.T = config.t0
        self._checkpoint = None
        self._provisional = None    # (capture, records) before a provisional step, see run()
        #: The time a unit's stop event ended the run at (then :meth:`run` and
        #: :meth:`advance` take no further step, as a Simulator stopped by an event), or None.
        self.stopped_at = None
        self.engine = None          # the macro-step program's runner, see initialize()
        self.reference = None       # or the protocol path's (engine=False, traced runs)
        self._initialized = False
        #: Watches the run (:class:`~cosim.master.observer.Observer`, e.g. a dashboard);
        #: called from :meth:`_steps`, the one place every run/advance goes through.
        self.observer = None

    @property
    def initialized(self) -> bool:
        """Whether :meth:`initialize` ran (the units are initialized and co-initialized)."""
        return self._initialized

    # -- calling units --------------------------------------------------------------------

    @property
    def trace(self) -> list[tuple[str, str, float]]:
        """``(unit, request type, t)`` of every request, when ``cosim.trace`` is on."""
        return self.calls.trace

    def _call(self, batch: dict[str, list], t: float) -> dict[str, list]:
        return self.calls.call(batch, t)

    def _inputs_now(self, u: str) -> P.SetInputs:
        """Unit ``u``'s inputs set to the current values of the outputs driving them."""
        return P.SetInputs({name: self.values[key] for name, key in self.graph.inputs[u]}, {})

    def refresh_units(self, units: list[str], t: float) -> dict[str, dict]:
        """Refresh ``units``' outputs at ``t`` for their current inputs; their new outputs."""
        reps = self._call({u: [self._inputs_now(u), P.RefreshOutputs(), P.GetOutputs()]
                           for u in units}, t)
        return {u: reps[u][2].values for u in units}

    # -- set-up ---------------------------------------------------------------------------

    def initialize(self) -> None:
        """Initialize every unit, check the links, and co-initialize the outputs at t0; a
        unit lost meanwhile is brought back and every unit initialized again
        (:func:`~cosim.master.recovery.bring_back`)."""
        while True:
            try:
                return self._initialize()
            except TransportError as err:
                bring_back(err, self.proxies, self.stats["recoveries"], self.cfg)
                self.stats["recoveries"] += 1

    def _initialize(self) -> None:
        t0 = self.config.t0
        reps = self._call({u: [P.Initialize(t0), P.Describe()] for u in self.names}, t0)
        self.desc = {u: reps[u][1] for u in self.names}
        self.graph = UnitGraph(self.names, self.links, self.desc, resolve=self.cfg.iterate)
        # What a macro step does with the graph: with delayed feedthrough nothing is
        # algebraic (every output is the one computed at the end of the step) and nothing is
        # refreshed at a macro point; co-initialization at t0 resolves the graph either way.
        self.delayed = self.cfg.feedthrough is Feedthrough.DELAY
        self.couplings = [] if self.delayed else self.graph.groups
        self.coupling_of = {u: g for g in self.couplings for u in g}
        # (Units whose logged inputs their drivers' refresh changed go once more, last:
        # UnitGraph.relog.)
        self.refresh_levels = [] if self.delayed else (
            self.graph.refresh_levels + ([self.graph.relog] if self.graph.relog else []))
        self.order = self.graph.ordered(self.cfg.order)
        if self.couplings and not self.cfg.iterate:
            warnings.warn("algebraic coupling(s) " + "; ".join(" <-> ".join(g) for g in
                          self.couplings) + " run without iteration: the coupling error "
                          "is recorded per step in step_log ('uniterated')", stacklevel=2)
        self.control = StepControl(self.cfg, {u: d.dt for u, d in self.desc.items()})
        self.central.stamp(t0, self.control.quantum_s)     # macro points: the master's time
        self.control.check_end(t0, self.config.t_end)
        self._nq = 0          # quanta elapsed: T = t0 + nq * quantum, never accumulated
        self.H = self.cfg.H
        self.T = t0
        self.n = 0
        reps = self._call({u: [P.GetOutputs()] for u in self.names}, t0)
        self.values = {(u, p): v for u in self.names for p, v in reps[u][0].values.items()}
        self._coinitialize()
        self.history = PortHistory(self.cfg.extrapolation, {
            (u, p.name): p.sample_time for u, d in self.desc.items() for p in d.outputs})
        self.history.start(t0, self.values)
        # Every macro step through the macro-step program (traced runs: the protocol's
        # separate requests, the reference the engine is held to).
        self.engine = Engine(self) if self.cfg.engine and not self.cfg.trace else None
        self.reference = Reference(self) if self.engine is None else None
        self.compiled = CompiledExchange.build(
            self, {u: [p.name for p in d.outputs] for u, d in self.desc.items()})
        self._initialized = True
        if self.cfg.checkpoint_every:
            self._checkpoint = self._capture()

    def _coinitialize(self) -> None:
        """Make outputs at t0 consistent with the inputs they imply."""
        def refresh(units):
            for v, outs in self.refresh_units(units, self.config.t0).items():
                for p, val in outs.items():
                    self.values[(v, p)] = val

        self.step_log += coupling.coinitialize_units(self.graph, self.values, refresh,
                                                     self.cfg, self.config.t0)

    # -- the macro step -------------------------------------------------------------------

    def step(self, H: float | None = None) -> float:
        """One accepted macro step from ``T`` (adaptive: retried until accepted); returns H.

        The first step of an order-2 run is *started up*: with only ``y(t0)`` known, the
        inputs would be held over it (degree 0, a local error O(H^2) that caps the run at
        order 2 whenever a driver has a slope at t0). So the step is taken once so, rolled
        back, and taken again with every input interpolated linearly to the outputs that
        first pass predicted at T+H, as Gauss–Seidel interpolates to a driver that stepped:
        a local error O(H^3), and order 3 from the first step.
        """
        H = self.H if H is None else H
        T = self.T
        tries = 0
        while True:
            predicted = None
            if self._starting():
                predicted = self._attempt(T, H, True, tries > 0)[0]
            outputs, refreshed, record = self._attempt(
                T, H, self.cfg.adaptive and predicted is None,
                tries > 0 or predicted is not None, predicted)
            if not self.cfg.adaptive:
                break
            err = self.control.error(set(self.graph.driver.values()), outputs,
                                     lambda key: self.history.extrapolate(key, H)[2])
            record = replace(record, coupling_error=err)
            if self.control.accept(H, err):
                break
            self.step_log.append(replace(record, status=StepStatus.REJECTED))
            self.stats["rejected"] += 1
            tries += 1                      # (the next attempt rolls the units back first)
            H = self.control.propose(H, err, shrink=True)
        self._accept(H, outputs, collect=False)
        if self.calls.stopped:
            self.step_log.append(record)
            self._collect_due()
            return H                        # a unit stopped at an event: run() ends there
        if self.engine is not None:
            for key, v in refreshed.items():
                self.values[key] = v
                self.history.replace_last(key, self.T, v)
            self.stats["iterations"] += self.engine.resolved
            record = self.engine.settle(record, self.T)
        else:
            record = self.reference.refresh(record)
        self.step_log.append(record)
        # Logs are collected once the macro point is refreshed (its samples final).
        self._collect_due()
        if self.cfg.adaptive:
            self.H = self.control.propose(H, record.coupling_error, shrink=False)
        return H

    def _next_point(self, H: float) -> float:
        """The macro point a step of ``H`` from ``T`` ends at (never accumulated)."""
        return self.config.t0 + (self._nq + self.control.quanta(H)) * self.control.quantum_s

    def _starting(self) -> bool:
        """Whether the next macro step is the first one of an order-2 run whose units can
        roll back: it is started up (see :meth:`step`)."""
        return (self.n == 0 and self.cfg.extrapolation == 2
                and all(d.can_get_set_state for d in self.desc.values()))

    def _attempt(self, T, H, keep, rollback, predicted=None) -> tuple[dict, dict, StepRecord]:
        """One attempt of ``[T, T+H]`` through the engine or the reference: the outputs at
        T+H, those refreshed there (the engine's; the reference refreshes once the step is
        accepted) and the record (see :meth:`Engine.attempt
        <cosim.master.engine.Engine.attempt>`)."""
        if self.engine is not None:
            return self.engine.attempt(T, H, self._next_point(H), keep, rollback, predicted)
        outputs, record = self.reference.attempt(T, H, keep, rollback, predicted)
        return outputs, {}, record

    def _accept(self, H, outputs, collect: bool = True) -> None:
        self.n += 1
        self._nq += self.control.quanta(H)
        self.T = self.config.t0 + self._nq * self.control.quantum_s
        self.values.update(outputs)
        self.history.append(self.T, outputs)
        self.stats["macro_steps"] += 1
        if collect:
            self._collect_due()

    def _collect_due(self) -> None:
        """Collect the units' logs when ``log_every`` macro steps have passed."""
        if self.n % self.cfg.log_every == 0:
            self._collect()

    # -- run, logs ------------------------------------------------------------------------

    def run(self, t_end: float | None = None) -> Logs:
        """Initialize if needed and step to ``t_end``; returns the central logs.

        A macro step shortened only to end at ``t_end`` (shorter than the step the master
        would take if the run went on) is *provisional*: ``T``, the units and the logs show
        the run at ``t_end``, but the next advance (:meth:`run`, :meth:`advance`) first rolls
        it back and takes the planned step instead, so that stopping and continuing is bit
        for bit the run that never stopped; a checkpoint saved meanwhile holds the state
        before it. Units that cannot save their state make such a step final.
        """
        if not self._initialized:
            self.initialize()
        self._resume()
        if self.stopped_at is not None:
            return self.logs                # the run ended at a stop event
        t_end = self.config.t_end if t_end is None else t_end
        self.control.check_end(self.config.t0, t_end)
        eps = time_tolerance(t_end, EXCHANGE_RTOL)
        while True:
            if self.T < t_end - eps and self._steps(t_end, t_end, eps):
                return self.logs            # a unit stopped the run at an event
            try:
                self._finish()
                return self.logs
            except TransportError as err:
                # A unit lost at the end (its last outputs or logs): recovered like one lost
                # in a step, and the steps from the checkpoint replayed.
                self._recover(err)

    def advance(self, t_end: float | None = None, until: float | None = None) -> float:
        """Macro steps exactly as :meth:`run` takes them towards ``t_end`` (default
        ``config.t_end``; once there, the planned steps), until ``T`` reaches ``until``
        (default: one step), never past ``t_end``; returns the time advanced (s).

        The logs then hold the samples before ``T``; :meth:`finish` logs ``T`` itself.
        """
        if not self._initialized:
            self.initialize()
        self._resume()
        if self.stopped_at is not None:
            return 0.0                      # the run ended at a stop event
        t_end = self.config.t_end if t_end is None else t_end
        self.control.check_end(self.config.t0, t_end)
        eps = time_tolerance(t_end, EXCHANGE_RTOL)
        if self.T >= t_end - eps:
            t_end = math.inf
        T0 = self.T
        self._steps(t_end, None if until is None else min(until, t_end), eps)
        return self.T - T0

    def finish(self) -> Logs:
        """Log the current macro point (outputs refreshed for consistent inputs) and collect
        every unit's logs, as :meth:`run` does at its end; returns the central logs."""
        self._finish()
        return self.logs

    def collect_logs(self) -> Logs:
        """Collect the units' pending log batches; returns the central logs."""
        self._collect()
        return self.logs

    def _steps(self, t_end: float, goal: float | None, eps: float) -> bool:
        """Macro steps towards ``t_end`` until ``T`` reaches ``goal`` (None: one step), whole
        steps through the compiled exchange where it can; True when a unit stopped the run."""
        observer = self.observer
        while True:
            # An observer bounds a chunk to its stride of whole steps (+ half a step: no
            # rounding drops the last one); the steps are the same, cut into more chunks.
            upto = goal if observer is None or goal is None else \
                min(goal, self.T + (observer.stride + 0.5) * self.H)
            if goal is not None and not self._starting() and self._run_chunk(upto, eps):
                if self.calls.stopped:
                    if observer is not None:
                        observer.observe(self)
                    return True             # a unit stopped the run inside the chunk
                every = self.cfg.checkpoint_every
                if every and self.n % every == 0:
                    self._take_checkpoint()
            elif self._advance(t_end, eps):
                if observer is not None:
                    observer.observe(self)
                return True
            if observer is not None:
                observer.observe(self)
            if goal is None or self.T >= goal - eps:
                return False

    def _advance(self, t_end: float, eps: float) -> bool:
        """One protocol macro step towards ``t_end``; True when a unit stopped the run."""
        H_plan = self.H
        if self.cfg.adaptive:
            # Never step over a unit's scheduled event: end the macro step there.
            t_ev = min(self.calls.next_event.values(), default=math.inf)
            if self.T + eps < t_ev < self.T + H_plan:
                H_plan = t_ev - self.T
        H_plan = self.control.on_grid(H_plan)
        # (A t_end within rounding of the planned step's end is that end.)
        H = H_plan if H_plan <= t_end - self.T + eps else self.control.on_grid(t_end - self.T)
        # Shortened only to stop at t_end: the run that goes on would not take this step.
        provisional = H < H_plan and all(d.can_get_set_state for d in self.desc.values())
        try:
            if provisional:
                self._provisional = (self._capture(), len(self.step_log))
            self.step(H if H != self.H else None)
        except TransportError as err:
            self._provisional = None
            self._recover(err)
            return False
        if self.calls.stopped:
            self._provisional = None        # a stop ends the run, wherever it falls
            self._end_at_stop()
            return True
        every = self.cfg.checkpoint_every
        if every and self.n % every == 0 and not provisional:
            self._take_checkpoint()
        return False

    def _take_checkpoint(self) -> None:
        """The periodic checkpoint; a unit lost while it is captured (its logs collected,
        its state asked for) is recovered like one lost in a step: from the checkpoint
        before, whose steps are replayed."""
        try:
            self._checkpoint = self._capture()
        except TransportError as err:
            self._recover(err)

    def _resume(self) -> None:
        """Roll back a provisional step (see :meth:`run`): the master continues from the
        macro point before it, with the step sizes it had planned."""
        if self._provisional is None:
            return
        (cp, records), self._provisional = self._provisional, None
        self._restore(cp, logs="truncate")
        del self.step_log[records:]

    def _run_chunk(self, t_end: float, eps: float) -> bool:
        """Whole macro steps of H, bit-identical to :meth:`step`, up to the next checkpoint:
        through the compiled exchange (:mod:`~cosim.master.compiled`) or as windows of the
        engine (:meth:`Engine.window <cosim.master.engine.Engine.window>`); False when it
        took none (:meth:`step` steps instead). A unit failure is recovered from as in
        :meth:`_advance`."""
        try:
            if self.compiled is not None:
                return self._take_chunk(self.compiled, t_end, eps)
            if self.engine is not None and not self.cfg.adaptive and self.engine.gains():
                return self._take_window(t_end, eps)
            return False
        except TransportError as err:
            self._recover(err)
            return True

    def _take_window(self, t_end: float, eps: float) -> bool:
        cfg, control = self.cfg, self.control
        q = control.quanta(self.H)
        if not q or control.on_grid(self.H) != self.H:
            return False
        n = self.n
        every = cfg.checkpoint_every
        # (no further than the next checkpoint and log collection: the units' states and
        # logs are taken at a macro point every unit has reached)
        steps = min(WINDOW, cfg.log_every - n % cfg.log_every,
                    every - n % every if every else WINDOW)
        points = [self.config.t0 + (self._nq + j * q) * control.quantum_s
                  for j in range(steps + 1)]
        while steps and points[steps] > t_end + eps:
            steps -= 1                      # whole steps that end by t_end
        if steps < 2:
            return False
        taken, error, stopped = self.engine.window(points[:steps + 1], self.H)
        for i, (outputs, refreshed, record) in enumerate(taken):
            self.step_log.append(record)
            self._accept(self.H, outputs, collect=False)
            if stopped and i == len(taken) - 1:
                self._collect_due()
                self._end_at_stop()
                return True
            for key, v in refreshed.items():
                self.values[key] = v
                self.history.replace_last(key, self.T, v)
            self._collect_due()
        if error is not None:
            raise error
        return True

    def _take_chunk(self, chunks, t_end: float, eps: float) -> bool:
        cfg = self.cfg
        every = cfg.checkpoint_every
        n0 = self.n
        n_stop = n0 + every - n0 % every if every else sys.maxsize
        chunk = chunks.run(self.T, self._nq, n0, n_stop, t_end, eps, self.values,
                           self.history.points)
        if chunk is None or not (chunk.starts or chunk.error):
            return False
        self.step_log += chunk.records if chunk.records is not None else \
            [StepRecord(t, self.H) for t in chunk.starts]
        self.stats["iterations"] += chunk.iterations
        self.n += len(chunk.starts)
        self.stats["macro_steps"] += len(chunk.starts)
        self._nq, self.T = chunk.nq, chunk.T
        self.values.update(chunk.values)
        self.history.points = chunk.points
        self.calls.stepped_without_events(self.names)
        if chunk.events:
            self.calls.next_event.update(chunk.events)
        if chunk.error is not None:
            raise chunk.error
        if chunk.stopped:
            self.calls.stopped.update(chunk.stopped)
            self._end_at_stop()
            return True
        if self.n // cfg.log_every != n0 // cfg.log_every:
            # At least as often as log_every asks, in larger batches: the same samples.
            self._collect()
        return True

    def _end_at_stop(self) -> None:
        """A unit stopped at an event (a ``stop`` action) at ``t_e`` inside the last macro
        step: the co-simulation ends at ``t_e``, as the monolithic run would. The other units
        ran on to the end of the macro step; their samples after ``t_e`` are dropped."""
        t_e = min(self.calls.stopped.values())
        units = sorted(u for u, t in self.calls.stopped.items() if t == t_e)
        self.T = self.stopped_at = t_e
        self.step_log.append(StepRecord(t_e, 0.0, status=StepStatus.STOPPED,
                                        message=f"stop event in {', '.join(units)}"))
        self._collect()
        self.central.cut_after(t_e)

    def _finish(self) -> None:
        """Log the final macro point with consistent inputs (with delayed feedthrough the
        last step logged it as computed), then collect everything."""
        if not self.delayed:
            self._call({u: [self._inputs_now(u), P.RefreshOutputs()] for u in self.names},
                       self.T)
        self._collect()

    def _collect(self) -> None:
        reps = self._call({u: [P.CollectLogs()] for u in self.names}, self.T)
        for u in self.names:
            self.central.add(u, reps[u][0].signals)

    @property
    def logs(self) -> Logs:
        """Central logs so far, keyed ``unit/block.port``, each with its own time vector."""
        return self.central.logs()

    def step_log_arrays(self) -> dict[str, np.ndarray]:
        """The iteration / step-rejection log as arrays (saved beside the logs)."""
        return step_log_arrays(self.step_log)

    def terminate(self) -> None:
        self._call({u: [P.Terminate()] for u in self.names}, self.T)

    # -- checkpoints and fault recovery -------------------------------------------------

    def _capture(self) -> dict:
        """Every unit's state and the master's own, as one nested dict of plain values.

        Logs are collected first, so everything before the capture is central and the units'
        log positions in their states match what the master holds.
        """
        self._collect()
        reps = self._call({u: [P.GetState()] for u in self.names}, self.T)
        return checkpoints.pack({u: reps[u][0] for u in self.names},
                                {"T": self.T, "n": self.n, "nq": self._nq, "H": self.H,
                                 "stats": dict(self.stats)},
                                self.values, self.history.points, self.central.lengths())

    def _restore(self, cp: dict, logs: str) -> None:
        """Put every unit and the master back to capture ``cp``.

        ``logs="truncate"`` cuts the central logs back to the capture (fault recovery: no
        gap, no duplicate); ``logs="restart"`` starts them afresh (a run resumed from file,
        which then seeds them with the logs the file carries).
        """
        self._call({u: [P.SetState(st)] for u, st in checkpoints.unit_states(cp).items()},
                   cp["master"]["T"])
        m = cp["master"]
        self.T, self.n, self._nq, self.H = m["T"], m["n"], m["nq"], m["H"]
        self.stopped_at = None              # (a capture is never past a stop)
        self.stats.update(m["stats"])
        self.values, self.history.points = checkpoints.ports(cp)
        if logs == "truncate":
            self.central.truncate(cp["log_lengths"], recovered=True)
        else:
            self.central.clear()
            # The units logged before the checkpoint too: drop that, logs restart here.
            self._call({u: [P.CollectLogs()] for u in self.names}, self.T)

    def save_checkpoint(self, path) -> None:
        """Gather every unit's state and the master's own into ``path.json`` + ``path.npz``
        (after a provisional step, the state before it: see :meth:`run`)."""
        cp = self._capture() if self._provisional is None else self._provisional[0]
        checkpoints.write(cp, path, self.names, self.central.snapshot(cp["log_lengths"]),
                          self.identity)

    def load_checkpoint(self, path) -> None:
        """Restore every unit and the master from :meth:`save_checkpoint`'s files."""
        cp, logs = checkpoints.read(path, self.names, self.identity)
        if not self._initialized:
            self.initialize()
        self._provisional = None
        self._restore(cp, logs="restart")
        if logs is not None:
            self.central.seed(logs)         # the logs before the checkpoint: from t0

    def _recover(self, err: TransportError) -> None:
        """A unit failed: recreate it, restore every unit from the last checkpoint, replay
        (see :func:`~cosim.master.recovery.recover`)."""
        recoveries = self.stats["recoveries"]
        recover(err, self._checkpoint, self.proxies, recoveries, self.cfg,
                restore=lambda cp: self._restore(cp, logs="truncate"),
                save=lambda cp, path: checkpoints.write(
                    cp, path, self.names, self.central.snapshot(cp["log_lengths"]),
                    self.identity))
        self.stats["recoveries"] = recoveries + 1
        self.step_log.append(StepRecord(self.T, 0.0, status=StepStatus.RECOVERED,
                                        message=str(err)))
