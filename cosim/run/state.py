"""The run state of one simulator: where the run stands and the values it carries.

One object owns it, and every part that runs the plan uses it directly: the interpreter, the
generated fast path, the event monitor, checkpoints and units. It holds

- the clock: tick ``k`` (``t = t0 + k*dt``, never accumulated) and ``t_stop``, the time an
  event stopped the run between ticks;
- the continuous state vector ``X`` (shape ``(n_states,)``): blocks' ``cstate`` are views of
  it, the solvers integrate it, the fast path reads and writes it in place;
- the block values (discrete ``state`` and held ``outputs``). The interpreter keeps them in the
  blocks' own port dicts (the Block contract). When the generated fast path runs, the flat
  :class:`FlatValues` it works on are the truth instead, and the blocks' dicts are written from
  them only when something reads blocks (:meth:`RunState.blocks_current`) — never at a macro
  step boundary of a unit.
"""

from __future__ import annotations

import numpy as np

__all__ = ["FlatValues", "RunState"]


class FlatValues:
    """Signals and discrete states as flat sequences of floats (the fast path's values).

    Parameters
    ----------
    signal_slots : list of (Block, str)
        ``(block, output port)`` of each entry of ``S``.
    state_slots : list of (Block, str)
        ``(block, state name)`` of each entry of ``D``.
    vector : bool
        Hold the values in float64 arrays (the vector strategy) instead of lists.
    """

    def __init__(self, signal_slots, state_slots, vector: bool):
        self.signal_slots = signal_slots
        self.state_slots = state_slots
        self.vector = vector
        self._slot_of: dict | None = None
        self.S = self._box([float(b.outputs[p][0]) for b, p in signal_slots])
        self.D = self._box([float(b.state[n][0]) for b, n in state_slots])

    @property
    def slot_of(self) -> dict:
        """``(id(block), port)`` -> index of its signal in ``S`` (built when first asked for:
        about 170 bytes per block that most runs never read)."""
        if self._slot_of is None:
            self._slot_of = {(id(b), p): j for j, (b, p) in enumerate(self.signal_slots)}
        return self._slot_of

    def _box(self, values):
        return np.array(values, dtype=np.float64) if self.vector else values

    def reload(self) -> None:
        """Take the values from the blocks' dicts (after a restore wrote them)."""
        self.S[:] = [float(b.outputs[p][0]) for b, p in self.signal_slots]
        self.D[:] = [float(b.state[n][0]) for b, n in self.state_slots]

    def write_blocks(self) -> None:
        """Write the values into the blocks' dicts, as the interpreter would hold them."""
        for (b, p), v in zip(self.signal_slots, self.S):
            b.outputs[p] = np.array([v])
        for (b, n), v in zip(self.state_slots, self.D):
            b.state[n] = np.array([v])

    def clear_blocks(self) -> None:
        """Empty the output and input dicts of the blocks with outputs: their values moved
        on, and holding the old ones costs about 360 bytes per block (:meth:`write_blocks` and a propagation
        fill them again)."""
        for b, _ in self.signal_slots:
            b.outputs.clear()
            b.inputs.clear()

    def value(self, block, port: str) -> np.ndarray:
        """Output ``port`` of ``block`` as a shape-(1,) array (a new array)."""
        return np.array([self.S[self.slot_of[(id(block), port)]]])


class RunState:
    """The clock, continuous state and block values of one run (see the module docstring).

    Parameters
    ----------
    plan : Plan
        The plan whose blocks hold the interpreter's values.

    Attributes
    ----------
    k : int
        Current tick.
    t_stop : float or None
        Time at which an event stopped the run between ticks, else None.
    stop_requested : bool
        A stop was asked for (by ``Simulator.stop`` or a stopping event).
    X : ndarray, shape (n_states,)
        Continuous state vector.
    flat : FlatValues or None
        The fast path's values while it runs the plan (then the truth), else None.
    stats : dict
        Counters of the run (``ticks``, ``loop_iterations``, the solver's counters).
    """

    def __init__(self, plan):
        self.plan = plan
        self.k = 0
        self.t_stop: float | None = None
        self.stop_requested = False
        self.X = np.zeros(0)
        self.flat: FlatValues | None = None
        self.stats: dict = {"ticks": 0, "loop_iterations": 0}
        self._fanout = None
        self._stale = False

    @property
    def fanout(self) -> list:
        """Per block: ``((dst_inputs, dst_port, src_outputs, src_port), ...)`` of its wires.

        Tuples, one shared empty one for blocks driving nothing: a list per block costs
        about 90 bytes (a tuple of one 48) while the interpreter runs a large plan.
        """
        if self._fanout is None:
            blocks = self.plan.blocks
            fan: list = [()] * len(blocks)
            for w in self.plan.wires:
                entry = (blocks[w.dst].inputs, w.dst_port, blocks[w.src].outputs, w.src_port)
                if fan[w.src]:
                    fan[w.src].append(entry)
                else:
                    fan[w.src] = [entry]
            for i, entries in enumerate(fan):
                if entries:
                    fan[i] = tuple(entries)
            self._fanout = fan
        return self._fanout

    def release_fanout(self) -> None:
        """Drop :attr:`fanout` (about 170 bytes per block) while the generated fast path runs
        the plan; it is built again when asked for."""
        self._fanout = None

    def propagate(self) -> None:
        """Copy every block's outputs to the inputs they drive."""
        blocks = self.plan.blocks
        for w in self.plan.wires:
            blocks[w.dst].inputs[w.dst_port] = blocks[w.src].outputs[w.src_port]

    def drop_flat(self) -> None:
        """The blocks' dicts are the truth again (they were just initialized or restored); a
        new fast path may be attached."""
        self.flat = None
        self._stale = False

    def mark_stale(self) -> None:
        """The flat values moved on: the blocks' dicts no longer show them (their outputs and
        inputs are emptied until :meth:`blocks_current`)."""
        if not self._stale and self.flat is not None:
            self.flat.clear_blocks()
        self._stale = True

    def blocks_current(self) -> None:
        """Make the blocks' dicts show the current values (a no-op unless they are stale)."""
        if self._stale and self.flat is not None:
            self.flat.write_blocks()
            self.propagate()
        self._stale = False

    def value(self, block, port: str) -> np.ndarray:
        """The current value of output ``port`` of ``block`` (whoever holds the values)."""
        if self._stale:
            return self.flat.value(block, port)
        return block.outputs[port]

    # -- snapshots --------------------------------------------------------------------------

    def snapshot(self) -> dict:
        """The values as plain data: ``{"X": ..., "blocks": {path: {"state", "outputs"}}}``.

        Block arrays are values (never written in place: Block rule 8), so references do.
        """
        self.blocks_current()
        plan = self.plan
        return {"k": self.k, "t_stop": self.t_stop, "X": self.X.copy(), "stats": dict(self.stats),
                "blocks": {n: {"state": dict(b.state), "outputs": dict(b.outputs)}
                           for b, n in zip(plan.blocks, plan.names)}}

    def restore(self, tree: dict) -> None:
        """Put back the values of :meth:`snapshot` (its ``X`` has this run's shape)."""
        self.X[:] = np.asarray(tree["X"], dtype=np.float64)
        for b, path in zip(self.plan.blocks, self.plan.names):
            saved = tree["blocks"][path]
            b.state.clear()
            b.state.update(saved.get("state", {}))
            b.next_state.clear()
            b.outputs.clear()
            b.outputs.update(saved.get("outputs", {}))
        self.propagate()
        self._stale = False
        if self.flat is not None:
            self.flat.reload()
        self.k = tree["k"]
        self.t_stop = tree["t_stop"]
        self.stats.update(tree["stats"])
