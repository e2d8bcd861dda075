"""Calling units: one batch of requests per unit, all in flight at once, every reply checked
(an ErrorReply becomes the cosim error of its kind) and every StepDone noted (scheduled
events, stops)."""

from __future__ import annotations

import math

from cosim.errors import ModelError, SimulationError, TransportError
from cosim.master import protocol as P

__all__ = ["UnitCalls"]


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
    """

    def __init__(self, proxies: dict, trace: bool):
        self.proxies = proxies
        self.tracing = trace
        self.trace: list[tuple[str, str, float]] = []
        self.next_event: dict[str, float] = {}
        self.stopped: dict[str, float] = {}

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
            For the first ErrorReply, naming the unit and the request.
        """
        if self.tracing:
            for u, reqs in batch.items():
                for r in reqs:
                    self.trace.append((u, type(r).__name__, t))
        proxies = self.proxies
        handles = {u: proxies[u].submit(reqs) for u, reqs in batch.items()}
        for u in handles:
            proxies[u].flush()      # all units' requests are queued: send (one per server)
        out = {}
        for u, h in handles.items():
            replies = proxies[u].result(h)
            for req, rep in zip(batch[u], replies):
                if isinstance(rep, P.ErrorReply):
                    raise_error(u, req, rep, t)
                elif type(rep) is P.StepDone:
                    self.next_event[u] = rep.next_event
                    # The latest step decides (a rolled-back one that stopped does not count).
                    if rep.event:
                        self.stopped[u] = rep.t_reached
                    else:
                        self.stopped.pop(u, None)
            out[u] = replies
        return out

    def stepped_without_events(self, units) -> None:
        """``units`` were stepped outside :meth:`call` (the compiled exchange, which takes
        only units without scheduled events): none has a next event or stopped."""
        for u in units:
            self.next_event[u] = math.inf
            self.stopped.pop(u, None)


def raise_error(unit: str, req: P.Request, rep: P.ErrorReply, t: float):
    """Turn a unit's ErrorReply into the cosim error of its kind, naming unit and call."""
    call = type(req).__name__
    at = rep.t if rep.t is not None else t
    if rep.kind in (P.ErrorKind.CODEC, P.ErrorKind.INTERNAL):
        raise TransportError(unit, call, rep.message, t=at)
    if rep.kind in (P.ErrorKind.SIMULATION, P.ErrorKind.CONVERGENCE):
        raise SimulationError(f"unit {unit!r}, {call}: {rep.message}", t=at)
    raise ModelError(f"unit {unit!r}, {call} at t={at:.9g}: {rep.message}")
