"""A model as the dashboard draws it: its blocks, subsystems and wires as plain data.

The page lays the diagram out itself (dagre, shipped in ``static/``); this module only says
what there is: every block and subsystem with its path, type, sample time and feedthrough,
the diagram it sits in, the unit it runs in, and every wire with the diagram it belongs to.
Co-simulation facts (each unit's step, solver, which outputs feed through from which inputs,
the algebraic couplings) come from a master's unit descriptions when there is one.
"""

from __future__ import annotations

from cosim.master.partition import REST
from cosim.model.diagram import Diagram, Inport, Outport, Reference, Subsystem

__all__ = ["model_diagram", "unit_facts"]


def _sample_time(block) -> str:
    st = getattr(block, "sample_time", None)
    if st is None:
        return "inherited"
    if isinstance(st, tuple):
        return f"{st[0]:g} s (offset {st[1]:g} s)"
    return f"{st:g} s" if st else "continuous"


def _unit_of(block, top: bool, parent_unit: str | None) -> str | None:
    if not top:
        return parent_unit
    if (isinstance(block, Subsystem) and block.atomic) or hasattr(block, "as_unit"):
        return block.name
    return REST


def _node(block, path: str, parent: str | None, unit: str | None) -> dict:
    if isinstance(block, Subsystem):
        kind = "unit" if block.atomic and parent is None else "subsystem"
        info = {"atomic": block.atomic, "blocks": len(block.blocks)}
        if block.atomic:
            info["dt"] = block.dt
            info["solver"] = block.solver
        return {"id": path, "name": block.name, "parent": parent, "kind": kind,
                "type": "Subsystem" + (" (atomic)" if block.atomic else ""), "unit": unit,
                "inputs": list(block.input_names), "outputs": list(block.output_names),
                **info}
    if isinstance(block, Reference):
        return {"id": path, "name": block.name, "parent": parent, "kind": "block",
                "type": f"Reference {getattr(block, 'ref', '')}".strip(), "unit": unit}
    kind = "inport" if isinstance(block, Inport) else \
        "outport" if isinstance(block, Outport) else "block"
    return {"id": path, "name": block.name, "parent": parent, "kind": kind,
            "type": type(block).__name__, "unit": unit,
            "sample_time": _sample_time(block),
            "feedthrough": bool(getattr(block, "direct_feedthrough", True)),
            "inputs": list(getattr(block, "input_names", ()) or ()),
            "outputs": list(getattr(block, "output_names", ()) or ())}


def _walk(diagram: Diagram, prefix: str, parent: str | None, unit: str | None,
          nodes: list, edges: list) -> None:
    for b in diagram.blocks:
        path = prefix + b.name
        own_unit = _unit_of(b, parent is None, unit)
        nodes.append(_node(b, path, parent, own_unit))
        if isinstance(b, Diagram):
            _walk(b, path + "/", path, own_unit, nodes, edges)
    for c in diagram.connections:
        src, _, sport = c.src.rpartition(".")
        dst, _, dport = c.dst.rpartition(".")
        edges.append({"src": prefix + src, "sport": sport, "dst": prefix + dst,
                      "dport": dport, "parent": parent})


def model_diagram(model) -> dict:
    """The blocks and wires of ``model`` (hierarchical, as written) as JSON-ready data.

    Returns
    -------
    dict
        ``name``; ``nodes``: one dict per block or subsystem (``id`` its path ``"a/b/x"``,
        ``name``, ``parent`` the path of its subsystem or None, ``kind`` one of ``unit``
        (a top-level atomic subsystem), ``subsystem``, ``block``, ``inport``, ``outport``,
        ``type``, ``unit`` the co-simulation unit it runs in, ``sample_time`` and
        ``feedthrough`` for blocks, ``dt`` / ``solver`` for atomic subsystems); ``edges``:
        one dict per wire (``src``/``dst`` node paths, ``sport``/``dport`` port names,
        ``parent`` the subsystem holding the wire or None).
    """
    nodes: list[dict] = []
    edges: list[dict] = []
    _walk(model, "", None, None, nodes, edges)
    return {"name": model.name, "nodes": nodes, "edges": edges}


def unit_facts(master) -> dict:
    """What an initialized master knows of its units, as JSON-ready data.

    Returns
    -------
    dict
        ``units``: unit -> ``dt`` (s; 0: any step), ``inputs`` / ``outputs`` (port names),
        ``feedthrough`` (output -> the inputs it depends on within a macro step);
        ``couplings``: the algebraic couplings (lists of units) the master iterates;
        ``links``: ``[src, src_port, dst, dst_port]`` of every link between units.
    """
    units = {}
    for u, d in master.desc.items():
        units[u] = {"dt": d.dt, "inputs": [p.name for p in d.inputs],
                    "outputs": [p.name for p in d.outputs],
                    "feedthrough": {o: list(ins) for o, ins in d.feedthrough if ins}}
    return {"units": units, "couplings": [list(g) for g in master.couplings],
            "links": [[ln.src, ln.src_port, ln.dst, ln.dst_port] for ln in master.links]}
