"""Fused steps of a served unit on its generated path, floats in and floats out.

A unit server that receives one :class:`~cosim.master.protocol.Step` after another for a
:class:`~cosim.master.local_unit.LocalUnit` on the scalar generated path runs them here: the inputs
are written into the Inports' live values, the unit's step function is called and its
outputs read from their slots, exactly as :mod:`cosim.master.compiled` steps in-process units
(which tests prove bit-identical to the protocol path), with no message object and no numpy
array in between. The unit is settled (its simulator and Inports take back the state) before
it serves anything else, and whenever a step falls outside what is done here (then it is
served the ordinary way, which gives the same result or the same error).
"""

from __future__ import annotations

import math

import numpy as np

from cosim.errors import SimulationError
from cosim.master.protocol import STEP_KEEP, STEP_REFRESH, STEP_RESET, STEP_ROLLBACK, Step
from cosim.numerics.timegrid import EXCHANGE_RTOL

__all__ = ["PackedSteps"]

_INF = math.inf
_HOLD = STEP_KEEP | STEP_ROLLBACK
#: The modes served here: a unit that keeps and rolls back its state on its generated path
#: (an iterated coupling, a retried adaptive step) stays on it.
_MODES = STEP_REFRESH | STEP_RESET | _HOLD
#: Steps taken after a keep without a new keep or rollback, at most: the next is served the
#: ordinary way, whose settling makes the kept state the unit's snapshot (replaying these
#: steps once). Bounds the steps remembered and replayed after a keep never rolled back to
#: (a started-up first step, an accepted attempt followed by plain steps).
SINCE_MAX = 16


class PackedSteps:
    """Consecutive fused steps of one unit through its generated function.

    Parameters
    ----------
    unit : LocalUnit
        On its scalar generated path (:meth:`LocalUnit.direct
        <cosim.master.local_unit.LocalUnit.direct>` is not None).
    direct : DirectStep
        What ``unit.direct()`` returned.
    """

    def __init__(self, unit, direct):
        self.unit = unit
        self.fn, self.S, self.D, self.X, self.R, self.G = direct.bound
        self.k, self.last = direct.k, direct.last
        self.t0, self.dt = direct.t0, direct.dt
        self.lives = direct.inputs
        self.slots = [direct.outputs[p] for p in direct.outputs]
        self._one = self.slots[0] if len(self.slots) == 1 else None
        self.stepped = 0
        self.keep = direct.keep
        # What the latest STEP_KEEP kept: (restore, k, last, stepped); see _hold.
        self.kept: tuple | None = None
        self.since: list = []           # the arguments of the steps taken since (settle)
        # The layout of the latest values-only Step (see _write) and its inputs' live values.
        self._inputs = self._orders = None
        self._targets: list = []
        self._n = 0
        # Derivatives each Inport holds (settle gives them back).
        self.orders = {p: len(blk.derivatives) for p, blk in unit.inports.items()}
        sim = unit.sim
        self.cfg_t0 = sim.config.t0
        # Steps longer than a deadline chunk are served the ordinary way (in chunks).
        self.max_ticks = unit.max_ticks if unit.step_deadline is None \
            else min(unit.max_ticks, unit.DEADLINE_CHUNK)

    def settle(self) -> None:
        """Hand the state back to the unit (its simulator and Inports). A state kept here
        becomes the unit's kept state (what a STEP_ROLLBACK served the ordinary way goes
        back to): the unit goes back to it, is snapshotted there, and takes the steps since
        again (the same calls on the same values: the same state, bit for bit). Only
        something else than fused steps asked of a unit between a keep and its rollback
        costs this."""
        kept, self.kept = self.kept, None
        unit = self.unit
        if kept is None:
            unit.settle(self.k, self.last, self.stepped, self.orders)
            self.stepped = 0
            return
        restore, k, last, stepped = kept
        restore()
        unit.settle(k, last, stepped, self.orders)
        self.stepped = 0
        unit.hold_state(unit.get_state())
        for args in self.since:
            if unit.step_packed(*args) is None:
                t, h, mode, inputs, orders, values = args
                unit.handle(Step(inputs, orders, mode, t, h, np.array(values, dtype=float)))
        unit.end_packed()

    def step(self, t: float, h: float, mode: int, inputs: tuple, orders: tuple,
             values: tuple) -> tuple | None:
        """One fused step (see :meth:`LocalUnit.step_packed
        <cosim.master.local_unit.LocalUnit.step_packed>`); None when it must be served the
        ordinary way (nothing was changed then): a refresh at a tick already logged, inputs
        that do not fit, a unit that cannot keep its state on its generated path asked to."""
        if mode & ~_MODES:
            return None
        if len(self.since) >= SINCE_MAX and not mode & _HOLD:
            return None                     # (steps are remembered only while kept)
        k = self.k
        if mode & _HOLD:
            if h == 0.0 or self.keep is None:
                return None
            if mode & STEP_ROLLBACK:
                if self.kept is None:
                    return None             # kept the ordinary way: rolled back that way
                k = self.kept[1]
        dt = self.dt
        now = self.t0 + k * dt
        # same_time(now, t, EXCHANGE_RTOL), inline: this runs once per message (and the
        # master's time is mostly the unit's, to the bit).
        if not (t == now or abs(now - t) <= EXCHANGE_RTOL * max(1.0, abs(t))):
            return None
        if h == 0.0:
            return self._refresh_only(mode, inputs, orders, values, now)
        if not h > 0.0:
            return None
        n = (t + h - self.cfg_t0) / dt - k
        m = round(n)
        if m < 1 or abs(m - n) > 1e-6 or m > self.max_ticks:
            return None
        after = None
        if mode & STEP_RESET:
            # The step's inputs, then every input's value at t+h (values only).
            n_step = len(values) - len(inputs)
            if n_step < len(inputs):
                return None
            values, after = values[:n_step], values[n_step:]
            refresh = False
        else:
            refresh = mode & STEP_REFRESH
        if mode & _HOLD:
            # Every check is done: only now go back / keep (nothing is changed before).
            if not self._hold(mode, inputs, orders, values):
                return None
        if inputs is self._inputs and orders is self._orders and len(values) == self._n:
            # The layout of the previous step (values only, checked then), as Inport.set
            # (value, (), t) mirrors it into the live values: their derivatives were zeroed
            # then, and nothing else writes them while the unit takes packed steps.
            for live, x in zip(self._targets, values):
                live[0] = x
                live[4] = now
        elif not self._write(inputs, orders, values, now):
            return None
        k_m = k + m
        k_end = k_m + 1
        # Outputs at k+m computed in the same call; logged there when refreshed (the
        # RefreshOutputs after DoStep), as the compiled exchange does.
        try:
            k_got, self.last = self.fn(k, k_end, self.last, self.S, self.D, self.X, self.R,
                                       self.G, k_m, k_end if refresh else k_m)
        except Exception as err:
            self._failed(err, k, k_m, "DoStep")
        if self.kept is not None:
            self.since.append((t, h, mode & ~_HOLD, inputs, orders, values if after is None
                               else values + after))
        if k_got == k_end:
            self.k = k_m
            self.stepped += m
            outs = self._outputs()
            if outs is not None:
                if after is None:
                    return self.t0 + k_m * dt, False, _INF, outs
                again = self._reset(inputs, after, k_m)
                if again is not None:
                    return self.t0 + k_m * dt, False, _INF, outs + again
        else:
            self.k = min(k_got, k_m)
            self.stepped += self.k - k
        # Stopped early, or outputs that are not floats: the unit answers from its state.
        self.unit.end_packed()
        done = self.unit.answer_stepped()
        if after is None:
            return done
        if not done[1]:                 # not stopped: the refresh the step asks for
            self.unit.refresh_with(dict(zip(inputs, after)))
            return done[:3] + (done[3] + self.unit.answer_stepped()[3],)
        return done[:3] + (done[3] + done[3],)

    def _hold(self, mode: int, inputs: tuple, orders: tuple, values: tuple) -> bool:
        """Go back to the state kept last (``STEP_ROLLBACK``), then keep the state as it is
        (``STEP_KEEP``), on the unit's side, as ``Unit.fused`` does with whole snapshots: the
        generated path's values, logs, tick and last logged tick. The inputs are not kept:
        the Step sets every one of them. False (nothing done) when the Step's inputs do not
        fit this unit."""
        if not (inputs is self._inputs and orders is self._orders and len(values) == self._n) \
                and not self._fits(inputs, orders, values):
            return False
        if mode & STEP_ROLLBACK:
            restore, self.k, self.last, self.stepped = self.kept
            restore()
        if mode & STEP_KEEP:
            self.kept = (self.keep(), self.k, self.last, self.stepped)
        self.since = []                     # (the kept state is where the steps start)
        return True

    def _outputs(self) -> list | None:
        """The outputs from their slots, if all are floats."""
        one = self._one
        if one is not None:
            x = self.S[one]
            return [x] if type(x) is float else None
        S = self.S
        outs = [S[j] for j in self.slots]
        return outs if all(type(x) is float for x in outs) else None

    def _refresh_only(self, mode, inputs, orders, values, now) -> tuple | None:
        """A refresh at the current tick for new input values (``h == 0``), when the tick
        is not logged yet (else served the ordinary way, which replaces the sample)."""
        k = self.k
        if mode != STEP_REFRESH or any(orders) or self.last >= k:
            return None
        if not (inputs is self._inputs and orders is self._orders
                and len(values) == self._n) and not self._write(inputs, orders, values, now):
            return None
        if inputs is self._inputs:
            for live, x in zip(self._targets, values):
                live[0] = x
                live[4] = now
        try:
            _, self.last = self.fn(k, k + 1, self.last, self.S, self.D, self.X, self.R,
                                   self.G, k, k + 1)
        except Exception as err:
            self._failed(err, k, k, "RefreshOutputs")
        if self.kept is not None:
            self.since.append((now, 0.0, mode, inputs, orders, values))
        outs = self._outputs()
        if outs is not None:
            return now, False, _INF, outs
        self.unit.end_packed()
        return self.unit.answer_stepped()

    def _reset(self, inputs, after, k) -> list | None:
        """After a step to tick ``k`` (not logged): every input set to its value ``after``
        (values only), the outputs at ``k`` computed again and logged; the refreshed outputs,
        or None if they are not floats (the unit then answers from its state)."""
        lives = self.lives
        now = self.t0 + k * self.dt
        for name, x in zip(inputs, after):
            live = lives.get(name)
            if live is None:
                return None
            live[0] = x
            live[1] = live[2] = live[3] = 0.0
            live[4] = now
            self.orders[name] = 0
        self._inputs = self._orders = None      # (derivatives zeroed: a new layout)
        try:
            _, self.last = self.fn(k, k + 1, self.last, self.S, self.D, self.X, self.R,
                                   self.G, k, k + 1)
        except Exception as err:
            self._failed(err, k, k, "RefreshOutputs")
        return self._outputs()

    def _failed(self, err, k, k_m, call):
        """As FastPath.advance reports a failure: the unit stays where the step failed
        (``call``: the part of the Step that failed)."""
        self.k = min(getattr(err, "cosim_tick", k), k_m)
        self.stepped += self.k - k
        self.unit.end_packed()
        failure = SimulationError(f"{type(err).__name__}: {err} (in the generated fast path; "
                                  "rerun with SimulationConfig(fast=False) to find the "
                                  "block)", t=self.t0 + self.k * self.dt)
        failure.cosim_call = call
        raise failure from err

    def _write(self, inputs: tuple, orders: tuple, values: tuple, now: float) -> bool:
        """Write a Step's inputs into the live values, checking its layout first; a layout of
        values only is remembered (by identity: a server reads the same tuples for every
        Step of a layout). False (nothing written) when the Step does not fit this unit."""
        lives = self.lives
        self._inputs = self._orders = None
        if not self._fits(inputs, orders, values):
            return False
        if any(orders):
            return self._derivatives(inputs, orders, values, now)
        targets = [lives[name] for name in inputs]
        for name, live, x in zip(inputs, targets, values):
            # As Inport.set(value, (), t) mirrors it into the live values.
            live[0] = x
            live[1] = live[2] = live[3] = 0.0
            live[4] = now
            self.orders[name] = 0
        self._inputs, self._orders, self._targets = inputs, orders, targets
        self._n = len(targets)
        return True

    def _fits(self, inputs: tuple, orders: tuple, values: tuple) -> bool:
        """The Step's inputs are this unit's, with derivatives of order 0-2, and as many
        values as they and their derivatives need."""
        lives = self.lives
        if len(orders) != len(inputs) or len(values) != len(inputs) + sum(orders):
            return False
        return all(name in lives and order in (0, 1, 2) for name, order in zip(inputs, orders))

    def _derivatives(self, inputs: tuple, orders: tuple, values: tuple, now: float) -> bool:
        """Write inputs with derivatives into the live values (as Inport.set does); False
        (nothing written) when the Step does not fit this unit."""
        lives = self.lives
        i = 0
        for name, order in zip(inputs, orders):
            live = lives[name]
            live[0] = values[i]
            if order:
                live[1] = 1.0
                live[2] = values[i + 1]
                live[3] = values[i + 2] if order == 2 else 0.0
            else:
                live[1] = live[2] = live[3] = 0.0
            live[4] = now
            self.orders[name] = order
            i += 1 + order
        return True
