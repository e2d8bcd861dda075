"""Memory budgets of a unit server: what one request and one session may make a unit hold.

A step's memory is its logs: every logged signal keeps a sample per tick of its task, and the
task a tick (held as Python rows until they are read, then as arrays). A ``DoStep`` of many
ticks under the tick limit could still grow the server by hundreds of MB, and a session of
such steps without bound. :class:`Budget` estimates, before the work starts, the bytes a
step will add (``ticks x bytes per tick``, bytes per tick from the unit's logged signals) and
what the unit's logs hold already (ticks logged so far), and refuses a step over either
budget with an error naming the limit, the estimate and a remedy.

The estimate is an upper bound measured on this implementation: a logged value costs at
most :data:`VALUE_BYTES` while unflushed (a float object and its slot in a row) and a row and
its tick :data:`TICK_BYTES`; a server's logs measured at about 210 bytes per tick for four
scalar signals, estimated at 344.
"""

from __future__ import annotations

import math

from cosim.master import protocol as P

__all__ = ["Budget", "MB"]

MB = 2**20
#: Upper bound of the bytes one logged value takes (see the module notes).
VALUE_BYTES = 56
#: Upper bound of the bytes one tick of a task takes besides its values.
TICK_BYTES = 120


class Budget:
    """Per-request and per-session memory budgets of a server's units.

    Parameters
    ----------
    per_request : int
        Bytes one message may make a unit's logs grow by.
    per_session : int
        Bytes a unit's logs may hold in all (from its ``Initialize`` on).
    """

    def __init__(self, per_request: int = 256 * MB, per_session: int = 1024 * MB):
        self.per_request = per_request
        self.per_session = per_session
        self._costs: dict[int, tuple] = {}     # id(log store) -> (store, per task bytes)

    def refusal(self, name: str, unit, steps: float) -> str | None:
        """Why stepping unit ``name`` by ``steps`` simulated seconds (one message's DoStep
        and Step time) is over budget, or None. Units whose logs cannot be estimated (not
        a :class:`~cosim.master.local_unit.LocalUnit`) are not bounded here."""
        costs = self._cost(unit)
        dt = getattr(unit, "dt", None)
        if costs is None or not steps > 0 or not math.isfinite(steps) or not dt:
            return None         # (a step the unit itself refuses: not a number of ticks)
        store, per_task = costs
        ticks = steps / dt
        if not math.isfinite(ticks):
            return None
        ticks = math.ceil(ticks - 1e-9)
        grow = ticks * sum(per_task)
        held = sum(len(t) * c for t, c in zip(store.task_ticks, per_task))
        what = (f"stepping unit {name!r} at t={unit.t:g} by {steps:g} s ({ticks} ticks of "
                f"dt={unit.dt:g}, {sum(per_task)} bytes of logs per tick) would take about "
                f"{grow / MB:.0f} MB")
        if grow > self.per_request:
            return (f"{what}, over this server's budget of {self.per_request / MB:.0f} MB per "
                    "request (cosim serve --max-request-mb); use a smaller macro step")
        if held + grow > self.per_session:
            return (f"{what}, and its logs hold {held / MB:.0f} MB already: over this "
                    f"server's budget of {self.per_session / MB:.0f} MB per session (cosim "
                    "serve --max-session-mb); log fewer signals, run shorter, or ask its "
                    "owner for a larger budget")
        return None

    def _cost(self, unit) -> tuple | None:
        """``(log store, bytes per tick of each task)`` of ``unit``, or None."""
        store = getattr(getattr(unit, "sim", None), "store", None)
        if store is None or not hasattr(store, "task_ticks"):
            return None
        got = self._costs.get(id(store))
        if got is None or got[0] is not store:
            per_task = [TICK_BYTES] * len(store.task_ticks)
            for samples, ticks in store.lists.values():
                per_task[_position(store.task_ticks, ticks, 0)] += VALUE_BYTES * max(
                    1, math.prod(samples.shape))
            if len(self._costs) > 64:
                self._costs.clear()
            got = self._costs[id(store)] = (store, per_task)
        return got


def _position(lists: list, item: list, default: int) -> int:
    """The index of ``item`` in ``lists`` by identity (the task tick lists are shared)."""
    for i, x in enumerate(lists):
        if x is item:
            return i
    return default


def step_time(requests: list) -> float:
    """The simulated seconds of the DoStep and Step requests in ``requests``."""
    return sum(r.h for r in requests if type(r) is P.DoStep or type(r) is P.Step)
