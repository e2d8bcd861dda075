"""The macro-step engine: runs the :mod:`~cosim.master.program` of a co-simulation, one
attempt of a macro step at a time, for every model shape.

Every unit that serves the fused step (:data:`~cosim.master.protocol.FUSED_STEP`) gets one
:class:`~cosim.master.protocol.Step` per stage it takes part in: its inputs (extrapolated,
interpolated or ramping to coupling candidates, as :class:`~cosim.master.extrapolation.
PortHistory` gives them), its step, its refresh at ``T+H`` with the values the program says it
reads (``STEP_RESET``), and the state it keeps or returns to on its own side (``STEP_KEEP``,
``STEP_ROLLBACK``) when a coupling iterates or an adaptive step is retried; a unit of a
coupling through a held output gets a second Step in the same message, a refresh of its held
inputs at ``T+H``. Couplings none of which reads another's outputs iterate in the same rounds
(:attr:`~cosim.master.program.Stage.along`). Other units get the same actions as separate
protocol requests, their states held by the master. Messages go through the
:class:`~cosim.master.transport.Transport` (errors, events, stops, step times as
:class:`~cosim.master.calls.UnitCalls` notes them).

The values are the protocol path's (:meth:`Master._attempt <cosim.master.master.Master>`,
then the refresh at the macro point), bit for bit; only the number of messages and round trips
differs.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from cosim.errors import TransportError
from cosim.master import coupling
from cosim.master import protocol as P
from cosim.master.fused import FusedStep
from cosim.master.program import Program, compile_program
from cosim.master.records import StepRecord, StepStatus
from cosim.master.transport import Transport

__all__ = ["Engine"]

#: Macro steps a window holds at most (:meth:`Engine.window`): enough that the rounds a
#: window's first and last steps take alone weigh little; the master cuts windows shorter
#: at checkpoints, log collections and the observer's stride.
WINDOW = 16


class Engine:
    """Runs a master's macro steps through its program.

    Parameters
    ----------
    master : Master
        Initialized up to its unit graph, history and order; the engine reads its
        ``graph``, ``history``, ``values``, ``calls``, ``cfg``, ``desc``, ``proxies`` and
        ``stats`` (updating ``stats["iterations"]``).
    """

    def __init__(self, master):
        self.master = master
        self.graph = master.graph
        self.cfg = master.cfg
        names = master.names
        local = self.local = {u for u in names if master.proxies[u].in_process() is not None}
        # Units of a coupling through an output held over the step (a discrete output): a
        # held candidate reaches them only at T+H, with a refresh for it there
        # (PortHistory.held_at_end) that sets a part of their inputs: a second Step of the
        # same message, refresh only (h = 0), names that part.
        graph, period = master.graph, master.history.period
        self.held = {u for g in master.couplings
                     if any(period[k] > 0 for k in graph.coupling_keys(g)) for u in g}
        self.fusable = {u for u in names if P.FUSED_STEP in master.desc[u].capabilities}
        self.program: Program = compile_program(master.graph, self.cfg.scheme, master.order,
                                                master.delayed, local, self.fusable,
                                                master.refresh_levels)
        self.packers = {u: FusedStep(u, master.graph.inputs[u], master.desc[u].outputs)
                        for u in names}
        self.names_of = {u: tuple(name for name, _ in master.graph.inputs[u]) for u in names}
        self.refresh = P.STEP_REFRESH if master.delayed else 0
        self.snaps: dict = {}           # states kept by the master (units without Step)
        self._flags: dict = {}          # units' Step flags for their next message
        self.transport = Transport(master, self.fusable, self.packers)
        # Units in this process that serve the fused step: called directly, values as they
        # are (no packing), through Unit.fused.
        self.direct = self.transport.direct
        self.windows: dict = {}        # window programs, by their number of macro steps
        self._gains = None             # see gains
        self.out_keys = {u: [(u, p.name) for p in master.desc[u].outputs] for u in names}
        self._failed: tuple = ()       # (macro step, unit) of a stage's failure
        self.resolved = 0              # see attempt
        self.solves: list = []         # see attempt
        self._windowed = False         # running a window (see _resolve)

    @property
    def lanes(self) -> dict:
        """Units whose Steps travel through their connection's lane -> the lane."""
        return self.transport.lanes

    # -- one attempt ------------------------------------------------------------------------

    def attempt(self, T: float, H: float, T_next: float, keep: bool, rollback: bool,
                predicted: dict | None = None) -> tuple[dict, dict, StepRecord]:
        """One attempt of the macro step ``[T, T+H]``.

        Parameters
        ----------
        T, H : float
            The macro step, s.
        T_next : float
            The macro point it ends at, as the master computes it (the refreshes' time).
        keep : bool
            Every unit keeps its state at ``T`` (the attempt may be rejected).
        rollback : bool
            Every unit first goes back to the state kept at ``T`` (a retried attempt).
        predicted : dict, optional
            Outputs at ``T+H`` a first pass predicted: inputs are interpolated to them where
            no output computed in this attempt is read (the started-up first step of an
            order-2 run, :meth:`Master._attempt <cosim.master.master.Master>`).

        Returns
        -------
        outputs : dict of (str, str) to ndarray
            Every output at ``T+H`` as the units' steps (and couplings) computed it.
        refreshed : dict of (str, str) to ndarray
            Outputs of the units refreshed at ``T+H``, as refreshed (applied once the step is
            accepted and no unit stopped).
        record : StepRecord

        The evaluations of couplings solved again at ``T+H`` go to :attr:`resolved` and
        their ``(coupling, Solve)`` to :attr:`solves`, not into ``record``: the master
        counts them and records them (:meth:`settle`) once the step is accepted, as the
        protocol path solves them (a rejected attempt's record is its step's alone).
        """
        master = self.master
        first = (P.STEP_KEEP if keep else 0) | (P.STEP_ROLLBACK if rollback else 0)
        self._flags = dict.fromkeys(master.names, first)
        self._predicted = predicted or {}
        if rollback:
            master.calls.stopped.clear()  # (a stop in the rejected attempt is undone with it)
        step = _Step(0, T, H, T_next, master.history, master.values)
        self._windowed = False
        cut = _Cut(1)
        held = None
        stages = self.program.stages
        for i in range(len(stages)):
            held = self._stage(stages, i, [step], cut, held)
        self.resolved, self.solves = step.resolved, step.solves
        return step.outputs, step.refreshed, step.record

    def settle(self, record: StepRecord, t: float, solves: list | None = None) -> StepRecord:
        """``record`` of an accepted macro step ending at ``t`` with its couplings' solves
        at ``t`` (default: :attr:`solves`, the last attempt's) taken in
        (:func:`~cosim.master.coupling.resolved`: raises ConvergenceError for one that did
        not converge, unless the run goes on)."""
        for g, solve in self.solves if solves is None else solves:
            record = coupling.resolved(self.cfg, self.graph, g, solve, t, record)
        return record

    # -- a window of macro steps ------------------------------------------------------------

    def window(self, points: list, H: float) -> tuple[list, Exception | None, bool]:
        """The macro steps ``[points[k], points[k+1]]``, ``k < K = len(points) - 1``, run as
        one program (:func:`~cosim.master.program.compile_program` with ``steps=K``): an
        action of a later macro step travels with a round of an earlier one as soon as what
        it reads is known, so a unit that reads nothing pending (a source, the head of a
        Gauss–Seidel chain) no longer costs a round trip of its own each macro step. The
        values each action reads are those of the macro steps taken one after the other.

        Not for adaptive macro steps (each is accepted or rejected before the next) nor the
        started-up first step of an order-2 run.

        Returns
        -------
        steps : list of (dict, dict, StepRecord)
            Per macro step taken, as :meth:`attempt` returns them: those before a failure,
            and up to (including) the one in which a unit stopped at an event (the master
            ends the run there; no unit went further: every step of a macro step comes back
            before anything of the next one is sent).
        error : Exception or None
            The failure of the earliest failing macro step (the master raises it once it
            has taken the steps before it).
        stopped : bool
            A unit stopped at an event in the last macro step of ``steps``.
        """
        master = self.master
        K = len(points) - 1
        program = self._window(K)
        later: dict = {}                # output -> its values at points[1:], once final
        steps = [_Step(0, points[0], H, points[1], master.history, master.values)]
        for k in range(1, K):
            history = master.history.ahead(later, k)
            steps.append(_Step(k, points[k], H, points[k + 1], history, history.latest()))
        self._flags = dict.fromkeys(master.names, 0)
        self._predicted = {}
        self._windowed = True
        cut = _Cut(K)
        error = None
        held = None
        finals = ()                     # of a round held back for the coupling joined to it
        stages = program.stages
        for i, stage in enumerate(stages):
            try:
                held = self._stage(stages, i, steps, cut, held)
            except Exception as err:  # noqa: BLE001 - the master raises it, in time order
                k = self._failed[0]
                if error is None or k < cut.limit:
                    error = err
                cut.limit = min(cut.limit, k)   # the failed step and later ones: dropped
                held, finals = None, ()
                continue
            if held is not None:
                finals = stage.finals       # (made final once sent, with the next stage)
                continue
            finals, done = (), finals + stage.finals
            for k, u in done:
                if cut.runs(k + 1, True):       # (read by a later step that will run)
                    st = steps[k]
                    for key in self.out_keys[u]:
                        v = st.refreshed.get(key)
                        later.setdefault(key, []).append(
                            (st.T_next, st.outputs[key] if v is None else v))
        end = K if cut.stop is None else cut.stop + 1
        failed = error is not None and cut.limit < end
        if failed:
            end = cut.limit
        master.stats["iterations"] += sum(st.resolved for st in steps[:end])
        for st in steps[:end]:
            st.record = self.settle(st.record, st.T_next, st.solves)
        if failed:
            return [(st.outputs, st.refreshed, st.record) for st in steps[:end]], error, False
        return [(st.outputs, st.refreshed, st.record) for st in steps[:end]], None, \
            cut.stop is not None

    def gains(self) -> bool:
        """Whether windows take fewer round trips per macro step than one macro step at a
        time (else the master steps one at a time: the same values, less bookkeeping)."""
        if self._gains is None:
            self._gains = self._window(WINDOW).round_trips < WINDOW * self.program.round_trips
        return self._gains

    def _window(self, K: int) -> Program:
        """The program of a window of ``K`` macro steps (made once per ``K``)."""
        program = self.windows.get(K)
        if program is None:
            if len(self.windows) >= 8:
                self.windows.clear()
            master = self.master
            program = self.windows[K] = compile_program(
                master.graph, self.cfg.scheme, master.order, master.delayed, self.local,
                self.fusable, master.refresh_levels, steps=K)
        return program

    # -- stages -----------------------------------------------------------------------------

    def _stage(self, stages, i, steps, cut, held):
        """Run stage ``i`` of ``stages`` for ``steps`` (the macro steps of the attempt or
        window) within ``cut``; returns the round held for the coupling joined to it."""
        stage = stages[i]
        # (the macro step a failure is of, unless the exchange names the failing unit's)
        self._failed = (min([s.k for s in stage.sends], default=stage.k), None)
        if stage.resolve:
            if cut.runs(stage.k, False):  # (after a stop nothing is refreshed)
                self._resolve(stage, steps[stage.k])
            return None
        if stage.coupling:
            if stage.along:
                return None                 # iterated with the coupling stage before it
            group = [stage]
            for later in stages[i + 1:]:
                if not later.along:
                    break
                group.append(later)
            group = [s for s in group if cut.runs(s.k, True)]
            if not group:
                if held is not None:        # its joined round goes out alone
                    self._send(*held)
                return None
            self._iterate(group, steps, held)
            for s in group:
                self._stopped(cut, {u: steps[s.k] for u in s.coupling})
            return None
        # A round whose next stage is a coupling joined to it goes out with that coupling's
        # first iteration.
        joined = i + 1 < len(stages) and stages[i + 1].joined
        return self._round(stage.sends, steps, cut, hold=joined)

    def _round(self, sends, steps, cut, hold=False):
        """Run one round (``hold``: return its ``(batch, kinds, at)`` unsent instead)."""
        batch, kinds, at = {}, {}, {}
        for s in sends:
            if not cut.runs(s.k, s.step):
                continue                # after a stop nothing is refreshed (protocol path)
            u = s.unit
            st = steps[s.k]
            flags = self._flags[u]
            self._flags[u] = 0
            after = None
            if s.reset:
                after = [(st.refreshed[key] if post else st.outputs[key]) for _, key, post
                         in s.sources]
            fresh = self._fresh((u,), s.fresh, st.outputs)
            batch[u], kinds[u] = self._requests(u, s.step, after, fresh, {}, flags, st)
            at[u] = st
        if hold:
            return batch, kinds, at
        if batch:
            self._send(batch, kinds, at)
            self._stopped(cut, at)
        return None

    def _send(self, batch, kinds, at, joined=None) -> None:
        """Exchange a round's ``batch`` and file each unit's replies into its macro step
        (``joined``: the units whose refreshes may be filed; default all); when a unit
        fails, those of the others that came are filed before the failure is raised (a
        window keeps the macro steps before the failed one)."""
        transport = self.transport
        try:
            transport.exchange(batch, at)
        except Exception:
            self._failed = transport.failed or self._failed
            raise
        finally:
            reps, transport.replies = transport.replies, {}
            for u, rs in reps.items():
                st = at[u]
                self._gather(u, kinds[u], rs, st.outputs,
                             st.refreshed if joined is None or u in joined else {})

    def _stopped(self, cut, at) -> None:
        """Note in ``cut`` the earliest macro step in which a unit of ``at`` stopped."""
        stopped = self.master.calls.stopped
        if not stopped:
            return
        for u, st in at.items():
            if u in stopped:
                cut.stopped(st.k)

    def _fresh(self, units, keys, outputs) -> dict:
        """The outputs at T+H that ``units``' inputs are interpolated to: those computed in
        this attempt before them (``keys``), else the first pass's prediction."""
        fresh = {k: outputs[k] for k in keys}
        predicted = self._predicted
        if predicted:
            for u in units:
                for _, key in self.graph.inputs[u]:
                    if key not in fresh and key in predicted:
                        fresh[key] = predicted[key]
        return fresh

    def _requests(self, u, step, after, fresh, cand, flags, st, end=None) -> tuple:
        """Unit ``u``'s requests for one stage of macro step ``st`` and how to read its
        replies (``end``: inputs set at T+H for a refresh after the step,
        ``PortHistory.held_at_end``; separate requests only)."""
        history, values, T, H, T_next = st.history, st.values, st.T, st.H, st.T_next
        unit = self.direct.get(u)
        if unit is not None:
            mode = flags | self.refresh
            if step:
                inp = history.inputs(self.graph.inputs[u], values, H, fresh, cand)
                vals, ders, t, h = inp.values, inp.derivatives, T, H
            else:
                vals, ders, t, h = dict(zip(self.names_of[u], after)), {}, T_next, 0.0
                mode |= P.STEP_REFRESH
                after = None
            if after is not None:
                mode |= P.STEP_RESET
                after = dict(zip(self.names_of[u], after))
            if end is not None:             # the held inputs' refresh, after the step's own
                return (unit, flags, vals, ders, None, t, h, end.values, T_next), \
                    ("direct", step)
            return (unit, mode, vals, ders, after, t, h), ("direct", step)
        if u in self.fusable:
            mode = flags | self.refresh
            if step:
                if end is not None:
                    # Step, then the held inputs set at T+H and the outputs refreshed: two
                    # Steps of one message (its replies: the step's, the refresh's).
                    names = tuple(end.values)
                    return [self.packers[u].request(history, values, T, H, fresh, cand,
                                                    flags),
                            P.Step(names, (0,) * len(names), P.STEP_REFRESH, T_next, 0.0,
                                   _pack(end.values.values()))], "step+held"
                req = self.packers[u].request(history, values, T, H, fresh, cand,
                                              mode | (P.STEP_RESET if after is not None
                                                      else 0), after)
                return [req], ("step+reset" if after is not None else "step")
            names = self.names_of[u]
            data = _pack(after)
            return ([P.Step(names, (0,) * len(names), flags | P.STEP_REFRESH, T_next, 0.0,
                            data)], "reset")
        reqs = []
        if flags & P.STEP_ROLLBACK:
            reqs.append(P.SetState(self.snaps[u]))
        if flags & P.STEP_KEEP:
            reqs.append(P.GetState())
        if step:
            reqs += [history.inputs(self.graph.inputs[u], values, H, fresh, cand),
                     P.DoStep(T, H)]
            if end is not None:
                reqs += [end, P.RefreshOutputs()]
            if self.refresh:
                reqs.append(P.RefreshOutputs())
            kind = "step"
        else:
            names = self.names_of[u]
            reqs += [P.SetInputs(dict(zip(names, after)), {}), P.RefreshOutputs()]
            kind = "reset"
        reqs.append(P.GetOutputs())
        return reqs, (kind, bool(flags & P.STEP_KEEP), bool(flags & P.STEP_ROLLBACK))

    def _gather(self, u, kind, replies, outputs, refreshed) -> None:
        if kind[0] == "direct":         # a unit in this process: (outputs, stepped)
            outs, stepped = replies
            if stepped is not None:
                into, first = refreshed, outputs
                for p, v in stepped.items():
                    first[(u, p)] = v
            else:
                into = outputs if kind[1] else refreshed
            for p, v in outs.items():
                into[(u, p)] = v
            return
        if type(kind) is tuple:         # separate requests
            kind, kept, rolled = kind
            if kept:
                self.snaps[u] = replies[1 if rolled else 0]
            into = outputs if kind == "step" else refreshed
            for p, v in replies[-1].values.items():
                into[(u, p)] = v
            return
        # A lane's replies: (t_reached, event, next_event, outputs) per Step.
        packer = self.packers[u]
        if kind == "step+held":
            packer.outputs(replies[1][3], outputs)
        elif kind == "step+reset":
            first, then = _halves(u, replies[0][3], packer.size)
            packer.outputs(first, outputs)
            packer.outputs(then, refreshed)
        else:
            packer.outputs(replies[0][3], outputs if kind == "step" else refreshed)

    # -- iterated couplings -----------------------------------------------------------------

    def _iterate(self, group, steps, held=None) -> None:
        """The couplings of the stages ``group`` (none reads another's outputs) iterated to
        their fixed points over their macro steps (``steps``), in the same rounds: each
        round sends every coupling not done yet its next evaluation, each coupling's values
        those of the protocol path's :func:`~cosim.master.coupling.iterate_step`, its units
        rolled back on their own side between iterations. ``held``: the ``(batch, kinds,
        at)`` of the round before, sent with the first. Updates each macro step's record."""
        runs = [(stage, steps[stage.k], self._coupling(stage, steps[stage.k]))
                for stage in group]
        asks = [next(gen) for _, _, gen in runs]    # (every coupling evaluates once)
        active = list(range(len(runs)))
        while active:
            joined: set = set()
            if held is not None:
                batch, kinds, at = (dict(x) for x in held)
                joined, held = set(batch), None
            else:
                batch, kinds, at = {}, {}, {}
            for j in active:
                b, kd, a = asks[j]
                batch.update(b)
                kinds.update(kd)
                at.update(a)
            self._send(batch, kinds, at, joined)
            going = []
            for j in active:
                stage, st, gen = runs[j]
                self._failed = (stage.k, None)  # (a coupling that does not converge)
                try:
                    asks[j] = next(gen)
                except StopIteration as done:
                    st.record = done.value
                    continue
                going.append(j)
            active = going

    def _coupling(self, stage, st):
        """A coupling iterated over macro step ``st`` as a generator: yields each round's
        ``(batch, kinds, at)`` of its units (the outputs are in ``st.outputs`` when it goes
        on); returns ``st``'s record updated."""
        cfg, master = self.cfg, self.master
        g = stage.coupling
        H, outputs, history = st.H, st.outputs, st.history
        keys = self.graph.coupling_keys(list(g))
        fresh = self._fresh(g, stage.fresh, outputs)
        graph = self.graph

        def requests(cand, extra):
            batch, kinds, at = {}, {}, {}
            for v in g:
                flags = self._flags[v] | extra
                self._flags[v] = 0
                end = history.held_at_end(graph.inputs[v], H, cand) if v in self.held \
                    else None
                batch[v], kinds[v] = self._requests(v, True, None, fresh, cand, flags, st, end)
                at[v] = st
            return batch, kinds, at

        # (st.record is read once done: couplings of one macro step done before update it)
        if not cfg.iterate:
            yield requests({}, 0)
            used = {k: history.extrapolate(k, H)[2] for k in keys}
            res = max(float(np.max(np.abs(outputs[k] - used[k]))) for k in keys)
            record = st.record
            return replace(record, status=StepStatus.UNITERATED,
                           residual=max(record.residual, res))
        start = {k: history.extrapolate(k, H)[2] for k in keys}
        shapes = [(k, start[k].size, start[k].shape) for k in keys]
        solving = coupling.iteration(np.concatenate([start[k].ravel() for k in keys]), cfg)
        ask = next(solving)
        while True:
            c, rollback = ask
            yield requests(coupling.candidates(c, shapes),
                           P.STEP_ROLLBACK if rollback else P.STEP_KEEP)
            master.stats["iterations"] += 1
            try:
                ask = solving.send(np.concatenate([outputs[k].ravel() for k in keys]))
            except StopIteration as done:
                solve = done.value
                break
        r = st.record
        status = r.status
        if not solve.converged:
            coupling.not_converged(cfg, "macro step: the", graph, list(g), solve, st.T)
            status = StepStatus.CONTINUED
        # (made directly: dataclasses.replace costs ~5 µs, once per coupling and step)
        return StepRecord(r.t, r.H, max(r.iterations, solve.iterations),
                          max(r.residual, solve.residual), status, r.coupling_error, r.message)

    def _resolve(self, stage, st) -> None:
        """A coupling solved again at ``T+H`` (the protocol path's :meth:`Reference.refresh
        <cosim.master.reference.Reference.refresh>`): its units refreshed for candidates of
        its coupling outputs (first: as its step left them) and their other inputs as the
        stage's sources say, iterated (:func:`~cosim.master.coupling.iterate`); the outputs
        of its last refresh into ``st.refreshed``, the solve into ``st.solves``."""
        g = stage.coupling
        keys = self.graph.coupling_keys(list(g))
        outputs, refreshed = st.outputs, st.refreshed
        shapes = [(k, outputs[k].size, outputs[k].shape) for k in keys]

        def run(c, rollback):
            cand = coupling.candidates(c, shapes)
            batch, kinds, at = {}, {}, {}
            for v, sources in stage.resolve:
                after = [cand[key] if post is None else (refreshed[key] if post else
                                                          outputs[key])
                         for _, key, post in sources]
                flags = self._flags[v]
                self._flags[v] = 0
                batch[v], kinds[v] = self._requests(v, False, after, {}, {}, flags, st)
                at[v] = st
            self._send(batch, kinds, at)
            st.resolved += 1
            return np.concatenate([refreshed[k].ravel() for k in keys])

        solve = coupling.iterate(np.concatenate([outputs[k].ravel() for k in keys]), run,
                                 self.cfg)
        if not solve.converged and self._windowed:
            # (a window fails at the macro step whose solve raises; a single macro step's
            # attempt leaves it to settle, once accepted: an adaptive attempt may be
            # rejected, and the protocol path solves accepted steps only)
            coupling.resolved(self.cfg, self.graph, g, solve, st.T_next, st.record)
        st.solves.append((g, solve))


class _Step:
    """One macro step of an attempt or a window: its times, the history and the values at
    its start it reads, and what it computed (outputs, refreshed outputs, its record)."""

    __slots__ = ("k", "T", "H", "T_next", "history", "values", "outputs", "refreshed",
                 "record", "resolved", "solves")

    def __init__(self, k: int, T: float, H: float, T_next: float, history, values):
        self.k, self.T, self.H, self.T_next = k, T, H, T_next
        self.history, self.values = history, values
        self.outputs: dict = {}
        self.refreshed: dict = {}
        self.record = StepRecord(T, H)
        self.resolved = 0               # evaluations of couplings solved again at T_next
        self.solves: list = []          # their (coupling, Solve), recorded once accepted


class _Cut:
    """Which actions of a window still run: none of macro step ``limit`` (a failure there)
    and later; after a unit stopped in macro step ``stop``, that step's steps only (as the
    protocol path: nothing is refreshed after a stop) and nothing later."""

    def __init__(self, steps: int):
        self.limit = steps
        self.stop: int | None = None

    def runs(self, k: int, step: bool) -> bool:
        if k >= self.limit:
            return False
        return self.stop is None or k < self.stop or (k == self.stop and step)

    def stopped(self, k: int) -> None:
        self.stop = k if self.stop is None else min(self.stop, k)


def _pack(values) -> np.ndarray:
    """Input values, flattened into one float64 array in order."""
    if not values:
        return np.zeros(0)
    data = np.concatenate([np.asarray(v, dtype=np.float64).ravel() for v in values])
    return data


def _halves(u: str, out, n: int) -> tuple:
    """The step's and the refresh's outputs of a ``STEP_RESET`` reply's outputs ``out``."""
    if type(out) is not np.ndarray or out.dtype != np.float64 or out.shape != (2 * n,):
        raise TransportError(u, "Step", f"Stepped.outputs of a refreshed step must be "
                             f"float64 of shape ({2 * n},), got {getattr(out, 'dtype', '?')} "
                             f"{getattr(out, 'shape', '?')}")
    return out[:n], out[n:]
