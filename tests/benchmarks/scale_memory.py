"""Memory a scale model costs, measured in a fresh process (issue 17, item 1).

Run as ``python -m tests.benchmarks.scale_memory SHAPE N MODE``; prints one JSON line.
A fresh process, so nothing a previous measurement left behind is counted or shared (the
fast path's code cache would otherwise hold the code already, and free lists the memory).
What is measured is what a user pays to build the model, compile it, initialize and run its
first ten ticks (the switch to generated code included), everything still held then,
after a small model of the same shape has run (so modules imported on first use are not
counted):

- ``MODE = trace``: bytes allocated and still held (tracemalloc: Python objects and numpy
  buffers), and the peak during the same, from just before the model is built;
- ``MODE = rss``: growth of the resident set size over the same (``/proc/self/statm``),
  which adds the allocator's overhead and fragmentation; and the peak RSS growth;
- ``MODE = interp``: as ``rss``, the run on the interpreter only (``fast=False``): what the
  model, its plan and run state cost without generated code.
"""

from __future__ import annotations

import gc
import json
import os
import resource
import sys


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _run(shape: str, n: int, fast: bool = True):
    from cosim.run.simulator import LAZY_TICKS
    from tests.benchmarks.scale_models import last
    from tests.benchmarks.test_bench_scale import SHAPES, build
    model = SHAPES[shape](n)
    sim = build(model, fast)
    sim.initialize()
    sim.advance_to(LAZY_TICKS + 1)
    assert (sim.fast_path is not None) is fast
    assert last(model)
    return model, sim


def measure(shape: str, n: int, mode: str) -> dict:
    """``{"blocks", "held", "peak"}`` in bytes (see the module docstring for ``mode``)."""
    import tracemalloc

    # A small model of the same shape first: modules imported on first use are not the
    # model's (its code is another structure's: nothing of it is reused).
    fast = mode != "interp"
    _run(shape, 300, fast)
    gc.collect()
    if mode == "trace":
        tracemalloc.start()
        model, sim = _run(shape, n)
        gc.collect()
        held, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    else:
        base = _rss()
        base_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        model, sim = _run(shape, n, fast)
        gc.collect()
        held = _rss() - base
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - base_peak
    return {"blocks": len(model.blocks), "held": held, "peak": peak}


if __name__ == "__main__":
    print(json.dumps(measure(sys.argv[1], int(sys.argv[2]), sys.argv[3])))
