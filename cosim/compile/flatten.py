"""Flattening: a hierarchical model becomes a flat list of blocks with path names and wires.

Virtual subsystems dissolve: their Inport/Outport blocks and Goto/From pairs are *virtual
endpoints* that wires pass through, so the flat model holds exactly the blocks of the same model
written flat (bit-identical results) under path names such as ``"plant/spring"``. Atomic
subsystems stay one block (:class:`~cosim.run.atomic.AtomicSubsystem`). Every problem is collected.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from cosim.model.block import is_deferred
from cosim.model.diagram import Diagram, From, Goto, Inport, Outport, Reference, Subsystem

__all__ = ["ALL_OUTPUTS", "Flat", "flatten", "split_ref"]

#: In a log selection, every block output of the plan (``("*", "scope.in")``: them and an input).
ALL_OUTPUTS = "*"


def split_ref(ref: str) -> tuple[str, str] | None:
    """Split ``"block.port"`` into its parts, or return None if it is malformed."""
    if not isinstance(ref, str) or ref.count(".") < 1:
        return None
    block, _, port = ref.rpartition(".")
    # Interned: a plan keeps the port name of every wire, and a model has few distinct ones
    # (100,000 wires would otherwise hold 200,000 copies of "in" and "out").
    return (block, sys.intern(port)) if block and port else None


@dataclass
class Flat:
    """A flattened model.

    Attributes
    ----------
    paths : list of str
        Path name of each block (``"sub/inner"``), in model order.
    blocks : list of Block
        The blocks (atomic subsystems as one block each).
    wires : list of (str, str, str, str)
        ``(src_path, src_port, dst_path, dst_port)`` between real blocks.
    problems : list of str
        Everything wrong that flattening found.
    attempted : set of (str, str)
        Inputs whose wire is broken (already reported), so they are not reported again as
        unconnected.
    virtual : dict of str to str
        Only with ``flatten(model, virtual=True)``: each port of a virtual subsystem
        (``"plant.y"``, inputs and outputs) -> the real block output whose signal it carries
        (``"plant/lag.out"``), which is what runs log; ports without a driver left out.
    """

    paths: list
    blocks: list
    wires: list
    problems: list
    attempted: set
    virtual: dict = field(default_factory=dict)


def _join(prefix: str, name: str) -> str:
    return f"{prefix}/{name}" if prefix else name


def flatten(model: Diagram, virtual: bool = False) -> Flat:
    """Flatten ``model`` (evaluated: no Reference left, no deferred block); with ``virtual``,
    also say which signal each virtual subsystem port carries (:attr:`Flat.virtual`: kept
    out of compilation, which does not need it, for the memory of large models)."""
    paths, blocks, problems = [], [], []
    edges = []          # (src endpoint, dst endpoint, where) ; endpoints are tuples
    gotos = []          # (diagram path, Goto, block path)
    froms = []          # (diagram path, From, block path)
    seen_paths: dict[str, object] = {}
    attempted: set = set()

    def walk(d: Diagram, prefix: str, virtual: bool) -> None:
        by_name = {}
        for b in d.blocks:
            if b.name in by_name:
                problems.append(f"two blocks are named {_join(prefix, b.name)!r} "
                                f"({type(by_name[b.name]).__name__} and {type(b).__name__}); "
                                "block names must be unique in their diagram")
                continue
            by_name[b.name] = b
            path = _join(prefix, b.name)
            if isinstance(b, Reference):
                problems.append(f"{path}: library reference {b.source!r} was not evaluated")
            elif isinstance(b, Subsystem) and not b.atomic:
                walk(b, path, True)
            elif isinstance(b, Subsystem):
                from cosim.run.atomic import AtomicSubsystem
                _add(path, AtomicSubsystem.of(b))
            elif is_deferred(b):
                problems.append(f"{path}: its parameters are expressions that were not evaluated"
                                " (cosim.model.evaluate.evaluate(model) does it; Simulator runs it)")
            elif isinstance(b, Goto):
                gotos.append((prefix, b, path))
            elif isinstance(b, From):
                froms.append((prefix, b, path))
            elif virtual and isinstance(b, (Inport, Outport)):
                pass
            else:
                _add(path, b)
        for c in d.connections:
            src = _endpoint(d, by_name, prefix, virtual, c.src, "output", c)
            dst = _endpoint(d, by_name, prefix, virtual, c.dst, "input", c)
            if src is not None and dst is not None:
                edges.append((src, dst, c))
            elif dst is not None:
                attempted.add(dst[1:3] if dst[0] == "blk" else dst)

    def _add(path, b):
        if id(b) in seen_paths:
            problems.append(f"block object {path!r} is also used as {seen_paths[id(b)]!r}; "
                            "each place needs its own block instance")
            return
        seen_paths[id(b)] = path
        paths.append(path)
        blocks.append(b)

    def _endpoint(d, by_name, prefix, virtual, ref, kind, c):
        parts = split_ref(ref)

        def where() -> str:     # built only for a problem (not for each of 100,000 wires)
            return f"connection {c}" + (f" in {prefix!r}" if prefix else "")

        if parts is None:
            problems.append(f"{where()}: {ref!r} is not of the form 'block.port'")
            return None
        bname, port = parts
        b = by_name.get(bname)
        if b is None:
            known = ", ".join(sorted(by_name)) or "(none)"
            problems.append(f"{where()}: no block named {bname!r} (blocks: {known})")
            return None
        path = _join(prefix, bname)
        if isinstance(b, Reference) or is_deferred(b):
            return None                 # (the block's own problem is reported)
        names_out = b.output_names if not isinstance(b, (Goto,)) else ()
        names_in = b.input_names
        if isinstance(b, Subsystem) and not b.atomic:
            names = names_out if kind == "output" else names_in
            if port not in names:
                problems.append(f"{where()}: subsystem {path} has no {kind} {port!r} "
                                f"({kind}s: {', '.join(names) or '(none)'})")
                return None
            return ("sub", path, port, kind)
        if virtual and isinstance(b, Inport) and kind == "output" and port == "out":
            return ("sub", prefix, bname, "input")
        if virtual and isinstance(b, Outport) and kind == "input" and port == "in":
            return ("sub", prefix, bname, "output")
        if isinstance(b, From) and kind == "output" and port == "out":
            return ("from", path)
        if isinstance(b, Goto) and kind == "input" and port == "in":
            return ("goto", path)
        names = names_out if kind == "output" else names_in
        if port not in names:
            other = names_in if kind == "output" else names_out
            hint = (f"; {port!r} is an {'input' if kind == 'output' else 'output'}, so the wire "
                    "points the wrong way") if port in other else ""
            problems.append(f"{where()}: {path} has no {kind} {port!r} "
                            f"({kind}s: {', '.join(names) or '(none)'}){hint}")
            return None
        return ("blk", path, port)

    walk(model, "", False)

    # Goto/From: each From reads the innermost visible Goto with its tag.
    for fprefix, f, fpath in froms:
        cands = []
        for gprefix, g, gpath in gotos:
            if g.tag != f.tag:
                continue
            visible = (g.visibility == "global" or gprefix == fprefix or
                       (g.visibility == "scoped" and (gprefix == "" or
                                                      fprefix.startswith(gprefix + "/"))))
            if visible:
                cands.append((len(gprefix), gpath, g))
        if not cands:
            problems.append(f"From {fpath} (tag {f.tag!r}) has no visible Goto; add a Goto with "
                            "that tag in the same diagram, or make one 'scoped'/'global'")
            attempted.add(("from", fpath))
            continue
        cands.sort(reverse=True)
        if len(cands) > 1 and cands[0][0] == cands[1][0]:
            problems.append(f"From {fpath}: tag {f.tag!r} is sent by several Gotos at the same "
                            f"level ({cands[0][1]}, {cands[1][1]})")
        edges.append((("goto", cands[0][1]), ("from", fpath), f"{cands[0][1]} ~> {fpath}"))

    # Resolve virtual endpoints: each has exactly one driver; real wires follow the chain.
    driver: dict = {}
    for src, dst, where in edges:
        if dst[0] == "blk":
            continue
        if dst in driver:
            problems.append(f"{_describe(dst)} is driven twice ({_describe(driver[dst][0])} and "
                            f"{_describe(src)}); it takes exactly one wire")
        else:
            driver[dst] = (src, where)
    wires = []
    for src, dst, where in edges:
        if dst[0] != "blk":
            continue
        cur, hops = src, 0
        while cur[0] != "blk":
            # A subsystem port is the same endpoint seen from both sides, so the driver of a
            # virtual source is stored under the very same key.
            up = driver.get(cur)
            if up is None and cur in attempted:
                attempted.add((dst[1], dst[2]))
                cur = None
                break
            if up is None:
                problems.append(f"{_describe(cur)} is not connected, but "
                                f"{dst[1]}.{dst[2]} reads it")
                cur = None
                break
            cur, hops = up[0], hops + 1
            if hops > 10000:
                problems.append(f"virtual ports loop on themselves near {_describe(src)}")
                cur = None
                break
        if cur is not None:
            wires.append((cur[1], cur[2], dst[1], dst[2]))
    ports = {}
    if virtual:
        for ep in driver:
            if ep[0] == "sub" and (src := _source(driver, ep)) is not None:
                ports[f"{ep[1]}.{ep[2]}"] = f"{src[1]}.{src[2]}"
    return Flat(paths, blocks, wires, problems, attempted, ports)


def _source(driver: dict, ep):
    """The real block output that virtual endpoint ``ep`` carries, or None (a chain that
    ends unconnected or loops: flattening reports those where a block reads them)."""
    for _ in range(10001):
        up = driver.get(ep)
        if up is None:
            return None
        ep = up[0]
        if ep[0] == "blk":
            return ep
    return None


def _describe(ep) -> str:
    if ep[0] == "sub":
        return f"subsystem port {ep[1]}.{ep[2]}"
    if ep[0] == "goto":
        return f"Goto {ep[1]}"
    if ep[0] == "from":
        return f"From {ep[1]}"
    return f"{ep[1]}.{ep[2]}"
