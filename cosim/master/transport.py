"""How the macro-step engine's rounds reach the units: one message per connection and
round through the lanes, units in this process called directly, the rest through
:class:`~cosim.master.calls.UnitCalls`, all in flight at once.

A round is a batch of every involved unit's requests (:meth:`Transport.exchange`); its
replies are checked as :meth:`UnitCalls.call <cosim.master.calls.UnitCalls.call>` checks
them, and each unit's step is accounted for as there (its wall time, its next event, a stop
at an event).
"""

from __future__ import annotations

import time
from array import array

import numpy as np

from cosim.errors import TransportError
from cosim.master import protocol as P
from cosim.master.calls import unit_error
from cosim.master.units import error_reply

__all__ = ["Transport"]


class Transport:
    """The connections of a master's units, for the engine's rounds.

    Parameters
    ----------
    master : Master
        Read: ``names``, ``proxies``, ``calls`` (whose step times, next events and stops
        are updated).
    fusable : set of str
        Units that take a fused Step (:data:`~cosim.master.protocol.FUSED_STEP`).
    packers : dict of str to FusedStep
        Each unit's packing (the size of its outputs).

    Attributes
    ----------
    lanes : dict of str to Lane
        Units in other processes whose Steps travel through their connection's lane (one
        message per connection and round, written from the float buffers).
    direct : dict of str to Unit
        Units in this process that serve the fused step: called directly, values as they are
        (no packing), through ``Unit.fused``.
    replies : dict
        The replies of the last exchange that came (also when a unit failed).
    failed : tuple
        ``(macro step, unit)`` of the failure the last exchange raised.
    rounds : int
        Exchanges made (round trips, a coupling's iterations each one).
    """

    def __init__(self, master, fusable: set, packers: dict):
        self.calls = master.calls
        self.names = list(master.names)
        self.packers = packers
        self.index = {u: i for i, u in enumerate(self.names)}
        self.lanes = {}
        for u in self.names:
            proxy = master.proxies[u]
            if u in fusable and proxy.in_process() is None:
                lane = proxy.lane()
                if lane is not None:
                    self.lanes[u] = lane
        self.direct = {u: master.proxies[u].in_process() for u in self.names
                       if u in fusable and master.proxies[u].in_process() is not None}
        self.batches: dict = {}        # lane batches made, by (lane, layout of its units)
        self.replies: dict = {}
        self.failed: tuple = ()
        self.rounds = 0

    def exchange(self, batch: dict, at: dict) -> dict:
        """Every unit's requests of a round (``batch``: unit -> list of requests; ``at``:
        unit -> its macro step), all in flight at once: the Steps of units with lanes one
        message per connection, the others through :meth:`UnitCalls.call
        <cosim.master.calls.UnitCalls.call>` (units in this process run meanwhile); the
        replies, checked as ``UnitCalls.call`` checks them (the failure of the earliest
        macro step, the first in unit order, raised once every reply is read; its macro step
        and unit in :attr:`failed`, the replies that came in :attr:`replies`)."""
        calls = self.calls
        self.rounds += 1
        first = min(at.values(), key=_k)
        T, H = first.T, first.H
        self.replies, self.failed = {}, ()
        lanes = self.lanes
        groups: dict = {}               # lane -> [(unit, Step)]: one message each
        others = {}
        direct = []
        for u, reqs in batch.items():
            if type(reqs) is tuple:
                direct.append((u, reqs))
                continue
            lane = lanes.get(u)
            if lane is not None:            # (a unit's Steps: mostly one)
                step = reqs[0] if len(reqs) == 1 else reqs
                members = groups.get(lane)
                if members is None:
                    groups[lane] = [(u, step)]
                else:
                    members.append((u, step))
            else:
                others[u] = reqs
        failures = []                   # ((macro step, unit index), error)
        sent = []
        clock = time.perf_counter
        started = clock()
        if len(groups) == 1 and not others and not direct:
            solo = self._solo(groups, T, H, started)
            if solo is not None:
                self.replies = solo
                return solo
        for lane, members in groups.items():
            lane_batch = self._lane_batch(lane, members)
            if lane_batch is None:
                for u, step in members:
                    others[u] = step if type(step) is list else [step]
                continue
            times = None
            for _, step in members:
                if type(step) is list or step.t != T or step.h != H:
                    times = [(0.0, 0.0) if type(m) is list else (m.t, m.h) for _, m in members]
                    break
            try:
                lane_batch.send(T, H, [[(s.t, s.h, s.data) for s in step] if type(step) is list
                                       else step.data for _, step in members], times)
            except Exception as err:  # noqa: BLE001 - raised below, after the others
                failures.append((self._rank(members[0][0], at), err))
                break                       # those sent before it are still answered
            sent.append((lane_batch, members))
        replies: dict = {}
        if others:
            try:
                replies = calls.call(others, min(at[u].T for u in others))
            except Exception as err:  # noqa: BLE001 - raised below, in unit order
                failures.append((min(self._rank(u, at) for u in others), err))
        for u, item in direct:
            unit, mode, vals, ders, after, t, h = item[:7]
            begun = clock()
            try:
                done, stepped = unit.fused(mode, vals, ders, after, t, h)
                if len(item) > 7:           # then held inputs set at item[8], refreshed
                    done = unit.fused(P.STEP_REFRESH, item[7], {}, None, item[8], 0.0)[0]
                outs = unit.get_outputs()
            except Exception as err:  # noqa: BLE001 - raised below, in unit order
                failures.append((self._rank(u, at), unit_error(
                    u, _STEP, error_reply(err, getattr(unit, "t", None)), at[u].T)))
                continue
            _account(calls, u, at[u].T, clock() - begun if h else None,
                     (done.t_reached, done.event, done.next_event))
            replies[u] = (outs, stepped)
        for lane_batch, members in sent:
            try:
                got = lane_batch.receive(T)
            except Exception as err:  # noqa: BLE001 - raised below, in unit order
                failures.append((self._rank(members[0][0], at), err))
                continue
            elapsed = clock() - started
            for (u, step), rep in zip(members, got):
                if type(rep) is tuple:      # a plain Stepped, read in place
                    reps = [rep]
                else:
                    try:
                        reps = [_stepped(u, s, r, s.t) for s, r in zip(step, rep)] \
                            if type(step) is list else [_stepped(u, step, rep, step.t)]
                    except Exception as err:  # noqa: BLE001 - raised below, in unit order
                        _account(calls, u, at[u].T, elapsed, None)
                        failures.append((self._rank(u, at), err))
                        continue
                _account(calls, u, at[u].T, elapsed, reps[-1])   # (the latest decides)
                replies[u] = reps
        self.replies = replies          # (filed by _send, also when a unit failed)
        if failures:
            (k, index), err = min(failures, key=lambda f: f[0])
            self.failed = (k, self.names[index])
            raise err
        return replies

    def _rank(self, u: str, at: dict) -> tuple:
        """Which failure of a round is raised: the earliest macro step's, then the first
        in unit order."""
        return at[u].k, self.index[u]

    def _solo(self, groups, T, H, started):
        """A round of one unit alone on its connection: its Step and Stepped in one call of
        its batch (:meth:`LaneBatch.exchange <cosim.master.proxy.LaneBatch.exchange>`); None
        when the round is not such."""
        ((lane, members),) = groups.items()
        if len(members) != 1:
            return None
        ((u, step),) = members
        if type(step) is list or step.t != T or step.h != H:
            return None
        lane_batch = self._lane_batch(lane, members)
        if lane_batch is None:
            return None
        rep = _stepped(u, step, lane_batch.exchange(T, H, step.data), T)
        _account(self.calls, u, T, time.perf_counter() - started, rep)
        return {u: [rep]}

    def _lane_batch(self, lane, members):
        """The lane's batch for ``members`` (unit, Step) in their layout (made once per
        layout), or None when the lane cannot carry it."""
        if len(members) == 1 and type(members[0][1]) is not list:
            ((u, s),) = members             # (a process per unit: the common case, kept cheap)
            key = (lane, u, s.inputs, s.orders, s.mode, s.data.size)
        else:
            key = (lane,) + tuple((u,) + tuple((s.inputs, s.orders, s.mode, s.data.size)
                                               for s in (ss if type(ss) is list else (ss,)))
                                  for u, ss in members)
        found = self.batches.get(key, False)
        if found is not False:
            return found
        if len(self.batches) >= 256:
            self.batches.clear()
        specs = [(u, [(s.inputs, s.orders, s.mode, s.data.size,
                       self.packers[u].size * (2 if s.mode & P.STEP_RESET else 1))
                      for s in (ss if type(ss) is list else (ss,))])
                 for u, ss in members]
        made = self.batches[key] = lane.batch(specs)
        return made


#: The request an error of a unit called directly is reported against (its part names the
#: call: ErrorReply.call).
_STEP = P.Step((), (), 0, 0.0, 0.0, np.zeros(0))


def _stepped(u: str, step, rep, T: float) -> tuple:
    """A lane's reply to unit ``u``'s ``step`` as ``(t_reached, event, next_event,
    outputs)`` (a plain Stepped comes as such a tuple), or the error it stands for raised."""
    if type(rep) is tuple:
        return rep
    if isinstance(rep, P.ErrorReply):
        raise unit_error(u, step, rep, T)
    if type(rep) is not P.Stepped:
        raise TransportError(u, "Step", f"answered {type(rep).__name__} to a Step", t=T)
    return rep.t_reached, rep.event, rep.next_event, rep.outputs


def _account(calls, u: str, T: float, seconds: float | None, done: tuple | None) -> None:
    """What :meth:`UnitCalls.call <cosim.master.calls.UnitCalls.call>` notes of unit ``u``'s
    reply in a round at ``T``: the round's wall time when it stepped (``seconds``; None: a
    refresh only), and from ``done`` (``(t_reached, event, next_event, ...)`` of its step;
    None: a failure) its next event and whether it stopped at an event."""
    if seconds is not None:
        times = calls.step_times.get(u)
        if times is None:
            times = calls.step_times[u] = (array("d"), array("d"))
        times[0].append(T)
        times[1].append(seconds)
    if done is None:
        return
    t_reached, event, calls.next_event[u] = done[:3]
    if event:
        calls.stopped[u] = t_reached
    elif calls.stopped:
        calls.stopped.pop(u, None)


def _k(st) -> int:
    return st.k
