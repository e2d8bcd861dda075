"""Choose how a plan runs fast: the vector strategy, the scalar one, or not at all."""

from __future__ import annotations

from cosim.fastpath import emitter, nested, vector
from cosim.fastpath.layout import Layout, kernels_of
from cosim.fastpath.runtime import FastPath, Unsupported
from cosim.fastpath.scalar import Scalar

__all__ = ["build"]


def build(plan, config, state, store, solver, cslices, release: bool = False) -> FastPath | None:
    """The fast path of an initialized plan, or None when the interpreter must run it.

    Every block must return a :class:`~cosim.model.block.Kernel` and every signal and state
    must be a scalar; continuous state needs a fixed-step explicit Runge–Kutta solver. Plans
    of many identical blocks take the vector strategy (one numpy operation per group of
    blocks), the others the scalar one (one statement per block over local floats).

    Parameters
    ----------
    plan : Plan
    config : SimulationConfig
        Base step and start time.
    state : RunState
        Run state whose values the step function will own (initialized).
    store : LogStore
        Log store the step function appends to.
    solver : Solver or None
        The continuous solver (its tableau is inlined).
    cslices : list of (Block, slice)
        Each continuous block's slice of ``state.X``.
    release : bool
        The caller runs the fast path next: the blocks' values may move to it before its code
        is written (see :func:`~cosim.fastpath.emitter.build`).
    """
    tab = None
    if state.X.size:
        tab = emitter.tableau(solver)
        if tab is None:
            return None
    kernels = kernels_of(plan)
    if kernels is None:
        return None
    n_c = state.X.size
    # An atomic subsystem inlined is a block of its own (see cosim.fastpath.nested).
    inlines = any(isinstance(kern, nested.Nested) for kern in kernels)
    groups = None if inlines else vector.worthwhile(plan, kernels)
    if groups is not None:
        strategy = vector.Vector(plan, groups, n_c, len(tab[1]) + 1 if tab else 0)
        layout = Layout(plan, cslices, strategy.groups)
    else:
        layout = Layout(plan, cslices)
        strategy = Scalar(plan, layout, n_c)
    try:
        return emitter.build(plan, config, state, store, solver, layout, kernels, tab, strategy,
                             release)
    except Unsupported:
        return None
