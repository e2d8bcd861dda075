"""The structural fingerprint of a plan: everything its generated source depends on.

Parameters are data (:mod:`cosim.fastpath.params`): two plans differing only in parameter
values generate the same source. The fingerprint names what the emitter reads besides those
values — kernel templates, wiring and slots, tasks and sample periods, log selection, base
step and start time, solver tableau, strategy and its groups — so a run of a structure seen
before finds its source and code without writing them (:mod:`cosim.fastpath.cache`). It is a
tuple of a few small tuples per block: far cheaper to build than the source.
"""

from __future__ import annotations

import hashlib
import io
import pickle

from cosim.fastpath.layout import Singletons
from cosim.fastpath.nested import Nested

__all__ = ["DIGEST_BLOCKS", "fingerprint"]

#: Plans of more blocks are keyed by a digest of their fingerprint: the fingerprint itself
#: takes about 0.5 kB per block, as much as the rest of a plan's generated code and tables
#: (a cache of 100,000-block plans would hold hundreds of megabytes of keys); digesting it
#: costs about half what building it does (1.1 ms at 1,000 blocks).
DIGEST_BLOCKS = 100


def _spelling(key: tuple) -> bytes:
    """``key`` (tuples of strings, ints and bools) as bytes that only equal keys share.

    Pickle spells these unambiguously and 3.5x faster than their repr; without its memo
    (``fast``), so shared objects do not change the spelling of equal values.
    """
    buf = io.BytesIO()
    pickler = pickle.Pickler(buf, 5)
    pickler.fast = True
    pickler.dump(key)
    return buf.getvalue()


def _template(kern) -> tuple:
    """A lifted kernel's expressions and parameter names (not their values); an inlined
    atomic subsystem's is its inner plan's fingerprint."""
    if isinstance(kern, Nested):
        return ("nested", kern.key, kern.inputs)
    return (tuple(kern.outputs.items()), tuple(kern.state.items()), tuple(kern.derivatives),
            tuple(kern.cstate), tuple(kern.params), kern.live is not None,
            tuple(kern.held.items()), tuple(kern.surfaces))


def fingerprint(plan, config, store, layout, kernels, tab, strategy, n_c: int,
                chunk: int) -> tuple | bytes:
    """The key of ``plan``'s generated source: equal for plans whose emitted source is equal.

    Parameters
    ----------
    plan : Plan
    config : SimulationConfig
        Base step ``dt`` and start time ``t0`` (spelled in the source).
    store : LogStore
        Its ``refs``: the logged values.
    layout : Layout
    kernels : list of Kernel
        Each block's lifted kernel, in plan order.
    tab : tuple or None
        The solver's tableau.
    strategy : Strategy
        Its class, label (the plan's name) and groups.
    n_c : int
        Number of continuous-state components.
    chunk : int
        Statements per generated function of a large plan.

    Returns
    -------
    tuple or bytes
        The fingerprint, or its digest for a plan of more than :data:`DIGEST_BLOCKS` blocks.
    """
    # Blocks spelt alike share one lifted kernel (:func:`~cosim.fastpath.params.lift`), and
    # then one template here (not five tuples per block).
    templates: dict[int, tuple] = {}
    for k in kernels:
        if id(k) not in templates:
            templates[id(k)] = _template(k)
    # Every block alone is spelt by the count (not a tuple per block).
    groups = strategy.groups
    groups = ("singletons", len(groups)) if isinstance(groups, Singletons) \
        else tuple(map(tuple, groups))
    # Floats the source spells are keyed by their spelling: 0.0 == -0.0 and 1 == 1.0, yet
    # they are spelt (and may compute) differently.
    key = (type(strategy).__name__, strategy.label, chunk, n_c, repr(config.t0),
           repr(config.dt), repr(tab), groups,
           tuple(templates[id(k)] for k in kernels), tuple(map(repr, plan.sample_period)),
           tuple(plan.task_of), tuple(plan.continuous),
           tuple((t.period, t.offset) for t in plan.tasks),
           tuple(layout.signal_at.items()), tuple(layout.state_at.items()),
           tuple(layout.cont_at.items()), tuple(layout.driver.items()), tuple(store.refs))
    if len(plan.blocks) > DIGEST_BLOCKS:
        return hashlib.blake2b(_spelling(key), digest_size=20).digest()
    return key
