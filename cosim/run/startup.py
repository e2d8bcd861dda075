"""Initializing a plan's blocks: in execution order, loops solved once, outputs checked."""

from __future__ import annotations

import sys

import numpy as np

from cosim.errors import CosimError, SimulationError
from cosim.run.interpreter import block_in_traceback

__all__ = ["initialize_blocks"]


def initialize_blocks(plan, interp, t0: float) -> None:
    """Initialize every block of ``plan`` at ``t0``, propagating its outputs at once.

    A loop's members are initialized together and the loop solved once from zero tear
    values (or what ``initialize`` set). Every output must then be a float64 array whose
    shape its readers accept.

    Parameters
    ----------
    plan : Plan
    interp : Interpreter
        Its loops and its run state's fan-out are used.
    t0 : float
        Start time (s).
    """
    fanout = interp.state.fanout
    for b in plan.blocks:
        b.outputs.clear()
        b.state.clear()
        b.next_state.clear()
        b.cstate = None
    # Each block's outgoing wires, found once (a scan of every wire per block is quadratic);
    # one shared empty tuple for blocks without (a list per block costs 56 bytes).
    out_wires: list = [()] * len(plan.blocks)
    for w in plan.wires:
        if out_wires[w.src]:
            out_wires[w.src].append(w)
        else:
            out_wires[w.src] = [w]
    done = set()            # members of loops initialized with their loop
    for i, b in enumerate(plan.blocks):
        if done and id(b) in done:
            continue
        lp = interp.loop_of.get(id(b))
        if lp is None:
            _call_init(plan, b, i, t0, compute_outputs=True)
            group = [b]
        else:
            group = [m for m, _, _ in lp.members]
            for m in group:
                _call_init(plan, m, plan.index[plan.path_of[id(m)]], t0, compute_outputs=False)
            for m, p in lp.tears:
                m.outputs.setdefault(p, np.zeros(_tear_shape(plan, m, p)))
            _solve_init_loop(plan, lp, t0)
        for m in group:
            if lp is not None:
                done.add(id(m))
            j = i if lp is None else plan.index[plan.path_of[id(m)]]
            _check_outputs(plan.names[j], m, t0)
            _check_shapes(plan, out_wires[j], t0)
            for w in fanout[j]:
                w[0][w[1]] = w[2][w[3]]


def _call_init(plan, b, i: int, t0: float, compute_outputs: bool) -> None:
    try:
        b.initialize(t0)
        if compute_outputs and len(b.outputs) < len(b.output_names):
            b.output_update(t0, plan.sample_period[i])
    except CosimError as err:
        if isinstance(err, SimulationError) and err.block is not None:
            raise
        raise SimulationError(f"initialize failed: {err}", t=t0, block=plan.names[i]) from err
    except Exception as err:
        raise SimulationError(f"initialize failed: {type(err).__name__}: {err}",
                              t=t0, block=plan.names[i]) from err


def _tear_shape(plan, blk, port: str) -> tuple[int, ...]:
    """First guess of a tear signal's shape: what a reader expects, else a scalar."""
    i = plan.index[plan.path_of[id(blk)]]
    for w in plan.wires:
        if w.src == i and w.src_port == port:
            want = plan.blocks[w.dst].input_shapes.get(w.dst_port)
            if want is not None:
                return tuple(want)
    return (1,)


def _solve_init_loop(plan, lp, t0: float) -> None:
    for m, _, fan in lp.members:
        for w in fan:
            if w[3] in m.outputs:
                w[0][w[1]] = w[2][w[3]]
    try:
        lp(t0, 0.0)
    except CosimError:
        raise
    except Exception as err:
        blk = block_in_traceback(sys.exc_info()[2])
        raise SimulationError(f"initialize failed in {lp.describe()}: {type(err).__name__}: "
                              f"{err}", t=t0, block=plan.path_of.get(id(blk))) from err


def _check_outputs(path: str, b, t0: float) -> None:
    kinds = b.output_kinds
    for p in b.output_names:
        v = b.outputs.get(p)
        if kinds and p in kinds:
            want = str if kinds[p] == "String" else bytes
            if not isinstance(v, np.ndarray) or v.dtype != object or \
                    not all(type(x) is want for x in v.flat):
                raise SimulationError(
                    f"output {path}.{p} is a {kinds[p]} port: it must be an object array of "
                    f"{want.__name__} after initialize, got {v!r}", t=t0, block=path)
            continue
        if not isinstance(v, np.ndarray) or v.dtype != np.float64:
            raise SimulationError(
                f"output {path}.{p} must be a float64 numpy array after initialize, got "
                f"{type(v).__name__ if not isinstance(v, np.ndarray) else v.dtype}; "
                "set it with cosim.model.block.as_signal(value)", t=t0, block=path)


def _check_shapes(plan, wires, t0: float) -> None:
    """Check a block's outputs against the shapes its readers expect (``wires``: the block's
    outgoing wires)."""
    problems = []
    blocks = plan.blocks
    for w in wires:
        src, dst = blocks[w.src], blocks[w.dst]
        want = dst.input_shapes.get(w.dst_port)
        have = src.outputs[w.src_port].shape
        if want is not None and tuple(want) != have:
            problems.append(f"{plan.names[w.src]}.{w.src_port} (shape {have}) -> "
                            f"{plan.names[w.dst]}."
                            f"{w.dst_port} (expects shape {tuple(want)})")
    if problems:
        raise SimulationError("port shapes do not match: " + "; ".join(problems) +
                              "; fix the block parameters or insert a Mux/Demux", t=t0)
