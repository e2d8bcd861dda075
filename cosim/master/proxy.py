"""The contract between the master and wherever units run: :class:`Proxy` and :class:`Backend`.

The master sees every unit through a proxy and never asks where it lives (in process, in a
Ray actor, behind a ZeroMQ socket); a backend makes the proxies of the units it runs.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

__all__ = ["Backend", "Lane", "LaneBatch", "Proxy"]


class Proxy(ABC):
    """The master's handle on one unit.

    How to write a proxy
    --------------------
    1. Set :attr:`name` to the unit's name.
    2. Implement :meth:`submit` (send the requests, or queue them, and return a handle),
       :meth:`result` (the replies for a handle, one per request, in order) and
       :meth:`close`. The master submits to every unit of a call before it asks for any
       result, so a remote proxy has all of them in flight at once.
    3. Override :meth:`flush` when requests of several units share one message: the master
       calls it once every request of a call is submitted.
    4. Override :meth:`recover` when the unit's host can come back after a failure (a Ray
       actor restarted, a server process re-spawned).
    """

    name: str

    @abstractmethod
    def submit(self, requests: list) -> Any:
        """Send ``requests`` (protocol Request messages) to the unit; returns a handle."""

    @abstractmethod
    def result(self, handle: Any) -> list:
        """The replies to the requests behind ``handle``, one per request, in order.

        Raises
        ------
        TransportError
            The unit did not answer (its host failed or timed out).
        """

    def flush(self) -> None:
        """Send what is queued; nothing to do for a proxy that sends on submit."""

    def recover(self, deadline: float) -> None:
        """After a unit failure, wait until this unit answers again (until ``deadline``, a
        ``time.time()`` value) or raise TransportError; a unit that cannot fail has nothing
        to do."""

    def where(self) -> dict:
        """Where the unit runs, for people (dashboards, reports): plain JSON-ready values
        such as ``node``, ``pid``, ``address``; ``{}`` when the backend's name says it all.
        May ask the unit's host (called once per run and after a recovery, never per
        step)."""
        return {}

    def in_process(self):
        """The unit object itself when it runs in this process (the master may then step it
        through generated code, :mod:`cosim.master.compiled`), else None."""
        return None

    def lane(self) -> Lane | None:
        """The :class:`Lane` carrying this unit's fused steps as plain values (the same
        object for every unit sharing its connection), or None: its fused steps travel as
        ``Step`` messages through :meth:`submit`."""
        return None

    @abstractmethod
    def close(self) -> None:
        """Release the connection to the unit."""


class Lane(ABC):
    """Fused macro steps (:class:`~cosim.master.protocol.Step`) of the units on one
    connection, written from float64 buffers without a message object per unit: what the
    macro-step engine (:mod:`cosim.master.engine`) sends its rounds through.

    How to write a lane
    -------------------
    Implement :meth:`batch`; its :class:`LaneBatch` writes every unit's ``Step`` (the bytes
    the ``Step`` message would have) from ``T``, ``H`` and the unit's packed input values,
    sends them as one message, and reads the replies. Replies that are not a plain
    ``Stepped`` of the expected size come back decoded, for the master to judge.
    """

    @abstractmethod
    def batch(self, units: list) -> LaneBatch | None:
        """The batch stepping ``units``, a list of ``(name, steps)``: the unit and, per
        Step it takes in the round (mostly one; a step and then a refresh of a part of its
        inputs: two), ``(inputs, orders, mode, n_in, n_out)``: its ``Step.inputs``,
        ``Step.orders`` and ``Step.mode``, the number of float64 values of its ``Step.data``
        and of its ``Stepped.outputs``; None when this lane cannot carry them (the master
        then sends Step messages)."""


class LaneBatch(ABC):
    """One message per macro step to the units of a :class:`Lane` (see there)."""

    @abstractmethod
    def send(self, T: float, H: float, payloads: list, times: list | None = None) -> None:
        """Send every unit its ``Step`` over ``[T, T+H]``; ``payloads[i]``: unit ``i``'s
        ``Step.data``, a C-contiguous float64 buffer of ``n_in`` values; ``times[i]``, when
        given: unit ``i``'s own ``(t, h)`` instead. A unit of several Steps: a list of
        ``(t, h, data)``, one per Step (``times[i]`` is not read then).

        Raises
        ------
        TransportError
            Nothing could be sent (the connection is then reset).
        """

    @abstractmethod
    def receive(self, T: float) -> list:
        """The replies to :meth:`send`, one per unit in order: ``(t_reached, event,
        next_event, outputs)`` (outputs: a read-only float64 array of ``n_out`` values) for
        a plain ``Stepped``, else the decoded reply (an ErrorReply, a Stepped of another
        size, or anything the unit answered); a list of these, one per Step, for a unit of
        several.

        Raises
        ------
        TransportError
            No reply (the connection is then reset), or not one batch per unit.
        """

    def exchange(self, T: float, H: float, payload) -> tuple:
        """:meth:`send` of a batch of one unit (``payload``: its input values), then the
        reply :meth:`receive` gives for it; a lane may do both in one go."""
        self.send(T, H, [payload])
        return self.receive(T)[0]


class Backend(ABC):
    """Runs units somewhere and hands the master their proxies.

    Register a backend under the ``cosim.backends`` entry point group (name -> class); the
    class is built with the run's ``CosimConfig``. A backend that sets :attr:`reloads` and
    implements :meth:`reload` can host the units of the next run of a parameter study in
    the processes it started for the last one (:mod:`cosim.master.hosts`).
    """

    #: True when :meth:`reload` can put new units into what :meth:`start` started.
    reloads: bool = False

    @abstractmethod
    def __init__(self, cosim_config) -> None:
        """Keep the co-simulation options (per-unit options in ``cosim_config.units``)."""

    @abstractmethod
    def start(self, specs: list) -> dict[str, Proxy]:
        """Start the units of ``specs`` (``UnitSpec``); returns unit name -> proxy."""

    def reload(self, specs: list) -> dict[str, Proxy]:
        """Replace the units this backend runs by those of ``specs`` (the next run of the
        same model), in the processes :meth:`start` started; returns their proxies.

        The units are built as :meth:`start` builds them, so a run on reloaded units is bit
        for bit a run on new ones.

        Raises
        ------
        ModelError
            The units cannot go where the last ones were (another grouping into processes,
            other placement options: a structure change), naming why; the caller stops this
            backend and starts a new one.
        """
        from cosim.errors import ModelError
        raise ModelError(f"{type(self).__name__} does not reload units")

    @abstractmethod
    def stop(self) -> None:
        """Stop whatever :meth:`start` started (also after a failed start)."""
