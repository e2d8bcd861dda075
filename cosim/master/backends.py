"""Where units run: a registry of backends, and the in-process one.

A backend turns unit specifications into proxies the master calls: ``submit(requests)``
returns a handle and ``result(handle)`` the replies, so remote backends can have the requests
of many units in flight at once. ``"ray"`` and ``"zmq"`` live in the ``cluster`` package and are
imported only when chosen, so ``import cosim`` never imports ray or zmq.
"""

from __future__ import annotations

import importlib

from cosim.errors import ModelError

__all__ = ["BACKENDS", "LocalBackend", "LocalProxy", "get_backend", "process_groups"]

#: Backend name -> "module:class"; one line per backend.
BACKENDS = {
    "local": "cosim.master.backends:LocalBackend",
    "ray": "cluster.ray_backend:RayBackend",
    "zmq": "cluster.zmq_backend:ZmqBackend",
}


def get_backend(name: str):
    """The backend class registered as ``name``."""
    target = BACKENDS.get(name)
    if target is None:
        raise ModelError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")
    module, _, attr = target.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except ImportError as err:
        raise ModelError(f"backend {name!r} is not available: {err}") from err


def process_groups(specs, units: dict) -> dict[tuple[str, str], list]:
    """Unit specs grouped by the process that hosts them: ``("process", NAME)`` for the units
    whose options (``units[name]``) share a ``process`` name, ``("unit", NAME)`` for each
    other unit alone. In the order the groups first appear."""
    groups: dict[tuple[str, str], list] = {}
    for spec in specs:
        opts = units.get(spec.name, {})
        key = ("process", str(opts["process"])) if "process" in opts else ("unit", spec.name)
        groups.setdefault(key, []).append(spec)
    return groups


class LocalProxy:
    """Calls an in-process unit directly (no encoding, no copies)."""

    def __init__(self, unit):
        self.unit = unit
        self.name = unit.name

    def submit(self, requests):
        handle = self.unit.handle
        return [handle(r) for r in requests]

    def result(self, handle):
        return handle

    def close(self) -> None:
        pass


class LocalBackend:
    """Runs every unit in this process (the default)."""

    def __init__(self, cosim_config):
        self.cfg = cosim_config

    def start(self, specs) -> dict:
        from cosim.master.units import LocalUnit
        return {s.name: LocalProxy(s.factory() if s.factory is not None else
                                   LocalUnit(s.subsystem, s.config, s.name)) for s in specs}

    def stop(self) -> None:
        pass
