"""Watching a run from outside the macro loop: the :class:`Observer` a master calls.

A dashboard (:mod:`cosim.dashboard`), a progress bar or a test attaches an observer as
``master.observer``; the master calls :meth:`Observer.observe` after every macro step it takes
through the engine and after every chunk of whole steps the compiled exchange takes (at most
:attr:`Observer.stride` steps long), and after a recovery. The call
happens on the master's thread between macro steps, so the observer reads the master's
public state as it is (``T``, ``n``, ``stats``, ``step_log``, ``values``,
``calls.step_times``, ``desc``) without locks; it must be cheap (a dashboard samples and
hands the work to a thread of its own).
"""

from __future__ import annotations

__all__ = ["Observer"]


class Observer:
    """What the master calls while it runs (the default does nothing).

    How to write an observer
    ------------------------
    1. Override :meth:`observe`; read what you need from the master and return quickly: it
       runs between macro steps on the master's thread, at up to thousands of calls per
       second. Copy what you keep (``master.values`` changes with the next step).
    2. Set :attr:`stride` to bound how many macro steps the compiled exchange may take
       between two calls (it would otherwise run to the next checkpoint or log collection in
       one go); splitting its chunks changes no result.
    """

    #: Most macro steps the master takes between two calls of :meth:`observe`.
    stride: int = 1_000_000

    def observe(self, master) -> None:
        """The master advanced (``master.T``, ``master.n``); called on its thread."""
