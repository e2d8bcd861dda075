"""Partitioning: which units a model becomes, and the links between their ports.

Every top-level atomic subsystem becomes a unit, and so does every top-level block that can
run as a unit by itself (it has an ``as_unit(name, config)`` method, e.g. an FMU block); the
remaining top-level blocks form one more unit (``"main"``), whose wires to and from the units
become Inport / Outport blocks named ``<block>__<port>``. Runs on an evaluated model.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace

from cosim.config import MAIN_UNIT
from cosim.run.atomic import inner_config, nested_log
from cosim.errors import CompileError
from cosim.compile.flatten import ALL_OUTPUTS, split_ref
from cosim.model.diagram import Inport, Outport, Subsystem
from cosim.model.events import route

__all__ = ["Link", "Partition", "UnitSpec", "partition"]

REST = MAIN_UNIT


@dataclass(frozen=True)
class Link:
    """Output ``src.src_port`` of one unit drives input ``dst.dst_port`` of another."""

    src: str
    src_port: str
    dst: str
    dst_port: str

    def __str__(self) -> str:
        return f"{self.src}.{self.src_port} -> {self.dst}.{self.dst_port}"


@dataclass
class UnitSpec:
    """One unit to create: its diagram and its own configuration.

    ``factory``, when set, makes the unit instead (a block that is a unit by itself);
    ``subsystem`` is then None.
    """

    name: str
    subsystem: Subsystem | None
    config: object
    factory: object = None
    #: The model's parameters and context: what the subsystem's expressions may refer to
    #: (a backend that rebuilds the unit from a model file needs them).
    workspace: dict | None = None


@dataclass
class Partition:
    """The units of a model and the links between them."""

    units: list[UnitSpec]
    links: list[Link]
    #: Central-log keys of unit outputs that a unit logs itself (``"a/y.in"``, its Outport's
    #: input) -> the model's key of that port (``"a.y"``): selected ports no top-level block
    #: receives; None for the other ports (hidden: a unit served from its own file logs them).
    keys: dict[str, str | None] = field(default_factory=dict)


def partition(model, config) -> Partition:
    """Split an evaluated ``model`` into units for ``config`` (its ``cosim`` is dropped)."""
    base = replace(config, cosim=None, log=None)
    cosim = config.cosim
    atomic = {b.name: b for b in model.blocks
              if (isinstance(b, Subsystem) and b.atomic) or hasattr(b, "as_unit")}
    if REST in atomic:
        raise CompileError([f"an atomic subsystem is named {REST!r}, the name of the unit "
                            "that holds the other top-level blocks; rename it"], model.name)
    rest = Subsystem(REST)
    rest.blocks = [b for b in model.blocks if b.name not in atomic]
    rest.context = {}
    # The model's events naming blocks inside a unit ("unit/block") are that unit's.
    # (Those of its virtual subsystems, which the top-level unit holds, its run lifts.)
    rest.events, routed, problems = route(list(getattr(model, "events", ())),
                                          {n for n, b in atomic.items()
                                           if isinstance(b, Subsystem)})
    links = []
    outs: dict[str, str] = {}
    ins: dict[str, str] = {}
    for c in model.connections:
        src, dst = split_ref(c.src), split_ref(c.dst)
        if src is None or dst is None:
            problems.append(f"connection {c}: write 'block.port'")
            continue
        s_at, d_at = src[0] in atomic, dst[0] in atomic
        if not s_at and not d_at:
            rest.connections.append(c)
            continue
        if s_at:
            s_unit, s_port = src
        else:
            s_unit, s_port = REST, outs.get(c.src)
            if s_port is None:
                s_port = outs[c.src] = f"{src[0]}__{src[1]}"
                rest.add(Outport(s_port))
                rest.connect(c.src, f"{s_port}.in")
        if d_at:
            links.append(Link(s_unit, s_port, dst[0], dst[1]))
        else:
            port = ins.get(c.src)
            if port is None:
                port = ins[c.src] = f"{src[0]}__{src[1]}"
                rest.add(Inport(port))
                links.append(Link(s_unit, s_port, REST, port))
            rest.connect(f"{port}.out", c.dst)
    if problems:
        raise CompileError(problems, model.name)
    units, keys = [], {}
    workspace = {**getattr(model, "parameters", {}), **model.context}
    for name, b in atomic.items():
        if isinstance(b, Subsystem):
            own = _own_ports(config.log, name, b)
            # A unit served from its own file logs every port (it cannot know the master's
            # selection: cluster.unit_files.units_of): the ports not shown here are hidden.
            keys.update((f"{name}/{p}.in", f"{name}.{p}" if p in own else None)
                        for p in b.output_names)
            # What the top-level unit received of them is its view (extrapolated between
            # macro points), not the port: hidden. (A unit another team serves logs its
            # ports too when its file selects nothing: cluster.unit_files.units_of.)
            keys.update((f"{name}.{p}", None) for p in own if f"{name}.{p}" in ins)
            log = _unit_log(config.log, name, atomic)
            log = (ALL_OUTPUTS,) if log is None else log
            log += tuple(f"{p}.in" for p in own)
            cfg = replace(inner_config(b, base), log=log)
            if name in routed:
                b = copy.copy(b)            # the model's subsystem keeps its own events
                b.events = list(b.events) + routed[name]
            units.append(UnitSpec(name, b, cfg, workspace=workspace))
        else:
            # A block that is a unit by itself (an FMU) logs the selection's signals under
            # its name ("f/fmu.y"), and the ports named as in the monolithic run ("f.y").
            log = nested_log(config.log, name)
            if log is not None and ALL_OUTPUTS not in log:
                log += tuple(f"fmu.{p}" for p in b.output_names if f"{name}.{p}" in config.log)
            cfg = replace(base, log=log)
            units.append(UnitSpec(name, None, cfg,
                                  factory=lambda b=b, name=name, cfg=cfg: b.as_unit(name, cfg)))
    if rest.blocks:
        log = _unit_log(config.log, REST, atomic)
        units.append(UnitSpec(REST, rest, replace(base, log=(ALL_OUTPUTS,) if log is None
                                                  else log), workspace=workspace))
    return Partition(units, links, keys)


def _own_ports(log, unit: str, sub: Subsystem) -> list[str]:
    """Output ports of atomic unit ``unit`` logged under ``log`` (as ``"unit.port"``, or all of
    them for None / ``"*"``): the unit logs them itself, as its Outport's input, so that the
    key ``unit.port`` is the unit's own output as in the monolithic run (not what a reader
    saw of it between macro points)."""
    every = log is None or ALL_OUTPUTS in log
    return [p for p in sub.output_names if every or f"{unit}.{p}" in log]


def _unit_log(log, unit: str, atomic) -> tuple[str, ...] | None:
    """The signals unit ``unit`` logs of the model's selection ``log`` (None: all), in the
    unit's own names: ``"a/x.out"`` is ``"x.out"`` of unit ``a``; an atomic unit's port
    ``"a.y"`` is logged by that unit (:func:`_own_ports`); the rest is the top-level
    unit's."""
    if log is None:
        return None
    if unit != REST:
        return nested_log(log, unit)
    mine = []
    for k in log:
        head = k.partition("/")[0] if "/" in k else k.rpartition(".")[0]
        if head not in atomic:
            mine.append(k)
    return tuple(mine)
