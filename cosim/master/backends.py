"""Where units run: the registry of backends, and the in-process backend.

Backends are registered as package entry points in the group ``cosim.backends`` (name ->
``module:class``, see ``pyproject.toml``): ``local`` here, ``ray``, ``zmq`` and ``remote`` in
the ``cluster`` package. A backend's module is imported only when it is chosen, so
``import cosim`` never imports ray or zmq, and ``cosim`` never imports ``cluster``.
"""

from __future__ import annotations

from functools import lru_cache
from importlib.metadata import EntryPoint, entry_points

from cosim.errors import ModelError
from cosim.master.proxy import Backend, Proxy

__all__ = ["GROUP", "LocalBackend", "LocalProxy", "backend_names", "get_backend",
           "process_groups"]

#: Entry point group of the backends.
GROUP = "cosim.backends"


@lru_cache(maxsize=1)
def _registry() -> dict[str, EntryPoint]:
    found: dict[str, EntryPoint] = {}
    for ep in entry_points(group=GROUP):
        # An installed copy and an editable one of the same distribution list the same
        # names: the first on the path wins, as for imports.
        found.setdefault(ep.name, ep)
    return found


def backend_names() -> list[str]:
    """The registered backend names, sorted."""
    return sorted(_registry())


def get_backend(name: str) -> type[Backend]:
    """The backend class registered as ``name``.

    Raises
    ------
    ModelError
        For a name not registered (listing those that are), or a backend whose module fails
        to import (e.g. ray not installed).
    """
    ep = _registry().get(name)
    if ep is None:
        known = ", ".join(backend_names()) or "none: is cosim installed (pip install -e .)?"
        raise ModelError(f"unknown backend {name!r}; choose one of {known}")
    try:
        return ep.load()
    except ImportError as err:
        raise ModelError(f"backend {name!r} is not available: {err}") from err


def process_groups(specs, units: dict,
                   processes: int | None = None) -> dict[tuple[str, str], list]:
    """Unit specs grouped by the process that hosts them.

    Parameters
    ----------
    specs : list of UnitSpec
    units : dict of str to UnitOptions
        ``CosimConfig.units``.
    processes : int, optional
        ``CosimConfig.processes``: spread the units without options over this many
        processes, the largest first, each onto the process with the fewest blocks so far
        (a unit's cost is estimated by its number of blocks).

    Returns
    -------
    dict of (str, str) to list of UnitSpec
        ``("process", NAME)`` for the units whose options share a ``process`` name,
        ``("shared", "<i>")`` for those spread over ``processes``, ``("unit", NAME)`` for
        each other unit alone; in the order the groups first appear, units in spec order.
    """
    spread = [s for s in specs if processes is not None and s.name not in units]
    load = [0] * min(processes or 1, len(spread) or 1)
    home: dict[str, int] = {}
    for spec in sorted(spread, key=lambda s: -_size(s.subsystem)):
        i = load.index(min(load))
        home[spec.name] = i
        load[i] += _size(spec.subsystem)
    groups: dict[tuple[str, str], list] = {}
    for spec in specs:
        opts = units.get(spec.name)
        if spec.name in home:
            key = ("shared", str(home[spec.name]))
        elif opts is not None and opts.process is not None:
            key = ("process", str(opts.process))
        else:
            key = ("unit", spec.name)
        groups.setdefault(key, []).append(spec)
    return groups


def _size(diagram) -> int:
    """Blocks in ``diagram`` and its subsystems (1 for a unit without one, e.g. an FMU)."""
    if diagram is None:
        return 1
    n, stack = 0, [diagram]
    while stack:
        for b in stack.pop().blocks:
            n += 1
            if hasattr(b, "blocks"):
                stack.append(b)
    return n


class LocalProxy(Proxy):
    """Calls an in-process unit directly (no encoding, no copies)."""

    def __init__(self, unit):
        self.unit = unit
        self.name = unit.name

    def submit(self, requests):
        handle = self.unit.handle
        return [handle(r) for r in requests]

    def result(self, handle):
        return handle

    def in_process(self):
        return self.unit

    def close(self) -> None:
        pass


class LocalBackend(Backend):
    """Runs every unit in this process (the default)."""

    def __init__(self, cosim_config):
        self.cfg = cosim_config

    def start(self, specs) -> dict:
        from cosim.master.local_unit import LocalUnit
        return {s.name: LocalProxy(s.factory() if s.factory is not None else
                                   LocalUnit(s.subsystem, s.config, s.name)) for s in specs}

    def stop(self) -> None:
        pass
