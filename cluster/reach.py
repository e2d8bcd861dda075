"""A connection check before a run: can this process open a TCP connection to a peer's
``tcp://host:port``? ZeroMQ itself never says: it retries a blocked or closed port silently
for as long as one waits, so the first sign was a reply that never came (60 s)."""

from __future__ import annotations

import socket

__all__ = ["Unreachable", "check_reachable"]


class Unreachable(ConnectionError):
    """A peer's address and port cannot be reached from this process."""


def check_reachable(endpoint: str, timeout: float, what: str) -> None:
    """Open (and close) a TCP connection to ``endpoint`` within ``timeout`` s.

    Parameters
    ----------
    endpoint : str
        ``tcp://host:port``.
    timeout : float
        Seconds to wait for the connection.
    what : str
        What listens there, for the message (``"the unit actor of motor"``).

    Raises
    ------
    Unreachable
        Naming ``what``, the address and port, this host and why (refused: nothing
        listens; timed out: a firewall or routing drops the packets).
    """
    host, _, port = endpoint.removeprefix("tcp://").rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return
    except OSError as err:
        if isinstance(err, TimeoutError) or isinstance(err, socket.timeout):
            why = f"no answer within {timeout:g} s (a firewall dropping the packets?)"
        elif isinstance(err, ConnectionRefusedError):
            why = "connection refused (nothing listens there, or a firewall rejects it)"
        else:
            why = err.strerror or str(err)
        raise Unreachable(f"cannot reach {what} at {host} port {port} from "
                          f"{socket.gethostname()}: {why}; open that port between the "
                          "machines (see the port range option: CosimConfig(ports=...), "
                          "--ports)") from None
