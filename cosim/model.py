"""A diagram as written by the user: blocks and the connections between their ports."""

from __future__ import annotations

from dataclasses import dataclass

from cosim.block import Block
from cosim.errors import ModelError

__all__ = ["Connection", "Model"]


@dataclass(frozen=True)
class Connection:
    """A wire from an output port to an input port, both written ``"block.port"``."""

    src: str
    dst: str

    def __str__(self) -> str:
        return f"{self.src} -> {self.dst}"


class Model:
    """A block diagram.

    Problems (unknown blocks or ports, duplicate names, undriven inputs, loops) are not raised
    while the model is built: compilation collects them all into one
    :class:`~cosim.errors.CompileError`.

    Parameters
    ----------
    name : str
        Model name, used in messages and logs.

    Examples
    --------
    >>> m = Model("demo")
    >>> m.add(Sine("src", amplitude=1.0, frequency=0.5))
    >>> m.add(Gain("g", 2.0))
    >>> m.connect("src.out", "g.in")
    """

    def __init__(self, name: str = "model"):
        self.name = name
        self.blocks: list[Block] = []
        self.connections: list[Connection] = []
        self.events: list = []

    def add(self, *blocks: Block) -> Block:
        """Add one or more blocks; returns the last one added."""
        for b in blocks:
            if not isinstance(b, Block):
                raise ModelError(f"model {self.name!r}: add() takes blocks, got {b!r}")
            self.blocks.append(b)
        return blocks[-1] if blocks else None

    def connect(self, src: str, *dsts: str) -> None:
        """Wire output ``src`` (``"block.port"``) to one or more inputs (fan-out allowed)."""
        if not dsts:
            raise ModelError(f"model {self.name!r}: connect({src!r}) needs at least one "
                             "destination 'block.port'")
        for d in dsts:
            self.connections.append(Connection(src, d))

    def add_event(self, *events) -> None:
        """Add zero-crossing or scheduled events (:mod:`cosim.events`)."""
        self.events.extend(events)

    def __getitem__(self, name: str) -> Block:
        for b in self.blocks:
            if b.name == name:
                return b
        raise KeyError(f"model {self.name!r} has no block {name!r}")

    def __contains__(self, name: str) -> bool:
        return any(b.name == name for b in self.blocks)

    def __repr__(self) -> str:
        return f"Model({self.name!r}, {len(self.blocks)} blocks, {len(self.connections)} wires)"
