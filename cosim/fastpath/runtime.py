"""The runtime of a generated step function: it drives the run state, nothing is copied.

The generated function (see :mod:`cosim.fastpath.emitter`) works on the run state's own
values: the flat signals ``S`` and discrete states ``D`` (:class:`~cosim.run.state.FlatValues`),
the continuous state vector ``X``, and the log store's rows and tick lists. A call runs many
ticks; afterwards the run state only marks the blocks' dicts stale, so a unit's macro step
costs the ticks it runs and nothing more.
"""

from __future__ import annotations

import weakref

from cosim.errors import SimulationError

__all__ = ["FastPath", "Unsupported", "warm"]


#: Calls after which CPython 3.11 specializes a function's bytecode (its warm-up; later
#: versions specialize from the first call, 3.10 not at all: the calls are then wasted but
#: harmless).
WARMUP_CALLS = 8
#: ``id`` -> a weak reference of each code object :func:`warm` ran through its warm-up (the
#: caches share them). By identity: a code object's hash walks all its constants.
_warmed: dict[int, weakref.ref] = {}


def warm(fn, *args) -> None:
    """Call ``fn(*args)``, a call with nothing to do (an empty range of ticks or steps),
    until the interpreter has specialized ``fn``'s bytecode, once per code object.

    A generated loop runs a whole run in one call or a few. CPython 3.11 specializes a
    function only after its 8th call: before that, a generated loop runs its statements
    generically, about 1.3-2x slower (a model's first run at ~12 ms, its eighth at ~8.7).
    The empty calls run the function's loads and stores of the run state only, which
    leave every value as it is.
    """
    code = fn.__code__
    known = _warmed.get(id(code))
    if known is not None and known() is code:
        return
    for _ in range(WARMUP_CALLS):
        fn(*args)
    _warmed[id(code)] = weakref.ref(code, lambda _, key=id(code): _warmed.pop(key, None))


class Unsupported(Exception):
    """The plan cannot run on the fast path (the interpreter runs it instead)."""


class FastPath:
    """A compiled step function bound to one run state and log store.

    Parameters
    ----------
    state : RunState
        The run state; its ``flat`` values are set to ``flat``.
    store : LogStore
        The log store; its row ``columns`` are set to ``columns``.
    source : str
        The generated Python source.
    fn : callable
        ``advance(k, k_stop, last_logged, S, D, X, rows, ticks, k_full, k_log)
        -> (k, last_logged)`` (see :mod:`cosim.fastpath.emitter`).
    flat : FlatValues
        The flat values the function reads and writes.
    columns : list of list of (str, int)
        Per task, ``(log key, column)`` of each value in a row the function logs.
    solver : Solver or None
        The continuous solver whose counters the inline integration advances.
    n_stages : int
        Right-hand-side evaluations per step of the inline integration (0 without one).

    Attributes
    ----------
    source : str
        The generated Python source (for inspection and debugging).
    vector : bool
        True for the vector (numpy) strategy.
    key : tuple or bytes or None
        The structural fingerprint its source was written for (see
        :mod:`cosim.fastpath.structure`): a parent inlining this plan keys its own by it.
    cold : bool
        :meth:`advance` has not yet made sure the function is specialized (:func:`warm`).
    """

    def __init__(self, state, store, source, fn, flat, columns, solver, n_stages):
        self.state = state
        self.store = store
        self.source = source
        self.fn = fn
        self.flat = flat
        self.vector = flat.vector
        self.solver = solver
        self.n_stages = n_stages
        self.key = None
        self.cold = True
        state.flat = flat
        store.columns = columns

    def advance(self, k_stop: int, t0: float, dt: float, outputs: bool = False) -> None:
        """Run ticks ``state.k .. k_stop-1`` (``t = t0 + k*dt``); with ``outputs``, then also
        compute (without logging) the outputs at ``k_stop``, in the same call."""
        state, store, flat = self.state, self.store, self.flat
        k0 = state.k
        k_end = k_stop + 1 if outputs else k_stop
        try:
            if self.cold:
                warm(self.fn, k0, k0, store.last, flat.S, flat.D, state.X, store.rows,
                     store.task_ticks, k0, k0)
                self.cold = False
            k, store.last = self.fn(k0, k_end, store.last, flat.S, flat.D, state.X,
                                    store.rows, store.task_ticks, k_stop, k_stop)
            state.k = min(k, k_stop)
        except Exception as err:
            state.k = min(getattr(err, "cosim_tick", state.k), k_stop)
            raise SimulationError(f"{type(err).__name__}: {err} (in the generated fast path; "
                                  "rerun with SimulationConfig(fast=False) to find the block)",
                                  t=t0 + state.k * dt) from err
        finally:
            state.mark_stale()
        if self.solver is not None and state.k > k0:
            st = self.solver.stats
            st["naccept"] += state.k - k0
            st["nfev"] += self.n_stages * (state.k - k0)

    def bound(self) -> tuple:
        """The step function and the values it works on, for a caller that runs it in its own
        loop (the compiled exchange of in-process units, :mod:`cosim.master.compiled`).

        Returns
        -------
        tuple
            ``(fn, S, D, X, rows, ticks)``: call ``fn(k, k_stop, last_logged, S, D, X, rows,
            ticks, k_full, k_log)``, then report where it got with :meth:`settle`. Valid until
            the simulator is initialized or restored again (that builds a new fast path).
        """
        return (self.fn, self.flat.S, self.flat.D, self.state.X, self.store.rows,
                self.store.task_ticks)

    def settle(self, k: int, last: int, stepped: int) -> None:
        """After direct calls of :meth:`bound`'s function: the run is at tick ``k``, logged
        up to tick ``last``, and ``stepped`` ticks were integrated (the solver's counters)."""
        self.state.k = k
        self.store.last = last
        self.state.mark_stale()
        if self.solver is not None and stepped > 0:
            st = self.solver.stats
            st["naccept"] += stepped
            st["nfev"] += self.n_stages * stepped

    def outputs_only(self, k: int, log: bool, t0: float, dt: float) -> None:
        """Compute (and with ``log`` log) the outputs of tick ``k`` only (no state update)."""
        state, store, flat = self.state, self.store, self.flat
        try:
            _, last = self.fn(k, k + 1, store.last, flat.S, flat.D, state.X, store.rows,
                              store.task_ticks, k, k + 1 if log else k)
        except Exception as err:
            raise SimulationError(f"{type(err).__name__}: {err} (in the generated fast path; "
                                  "rerun with SimulationConfig(fast=False) to find the block)",
                                  t=t0 + k * dt) from err
        finally:
            state.mark_stale()
        store.last = last
        state.k = k
