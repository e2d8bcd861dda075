"""Calling units: one batch of requests per unit, all in flight at once, every reply checked
(an ErrorReply becomes the cosim error of its kind) and every StepDone noted (scheduled
events, stops)."""

from __future__ import annotations

import math
import time
from array import array

from cosim.errors import ModelError, SimulationError, TransportError
from cosim.master import protocol as P

__all__ = ["UnitCalls"]

#: Requests that step a unit (their calls' wall times are recorded).
_STEPS = frozenset({P.DoStep, P.Step})


class UnitCalls:
    """The master's one way to talk to its units.

    Parameters
    ----------
    proxies : dict of str to Proxy
    trace : bool
        Record every request in :attr:`trace`.

    Attributes
    ----------
    trace : list of (str, str, float)
        ``(unit, request type, t)`` of every request, when tracing.
    next_event : dict of str to float
        Each unit's next scheduled event, from its latest StepDone.
    stopped : dict of str to float
        Units that stopped at an event in their latest step -> the time they stopped.
    step_times : dict of str to (array, array)
        Per unit, for every call that stepped it (``DoStep``, coupling iterations included):
        the master's time ``t`` (s) and the wall time (s) until the unit's replies were in:
        its own work for units in this process; for remote units, from sending the batch
        until its replies were read (replies are read in unit order, so a unit read after a
        slower one shows that one's time too). Steps taken by the compiled exchange are
        here only while an observer watches the run (it times them then).
    """

    def __init__(self, proxies: dict, trace: bool):
        self.proxies = proxies
        self.tracing = trace
        self.trace: list[tuple[str, str, float]] = []
        self.next_event: dict[str, float] = {}
        self.stopped: dict[str, float] = {}
        # Compact (8 bytes a sample): a long run steps every unit millions of times.
        self.step_times: dict[str, tuple[array, array]] = {}

    def call(self, batch: dict[str, list], t: float) -> dict[str, list]:
        """Send each unit its requests (all units at once); the replies, checked.

        Parameters
        ----------
        batch : dict of str to list of Request
        t : float
            The master's time, s (for errors and the trace).

        Returns
        -------
        dict of str to list of Reply
            One reply per request, in order.

        Raises
        ------
        TransportError, SimulationError, ModelError
            For the first failure in unit order (an ErrorReply names the unit and the
            request), once every unit's replies are read.
        """
        if self.tracing:
            for u, reqs in batch.items():
                for r in reqs:
                    self.trace.append((u, type(r).__name__, t))
        proxies = self.proxies
        clock = time.perf_counter
        handles, spent = {}, {}
        for u, reqs in batch.items():
            started = clock()
            handles[u] = proxies[u].submit(reqs)     # a unit in this process works here
            spent[u] = clock() - started
        for u in handles:
            proxies[u].flush()      # all units' requests are queued: send (one per server)
        sent = clock()
        out = {}
        # Every unit's replies are read before any failure is raised (the first in unit
        # order): a reply left unread would be taken for the answer to that unit's next call.
        failure = None
        for u, h in handles.items():
            try:
                replies = proxies[u].result(h)
            except Exception as err:  # noqa: BLE001 - raised below, after the others' replies
                if type(err) is TransportError and err.t is None:
                    # (a request without a time of its own, e.g. CollectLogs: the master's)
                    err = TransportError(err.unit, err.method, err.message, t=t)
                failure = failure or err
                continue
            reqs = batch[u]
            for r in reqs:
                if type(r) in _STEPS:
                    times = self.step_times.get(u)
                    if times is None:
                        times = self.step_times[u] = (array("d"), array("d"))
                    times[0].append(t)
                    times[1].append(spent[u] + clock() - sent)
                    break
            for req, rep in zip(reqs, replies):
                if isinstance(rep, P.ErrorReply):
                    failure = failure or unit_error(u, req, rep, t)
                    break
                elif type(rep) is P.StepDone or type(rep) is P.Stepped:
                    self.next_event[u] = rep.next_event
                    # The latest step decides (a rolled-back one that stopped does not count).
                    if rep.event:
                        self.stopped[u] = rep.t_reached
                    else:
                        self.stopped.pop(u, None)
            out[u] = replies
        if failure is not None:
            raise failure
        return out

    def stepped_without_events(self, units) -> None:
        """``units`` were stepped outside :meth:`call` (the compiled exchange, which takes
        only units without scheduled events): none has a next event or stopped."""
        for u in units:
            self.next_event[u] = math.inf
            self.stopped.pop(u, None)


def raise_error(unit: str, req: P.Request, rep: P.ErrorReply, t: float):
    """Raise :func:`unit_error`."""
    raise unit_error(unit, req, rep, t)


def unit_error(unit: str, req: P.Request, rep: P.ErrorReply, t: float) -> Exception:
    """A unit's ErrorReply as the cosim error of its kind, naming unit and call."""
    call = rep.call or type(req).__name__
    at = rep.t if rep.t is not None else t
    if rep.kind in (P.ErrorKind.CODEC, P.ErrorKind.INTERNAL):
        return TransportError(unit, call, rep.message, t=at)
    if rep.kind in (P.ErrorKind.SIMULATION, P.ErrorKind.CONVERGENCE):
        return SimulationError(f"unit {unit!r}, {call}: {rep.message}", t=at)
    return ModelError(f"unit {unit!r}, {call} at t={at:.9g}: {rep.message}")
