"""Versions a driver and the processes it starts on other nodes must share.

A Ray unit actor and a sweep puller get the driver's :func:`versions` in their arguments and
call :func:`check` first: a node with another cosim installed (or another unit protocol) is
refused at start, naming both versions and the node, instead of failing later on a message
it reads differently.
"""

from __future__ import annotations

from cosim.errors import ModelError

__all__ = ["VersionMismatch", "check", "versions"]


class VersionMismatch(ModelError):
    """A process on another node runs another cosim or unit protocol than the driver."""


def versions() -> dict:
    """This process's cosim package version and unit protocol version."""
    import cosim
    from cosim.master.protocol import PROTOCOL_VERSION
    return {"cosim": cosim.__version__, "protocol": PROTOCOL_VERSION}


def check(driver: dict, what: str) -> None:
    """Refuse to start ``what`` (e.g. ``"unit actor of motor"``) on this node when its
    versions differ from the ``driver``'s.

    Raises
    ------
    VersionMismatch
        Naming both versions, this node's address and a remedy.
    """
    mine = versions()
    if mine == driver:
        return
    import ray
    node = ray.util.get_node_ip_address() if ray.is_initialized() else "this node"
    differ = "; ".join(f"{k} {driver.get(k)!r} on the driver, {mine.get(k)!r} on node {node}"
                       for k in sorted(set(mine) | set(driver)) if mine.get(k) != driver.get(k))
    raise VersionMismatch(f"{what} refused to start: {differ}. Install the driver's cosim "
                          "on every node (or ship it with runtime_env, e.g. "
                          "{'py_modules': [...]} or {'pip': [...]})")
