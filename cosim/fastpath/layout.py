"""Whether a plan can run on the fast path, and where each value sits in the flat arrays."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cosim.fastpath import nested
from cosim.fastpath.params import lift
from cosim.fastpath.runtime import Unsupported

__all__ = ["Layout", "Singletons", "kernels_of"]


class Singletons(Sequence):
    """The groups ``[0], [1], ..., [n - 1]``: every block of a plan alone (the scalar
    strategy's groups), each made when it is read (a list of 100,000 one-element lists
    holds about 100 bytes per block while the code is written).

    Parameters
    ----------
    positions : tuple of int
        The plan's :attr:`~cosim.compile.plan.Plan.positions` (``0 .. n - 1``).
    """

    __slots__ = ("positions",)

    def __init__(self, positions: tuple[int, ...]):
        self.positions = positions

    def __len__(self) -> int:
        return len(self.positions)

    def __getitem__(self, i):
        r = self.positions[i]
        return [r] if isinstance(r, int) else [[j] for j in r]

    def __iter__(self):
        return ([i] for i in self.positions)


def _scalar(a) -> bool:
    return isinstance(a, np.ndarray) and a.shape == (1,) and a.dtype == np.float64


def kernels_of(plan, given: dict | None = None) -> list | None:
    """Every block's kernel with its float literals lifted into parameters (see
    :func:`~cosim.fastpath.params.lift`), or None when a block has none or a non-scalar
    signal or state. An atomic subsystem's is its :class:`~cosim.fastpath.nested.Nested`
    kernel (its inner plan inlined).

    Blocks are initialized: their outputs, states and continuous states give the shapes.
    ``given`` maps block indices to kernels to take instead of asking the block.
    """
    kernels = []
    for i, b in enumerate(plan.blocks):
        if b.nests_plan:
            kern = nested.kernel(b)
            if kern is None or not all(_scalar(b.outputs.get(p)) for p in b.output_names):
                return None
            kernels.append(kern)
            continue
        kern = given[i] if given and i in given else b.kernel()
        if kern is None:
            return None
        if not all(_scalar(b.outputs.get(p)) for p in b.output_names):
            return None
        if not all(_scalar(v) for v in b.state.values()) or set(kern.state) != set(b.state):
            return None
        if set(kern.outputs) != set(b.output_names):
            return None
        n_c = b.cstate.size if b.has_derivative else 0
        if len(kern.derivatives) != n_c or len(kern.cstate) not in (0, n_c):
            return None
        kernels.append(lift(kern))
    return kernels


class Layout:
    """Flat slots of a plan's signals, discrete states and continuous-state components.

    Parameters
    ----------
    plan : Plan
    cslices : list of (Block, slice)
        Each continuous block's slice of the continuous state vector.
    groups : list of list of int, optional
        Blocks whose values are read and written together (the vector strategy's groups):
        each group's values of one port (or state) take consecutive slots, in member order,
        so the generated code names them by a slice instead of gathering them through an
        index array. Default: every block alone, in plan order.

    Attributes
    ----------
    signal_slots, state_slots : list of (Block, str)
        ``(block, output port)`` per signal slot; ``(block, state name)`` per state slot.
    signal_at, state_at : dict
        ``(block index, port or state name) -> slot``.
    cont_at : dict
        ``(block index, str(component)) -> index`` into the continuous state vector.
    driver : dict
        ``(block index, input port) -> signal slot`` of the output driving it.
    """

    def __init__(self, plan, cslices, groups: list[list[int]] | None = None):
        blocks = plan.blocks
        if groups is None:
            groups = Singletons(plan.positions)
        self.signal_slots, self.signal_at = [], {}
        self.state_slots, self.state_at = [], {}
        for g in groups:
            # Members of a group share a kernel template: the same ports and states.
            for p in blocks[g[0]].output_names:
                for i in g:
                    self.signal_at[(i, p)] = len(self.signal_slots)
                    self.signal_slots.append((blocks[i], p))
            for n in blocks[g[0]].state:
                for i in g:
                    self.state_at[(i, n)] = len(self.state_slots)
                    self.state_slots.append((blocks[i], n))
        self.cont_at = {}
        # Not the plan's ``path_of``: built here, it would stay with the plan (85 bytes a
        # block) after the code is written.
        index = {id(blocks[i]): i for i in plan.positions} if cslices else {}
        for b, sl in cslices:
            i = index[id(b)]
            for j in range(sl.stop - sl.start):
                self.cont_at[(i, str(j))] = sl.start + j
        self.driver = {(w.dst, w.dst_port): self.signal_at[(w.src, w.src_port)]
                       for w in plan.wires}

    def input_slot(self, plan, i: int, port: str) -> int:
        """Signal slot driving input ``port`` of block ``i``."""
        if (i, port) not in self.driver:
            raise Unsupported(f"{plan.names[i]}: kernel reads unconnected input {port}")
        return self.driver[(i, port)]

    def log_slot(self, plan, i: int, port: str) -> int:
        """Signal slot of a logged port (an output, or a recorded input)."""
        if port in plan.blocks[i].output_names:
            return self.signal_at[(i, port)]
        return self.driver[(i, port)]
