"""Building a large plan without the cyclic garbage collector."""

from __future__ import annotations

import gc
from contextlib import contextmanager

__all__ = ["nogc"]


@contextmanager
def nogc(freeze: bool = False):
    """Run a block with the cyclic garbage collector off.

    Compiling, initializing and generating code for a plan of 100,000 blocks allocates
    millions of container objects that all survive (blocks' dicts, arrays, wires, kernels,
    source lines, AST nodes). Each allocation burst triggers collections that scan every
    object alive — the whole model, again and again — and find nothing: collected, they
    would make the build's cost grow faster than the model.

    Parameters
    ----------
    freeze : bool
        Afterwards, move every object alive into the collector's permanent generation
        (``gc.freeze``): the run's own allocations (a tick of the interpreter replaces an
        array per block) then trigger collections that no longer scan the model (a full
        scan of a 100,000-block model takes about half a second). The price: cycles among
        those objects are not collected if the model is dropped, until ``gc.unfreeze()``.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if freeze:
            gc.freeze()
        if was:
            gc.enable()
