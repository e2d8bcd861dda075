"""Jacobi macro steps of remote units through their lanes: no message object per unit.

When every unit stepped in a Jacobi macro step (those outside algebraic couplings) takes
fused steps through a :class:`~cosim.master.proxy.Lane` and inputs hold their value over the
step (extrapolation order 0), :class:`FusedRounds` sends each connection one message with
every unit's Step, written from the values the master holds (the driving outputs' float64
arrays, passed as they are), then reads all the replies: the requests and replies of
:meth:`Master.step <cosim.master.master.Master.step>`'s protocol path, byte for byte, and
the same bookkeeping (outputs, next events, stops, step times, errors in unit order).
"""

from __future__ import annotations

import math
import time
from array import array

import numpy as np

from cosim.config import Scheme
from cosim.errors import TransportError
from cosim.master import protocol as P
from cosim.master.calls import raise_error

__all__ = ["FusedRounds", "SoloRound", "lane_spec", "output_layout", "output_sizes", "step_values",
           "unusual_reply"]

_F64 = np.dtype(np.float64)


class _Member:
    """One unit of a round: where its inputs come from and its outputs go."""

    __slots__ = ("name", "index", "keys", "one", "layout", "whole", "times", "fused")

    def __init__(self, name, index, times, fused):
        self.name = name
        self.index = index                  # in the master's unit order (errors)
        self.keys = fused.keys              # the outputs driving its inputs, in order
        self.one = self.keys[0] if len(self.keys) == 1 else None
        self.layout, self.whole = output_layout(fused)
        self.times = times                  # UnitCalls.step_times[name]
        self.fused = fused


class FusedRounds:
    """Jacobi macro steps of the units ``units`` through their lanes (see the module
    notes); built by :meth:`build`."""

    def __init__(self, master, groups: list, sizes: dict):
        self.calls = master.calls
        self.groups = groups                # [(LaneBatch, [_Member, ...]), ...]
        self.sizes = sizes                  # output key -> values it packs into a Step
        # Output arrays this round made (float64, C-contiguous, of their size): a value the
        # master holds that is one of them is sent as it is, any other is converted first.
        self.plain: dict = {}

    @classmethod
    def build(cls, master, units: list) -> FusedRounds | None:
        """The rounds stepping ``units`` (the master's plain Jacobi units), or None when
        one of them has no lane, inputs are extrapolated or any shape does not fit."""
        cfg = master.cfg
        if (cfg.scheme is not Scheme.JACOBI or cfg.adaptive or cfg.trace or not units
                or master.history.order != 0 or any(u not in master.fused for u in units)):
            return None
        sizes = output_sizes(master)
        lanes: dict[int, tuple] = {}
        for u in units:
            lane = master.proxies[u].lane()
            if lane is None:
                return None
            fused = master.fused[u]
            spec = lane_spec(master, u, sizes)
            if spec is None:
                return None                 # the ordinary path reports what is wrong
            times = master.calls.step_times.setdefault(u, (array("d"), array("d")))
            member = _Member(u, master.names.index(u), times, fused)
            lanes.setdefault(id(lane), (lane, [], []))
            lanes[id(lane)][1].append(member)
            lanes[id(lane)][2].append(spec)
        groups = []
        for lane, members, specs in lanes.values():
            batch = lane.batch(specs)
            if batch is None:
                return None
            groups.append((batch, members))
        if len(groups) == 1 and len(groups[0][1]) == 1 and groups[0][1][0].one is not None:
            return SoloRound(master, groups, sizes)
        return cls(master, groups, sizes)

    def step(self, T: float, H: float, values: dict, outputs: dict) -> bool:
        """Step every unit over ``[T, T+H]`` from ``values`` (the master's, at ``T``), their
        outputs at ``T+H`` into ``outputs``; False (nothing sent) when a value cannot be
        sent as it is and does not convert to its input's size.

        Raises
        ------
        TransportError, SimulationError, ModelError
            As :meth:`UnitCalls.call <cosim.master.calls.UnitCalls.call>` raises them, for
            the first unit (in the master's order) that failed.
        """
        plain = self.plain
        payloads = []
        for _, members in self.groups:
            loads = []
            for m in members:
                key = m.one
                if key is not None:
                    v = values[key]
                    if plain.get(key) is not v and (v := self._plain(key, v)) is None:
                        return False
                    loads.append(v)
                    continue
                parts = []
                for key in m.keys:
                    v = values[key]
                    if plain.get(key) is not v and (v := self._plain(key, v)) is None:
                        return False
                    parts.append(v)
                loads.append(b"".join(parts))
            payloads.append(loads)
        groups = self.groups
        failures = []
        for i, ((batch, members), loads) in enumerate(zip(groups, payloads)):
            try:
                batch.send(T, H, loads)
            except Exception as err:  # noqa: BLE001 - raised below, after the others
                failures.append((members[0].index, err))
                groups = groups[:i]         # those sent before it are still answered
                break
        clock = time.perf_counter
        started = clock()
        calls = self.calls
        next_event, stopped = calls.next_event, calls.stopped
        for batch, members in groups:
            try:
                replies = batch.receive(T)
            except Exception as err:  # noqa: BLE001 - raised below, in unit order
                failures.append((members[0].index, err))
                continue
            elapsed = clock() - started
            for m, rep in zip(members, replies):
                ts, secs = m.times
                ts.append(T)
                secs.append(elapsed)
                if type(rep) is tuple:
                    t_reached, event, nxt, out = rep
                else:
                    try:
                        t_reached, event, nxt, out = unusual_reply(m.name, m.fused,
                                                                   rep, T)
                    except Exception as err:  # noqa: BLE001 - raised below, in unit order
                        failures.append((m.index, err))
                        continue
                next_event[m.name] = nxt
                if event:
                    stopped[m.name] = t_reached
                elif stopped:
                    stopped.pop(m.name, None)
                whole = m.whole
                if whole is not None:
                    outputs[whole] = out
                    plain[whole] = out
                    continue
                for key, shape, a, b in m.layout:
                    v = out[a:b].reshape(shape)
                    outputs[key] = v
                    plain[key] = v
        if failures:
            raise min(failures, key=lambda f: f[0])[1]
        return True

    def _plain(self, key, value):
        """``value`` as the float64 values a Step carries, or None if it has not the size of
        the input it drives (kept: the next round sends it as it is)."""
        v = step_values(value, self.sizes[key])
        if v is not None:
            self.plain[key] = v
        return v


class SoloRound(FusedRounds):
    """The rounds of one unit with one driving output: :meth:`FusedRounds.step`'s requests,
    bookkeeping and errors, its Step and Stepped exchanged in one call of the batch
    (:meth:`LaneBatch.exchange <cosim.master.proxy.LaneBatch.exchange>`)."""

    def __init__(self, master, groups: list, sizes: dict):
        super().__init__(master, groups, sizes)
        ((self.batch, (m,)),) = groups
        self.member = m
        self.name, self.key, self.whole, self.layout = m.name, m.one, m.whole, m.layout
        self.ts, self.secs = m.times
        self.next_event, self.stopped = self.calls.next_event, self.calls.stopped

    def step(self, T: float, H: float, values: dict, outputs: dict) -> bool:
        key = self.key
        v = values[key]
        plain = self.plain
        if plain.get(key) is not v and (v := self._plain(key, v)) is None:
            return False
        started = time.perf_counter()
        rep = self.batch.exchange(T, H, v)
        self.ts.append(T)
        self.secs.append(time.perf_counter() - started)
        if type(rep) is tuple:
            t_reached, event, nxt, out = rep
        else:
            t_reached, event, nxt, out = unusual_reply(self.name, self.member.fused, rep, T)
        self.next_event[self.name] = nxt
        if event:
            self.stopped[self.name] = t_reached
        elif self.stopped:
            self.stopped.pop(self.name, None)
        whole = self.whole
        if whole is not None:
            outputs[whole] = plain[whole] = out
            return True
        for key, shape, a, b in self.layout:
            outputs[key] = plain[key] = out[a:b].reshape(shape)
        return True


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
