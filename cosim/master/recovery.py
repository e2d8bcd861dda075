"""Fault recovery: after a unit failed, bring every unit back (recreated where it died) and
restore them from the last central checkpoint; when that is impossible, save the checkpoint
so the run can be resumed, and say how."""

from __future__ import annotations

import time
from typing import Callable

from cosim.errors import TransportError

__all__ = ["bring_back", "recover"]


def recover(err: TransportError, checkpoint: dict | None, proxies: dict, recoveries: int,
            cfg, restore: Callable[[dict], None], save: Callable[[dict, str], None]) -> None:
    """Answer the unit failure ``err``: wait for every unit to answer again, then
    ``restore(checkpoint)``.

    Parameters
    ----------
    err : TransportError
        The failure.
    checkpoint : dict or None
        The last central checkpoint (None: there is none to go back to).
    proxies : dict of str to Proxy
    recoveries : int
        Recoveries so far; at ``cfg.max_restarts`` the run fails.
    cfg : CosimConfig
        ``timeout`` bounds the wait, ``checkpoint_path`` is where a failed run leaves its
        checkpoint.
    restore : callable
        Puts every unit and the master back to a checkpoint.
    save : callable
        ``save(checkpoint, path)`` writes a checkpoint file.

    Raises
    ------
    TransportError
        When the units cannot be brought back; with a checkpoint and ``checkpoint_path``,
        the checkpoint is saved there first and the message says how to resume.
    """
    try:
        if checkpoint is None or recoveries >= cfg.max_restarts:
            raise err
        deadline = time.time() + cfg.timeout
        for proxy in proxies.values():
            proxy.recover(deadline)
        restore(checkpoint)
    except TransportError as final:
        path = cfg.checkpoint_path
        if checkpoint is None or path is None:
            raise
        save(checkpoint, path)
        raise TransportError(final.unit, final.method,
                             f"{final.message}; the last checkpoint (t="
                             f"{checkpoint['master']['T']:g}) was saved to {path}: "
                             f"resume with `cosim run MODEL --resume {path}`",
                             t=final.t) from final


def bring_back(err: TransportError, proxies: dict, recoveries: int, cfg) -> None:
    """A unit failed before the run has a checkpoint (while the units are initialized):
    bring every unit back (a lost process re-spawned) so that the master initializes them
    all again, or raise ``err``.

    Parameters
    ----------
    err : TransportError
        The failure.
    proxies : dict of str to Proxy
    recoveries : int
        Recoveries so far; at ``cfg.max_restarts`` (or without ``cfg.checkpoint_every``:
        recovery is off) ``err`` is raised.
    cfg : CosimConfig

    Raises
    ------
    TransportError
        ``err``, or why a unit cannot be brought back.
    """
    if not cfg.checkpoint_every or recoveries >= cfg.max_restarts:
        raise err
    deadline = time.time() + cfg.timeout
    for proxy in proxies.values():
        proxy.recover(deadline)
