"""Events: zero crossings of a signal or state, and scheduled times, with their actions.

A :class:`ZeroCrossing` watches ``g(t)``, a component of a signal (``"block.port"``) or of a
block's continuous state (``"block"``); when ``g`` changes sign in the watched direction
inside a solver step, the crossing is located on the solver's dense output to ``tol`` (s) and
the actions run there. A :class:`Scheduled` event fires at given times or periodically. Actions:
``reset`` (new continuous state values per block), ``stop`` (end the run), ``callback``. Every
event that fires is logged as ``(t, name)`` in ``Simulator.event_log``.

Events belong to the diagram whose blocks they name (``Model.add_event``,
``Subsystem.add_event``); an event of a diagram naming blocks inside one of its atomic
subsystems as ``"sub/block"`` is handed to that subsystem's own run (:func:`route`), so a
zero crossing inside a co-simulation unit is located by the unit's solver.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from cosim.errors import ModelError

__all__ = ["Direction", "Scheduled", "ZeroCrossing", "lifted", "route"]


class Direction(enum.Enum):
    """Which sign changes of ``g`` fire a zero-crossing event."""

    RISING = "rising"
    FALLING = "falling"
    BOTH = "both"


def _check_actions(name, reset, callback):
    if not isinstance(name, str) or not name:
        raise ModelError(f"event name must be a non-empty string, got {name!r}")
    if not isinstance(reset, Mapping):
        raise ModelError(f"event {name!r}: reset must map block names to new state values "
                         "or to callables old -> new")
    if callback is not None and not callable(callback):
        raise ModelError(f"event {name!r}: callback must be callable(sim, t)")


@dataclass(frozen=True)
class ZeroCrossing:
    """Fire when ``g`` crosses zero.

    Parameters
    ----------
    name : str
        Event name (logged).
    watch : str
        ``"block.port"`` (an output signal) or ``"block"`` (its continuous state).
    index : int
        Component of the watched vector.
    direction : Direction or str
        ``"rising"`` (g goes from < 0 to >= 0), ``"falling"`` or ``"both"``.
    reset : mapping of str to array_like or callable
        Block name -> new continuous state, or ``f(old_state) -> new_state``.
    stop : bool
        End the run at the event.
    callback : callable, optional
        ``callback(sim, t)``, called after the resets.
    tol : float
        Time tolerance (s) of the located crossing.
    """

    name: str
    watch: str
    index: int = 0
    direction: Direction | str = Direction.BOTH
    reset: Mapping[str, object] = field(default_factory=dict)
    stop: bool = False
    callback: Callable | None = None
    tol: float = 1e-12

    def __post_init__(self):
        _check_actions(self.name, self.reset, self.callback)
        try:
            object.__setattr__(self, "direction", Direction(self.direction))
        except ValueError:
            raise ModelError(f"event {self.name!r}: direction {self.direction!r} is not one of "
                             f"{[d.value for d in Direction]}") from None
        if not (isinstance(self.tol, float) and self.tol > 0):
            raise ModelError(f"event {self.name!r}: tol must be a float > 0")

    def fires(self, g_old: float, g_new: float) -> bool:
        """True if the change from ``g_old`` to ``g_new`` is a crossing in our direction."""
        if self.direction is Direction.RISING:
            return g_old < 0.0 <= g_new
        if self.direction is Direction.FALLING:
            return g_old > 0.0 >= g_new
        return (g_old < 0.0 <= g_new) or (g_old > 0.0 >= g_new)


@dataclass(frozen=True)
class Scheduled:
    """Fire at given times, or every ``period`` from ``start``.

    Parameters
    ----------
    name : str
    times : sequence of float
        Explicit times (s).
    period : float, optional
        Period (s) of a recurring event, first at ``start``.
    start : float
    reset, stop, callback
        As for :class:`ZeroCrossing`.
    """

    name: str
    times: Sequence[float] = ()
    period: float | None = None
    start: float = 0.0
    reset: Mapping[str, object] = field(default_factory=dict)
    stop: bool = False
    callback: Callable | None = None

    def __post_init__(self):
        _check_actions(self.name, self.reset, self.callback)
        object.__setattr__(self, "times", tuple(sorted(float(t) for t in self.times)))
        if self.period is not None and not (self.period > 0 and math.isfinite(self.period)):
            raise ModelError(f"event {self.name!r}: period must be > 0")

    def next_after(self, t: float, eps: float) -> float:
        """The first firing time strictly after ``t + eps`` (inf if none)."""
        best = math.inf
        for tt in self.times:
            if tt > t + eps:
                best = tt
                break
        if self.period is not None:
            n = math.floor((t + eps - self.start) / self.period) + 1
            best = min(best, self.start + max(n, 0) * self.period)
        return best


def _blocks_named(ev) -> list[str]:
    """The block references of an event: its reset keys and, for a zero crossing, its
    watched block (``"block.port"`` or ``"block"``)."""
    names = list(ev.reset)
    if isinstance(ev, ZeroCrossing):
        names.append(ev.watch)
    return names


def route(events, atomic: set[str]) -> tuple[list, dict[str, list], list[str]]:
    """Split a diagram's events into its own and those of its atomic subsystems.

    An event whose every block reference names a block inside the same atomic subsystem
    (``"sub/block"``, ``"sub/block.port"``) is that subsystem's, its references made
    relative to it; one that names blocks in several (or in one and at this level) is a
    problem: an event runs in one run (one unit).

    Parameters
    ----------
    events : list of ZeroCrossing or Scheduled
    atomic : set of str
        Names of the diagram's atomic subsystems (its units, in a co-simulation).

    Returns
    -------
    own : list
        Events of the diagram itself.
    inner : dict of str to list
        Atomic subsystem name -> its events, relative to it.
    problems : list of str
    """
    import dataclasses
    own, inner, problems = [], {}, []
    for ev in events:
        refs = _blocks_named(ev) if isinstance(ev, (ZeroCrossing, Scheduled)) else []
        heads = {r.partition("/")[0] if "/" in r and r.partition("/")[0] in atomic else None
                 for r in refs}
        if not refs or heads == {None}:
            own.append(ev)
            continue
        if len(heads) > 1:
            problems.append(f"event {ev.name!r} names blocks in "
                            f"{', '.join(sorted(h or 'the top level' for h in heads))}: an "
                            "event watches and resets blocks of one run (one unit); split it")
            continue
        sub = heads.pop()
        cut = len(sub) + 1
        changes = {"reset": {k[cut:]: v for k, v in ev.reset.items()}}
        if isinstance(ev, ZeroCrossing):
            changes["watch"] = ev.watch[cut:]
        inner.setdefault(sub, []).append(dataclasses.replace(ev, **changes))
    return own, inner, problems


def lifted(diagram, atomic: bool) -> list:
    """The events of ``diagram``'s subsystems, at any depth, as ``diagram``'s own: their
    block references prefixed ``"sub/"``. With ``atomic`` false, only virtual subsystems'
    (flattened into ``diagram``'s plan; an atomic subsystem's run watches its own).
    """
    import dataclasses
    out = []
    for b in diagram.blocks:
        if not hasattr(b, "events") or not hasattr(b, "blocks") or (
                getattr(b, "atomic", False) and not atomic):
            continue
        head = f"{b.name}/"
        for ev in list(b.events) + lifted(b, atomic):
            changes = {"reset": {head + k: v for k, v in ev.reset.items()}}
            if isinstance(ev, ZeroCrossing):
                changes["watch"] = head + ev.watch
            out.append(dataclasses.replace(ev, **changes))
    return out
