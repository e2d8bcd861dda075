"""ZeroMQ remote units: the master's client, and a backend that runs units as servers.

A unit with an ``address`` in ``CosimConfig.units`` is a remote unit served by another team
(``cosim serve``); the master connects, shakes hands (protocol version and the unit's
description) and sends one message per server per macro step, carrying the batch of every unit
of that server the step involves. The ``zmq`` backend also runs the other
units as local server processes (``python -m cluster.server`` on a model file written for
them) and re-spawns one that dies, so the master can restore it from a checkpoint.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import zmq

from cluster.codec import decode_batch, encode_batch
from cosim import protocol as P
from cosim.errors import ModelError, TransportError

__all__ = ["Connection", "RemoteUnits", "ZmqBackend", "ZmqProxy"]


class Connection:
    """One REQ socket to a unit server, shared by the proxies of the units it hosts.

    Requests submitted for several of its units before any result is asked for go out as one
    message, ``[unit, batch, unit, batch, ...]``, answered by one message of reply batches in
    the same order: one round trip per server per Jacobi step, however many units it hosts.
    The master calls :meth:`flush` once it has submitted a call's requests to every unit, so
    that all servers work at once; a result asked for before sends what is queued.

    Parameters
    ----------
    address : str
        ``tcp://host:port`` of the unit server.
    timeout : float
        Seconds a message may take.
    curve_server_public, curve_client_keys : str, optional
        The server's public key file and this client's key file (with its secret), for a
        CURVE server.
    """

    def __init__(self, address: str, timeout: float = 60.0, *,
                 curve_server_public: str | None = None,
                 curve_client_keys: str | None = None):
        self.address = address
        self.timeout = timeout
        self._curve = (curve_server_public, curve_client_keys)
        self._ctx = zmq.Context.instance()
        self._queued: list[tuple[str, list]] = []     # submitted, not sent yet
        self._in_flight: list[tuple[str, list]] = []  # sent, reply awaited
        self._replies: dict[str, list] = {}
        self._sock = None
        self._connect()

    def _connect(self) -> None:
        self._sock = self._ctx.socket(zmq.REQ)
        self._sock.setsockopt(zmq.LINGER, 0)
        # A receive timeout rather than poll-then-recv: one call per reply, not two.
        self._sock.RCVTIMEO = int(self.timeout * 1000)
        server_pub, client_keys = self._curve
        if server_pub:
            from zmq import auth
            self._sock.curve_serverkey = auth.load_certificate(server_pub)[0]
            pub, sec = auth.load_certificate(client_keys)
            self._sock.curve_publickey, self._sock.curve_secretkey = pub, sec
        self._sock.connect(self.address)

    def reconnect(self, address: str | None = None) -> None:
        """A fresh socket (a REQ socket that lost its reply cannot send again)."""
        self._sock.close(linger=0)
        self._queued, self._in_flight, self._replies = [], [], {}
        if address is not None:
            self.address = address
        self._connect()

    def set_timeout(self, timeout: float) -> None:
        self.timeout = timeout
        self._sock.RCVTIMEO = int(timeout * 1000)

    def submit(self, unit: str, requests: list) -> None:
        self._queued.append((unit, requests))

    def flush(self) -> None:
        """Send what is queued (one message), unless a message is still awaiting its reply."""
        if self._queued and not self._in_flight:
            self._send()

    def result(self, unit: str, requests: list) -> list:
        """The replies to ``unit``'s submitted ``requests`` (sending what is queued first)."""
        while unit not in self._replies:
            if not self._in_flight:
                if not self._queued:
                    raise TransportError(unit, type(requests[-1]).__name__,
                                         "no request of this unit is pending")
                self._send()
            else:
                self._receive(unit, requests)
        return self._replies.pop(unit)

    def _send(self) -> None:
        frames = []
        for unit, requests in self._queued:
            frames += [unit.encode(), encode_batch(requests)]
        self._in_flight, self._queued = self._queued, []
        try:
            self._sock.send_multipart(frames)
        except zmq.ZMQError as err:
            unit, requests = self._in_flight[0]
            self.reconnect()
            raise TransportError(unit, type(requests[-1]).__name__,
                                 f"cannot send to {self.address}: {err}",
                                 t=getattr(requests[-1], "t", None)) from err

    def _receive(self, unit: str, requests: list) -> None:
        try:
            frames = self._sock.recv_multipart()
        except zmq.Again:
            others = [u for u, _ in self._in_flight if u != unit]
            self.reconnect()
            also = f" (also awaited: {', '.join(others)})" if others else ""
            raise TransportError(unit, type(requests[-1]).__name__,
                                 f"no reply from {self.address} within {self.timeout:g} s"
                                 f"{also}", t=getattr(requests[-1], "t", None)) from None
        in_flight, self._in_flight = self._in_flight, []
        if len(frames) == 1 and len(in_flight) > 1:
            frames = frames * len(in_flight)        # a message-level error answers all
        if len(frames) != len(in_flight):
            self.reconnect()
            raise TransportError(unit, type(requests[-1]).__name__,
                                 f"{self.address} answered {len(frames)} batches to "
                                 f"{len(in_flight)}", t=getattr(requests[-1], "t", None))
        for (u, reqs), data in zip(in_flight, frames):
            replies = decode_batch(data)
            if len(replies) == 1 and len(reqs) > 1:
                replies = replies * len(reqs)       # a batch-level error answers all
            self._replies[u] = replies

    def close(self) -> None:
        self._sock.close(linger=0)


class ZmqProxy:
    """The master's handle on one remote unit: its requests travel on a :class:`Connection`
    (its own, or one shared with the other units of the same server).

    Parameters
    ----------
    name : str
        Unit name (as served).
    address : str or Connection
        ``tcp://host:port`` of the unit server, or an open connection to it.
    timeout : float
        Seconds a batch may take; also the handshake's.
    curve_server_public, curve_client_keys : str, optional
        For a CURVE server, when ``address`` is a string (see :class:`Connection`).
    """

    def __init__(self, name: str, address, timeout: float = 60.0, *,
                 curve_server_public: str | None = None,
                 curve_client_keys: str | None = None):
        self.name = name
        self.conn = address if isinstance(address, Connection) else Connection(
            address, timeout, curve_server_public=curve_server_public,
            curve_client_keys=curve_client_keys)
        self.description = self.hello()

    @property
    def address(self) -> str:
        return self.conn.address

    def hello(self) -> P.UnitDescription:
        """Handshake: protocol versions must agree; returns the unit's description."""
        (reply,) = self.result(self.submit([P.Hello(P.PROTOCOL_VERSION, uuid.uuid4().hex)]))
        if isinstance(reply, P.ErrorReply):
            raise TransportError(self.name, "Hello", reply.message)
        if not isinstance(reply, P.Welcome) or reply.protocol_version != P.PROTOCOL_VERSION:
            raise TransportError(self.name, "Hello", f"protocol version mismatch: server "
                                 f"{getattr(reply, 'protocol_version', '?')}, master "
                                 f"{P.PROTOCOL_VERSION}")
        return reply.unit

    def submit(self, requests):
        self.conn.submit(self.name, requests)
        return requests

    def flush(self) -> None:
        self.conn.flush()

    def result(self, requests):
        return self.conn.result(self.name, requests)

    def heartbeat(self, timeout: float) -> bool:
        """True if the server answers a Heartbeat within ``timeout`` s."""
        saved = self.conn.timeout
        self.conn.set_timeout(timeout)
        try:
            self.result(self.submit([P.Heartbeat()]))
            return True
        except TransportError:
            return False
        finally:
            self.conn.set_timeout(saved)

    def recover(self, deadline: float) -> None:
        """Wait (heartbeats) until the server answers again, or raise TransportError."""
        while time.time() < deadline:
            if self.heartbeat(min(1.0, max(0.05, deadline - time.time()))):
                return
        raise TransportError(self.name, "recover", f"{self.address} unreachable")

    def close(self) -> None:
        self.conn.close()


class _ServerProcess:
    """One spawned ``cluster.server`` process, shared by the proxies of the units it hosts."""

    def __init__(self, unit_file: Path, plugins=()):
        self.unit_file = unit_file
        self.plugins = tuple(plugins)
        self.generation = 0
        self._start()

    def _start(self) -> None:
        self.proc, self.address = _spawn(self.unit_file, self.plugins)
        self.generation += 1

    def restart(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self._start()

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class _SpawnedProxy(ZmqProxy):
    """A proxy whose server this backend started: recovery re-spawns it (once for all the
    units that process hosts: the others find it restarted and reconnect)."""

    def __init__(self, name, server: _ServerProcess, conn: Connection):
        self.server = server
        self._generation = server.generation
        super().__init__(name, conn)

    def recover(self, deadline: float) -> None:
        server = self.server
        if server.generation == self._generation:
            if server.proc.poll() is None and self.heartbeat(0.5):
                return                              # alive: another unit failed
            server.restart()
            self.conn.reconnect(server.address)
        self._generation = server.generation
        super().recover(deadline)


def _spawn(unit_file: Path, plugins=()):
    """Start ``python -m cluster.server UNIT_FILE --bind tcp://127.0.0.1:0``; its address."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "cluster.server", str(unit_file), "--bind",
         "tcp://127.0.0.1:0", "--log-level", "WARNING",
         *[arg for m in plugins for arg in ("--plugin", m)]],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    line = proc.stdout.readline()
    if not line.startswith("serving "):
        err = proc.stderr.read()
        raise ModelError(f"unit server for {unit_file} did not start: {line}{err}")
    return proc, line.strip().rsplit(" on ", 1)[1]


def _plugins(diagram) -> list[str]:
    """Modules of the block classes in ``diagram`` outside cosim's own library: the spawned
    server imports them, so their registered block types are known there too."""
    from cosim.model import Diagram
    mods, stack = set(), [diagram]
    while stack:
        d = stack.pop()
        for b in d.blocks:
            if isinstance(b, Diagram):
                stack.append(b)
            elif not type(b).__module__.startswith(("blocks.", "cosim.")):
                mods.add(type(b).__module__)
    return sorted(mods)


class RemoteUnits:
    """Units that other teams serve: those with an ``address`` in ``CosimConfig.units``
    (with ``curve_server_public`` / ``curve_client_keys`` for a CURVE server), whatever the
    backend that runs the others. Units at one address share a :class:`Connection`."""

    def __init__(self, cosim_config):
        self.cfg = cosim_config
        self.connections: dict[tuple, Connection] = {}

    def start(self, specs) -> dict:
        proxies = {}
        for spec in specs:
            opts = self.cfg.units[spec.name]
            if "process" in opts:
                raise ModelError(f"unit {spec.name!r} has both an address (a remote unit) "
                                 "and a process (a spawned one): keep one")
            key = (opts["address"], opts.get("curve_server_public"),
                   opts.get("curve_client_keys"))
            if key not in self.connections:
                self.connections[key] = Connection(
                    opts["address"], self.cfg.timeout,
                    curve_server_public=opts.get("curve_server_public"),
                    curve_client_keys=opts.get("curve_client_keys"))
            proxies[spec.name] = ZmqProxy(spec.name, self.connections[key])
        return proxies

    def stop(self) -> None:
        for conn in self.connections.values():
            conn.close()
        self.connections = {}


class ZmqBackend:
    """Runs every unit as a local server process (``cosim serve`` on a unit file).

    Per-unit option (``CosimConfig.units[name]``): ``process``, a name: the units that share
    it are hosted by one server process (by default each unit has its own). On 2 cores, 8
    small units in 2 processes exchange faster than in 8, while heavy units want a process
    (a core) each.
    """

    def __init__(self, cosim_config):
        self.cfg = cosim_config
        self.proxies: dict = {}
        self.servers: list[_ServerProcess] = []
        self.connections: dict[tuple, Connection] = {}
        self._dir = None

    def start(self, specs) -> dict:
        groups: dict[tuple, list] = {}
        for spec in specs:
            opts = self.cfg.units.get(spec.name, {})
            if spec.subsystem is None:
                raise ModelError(f"unit {spec.name!r} cannot run as a server process (it is "
                                 "not a subsystem); give it an address or use another backend")
            key = ("process", str(opts["process"])) if "process" in opts else ("unit", spec.name)
            groups.setdefault(key, []).append(spec)
        for (_, name), group in groups.items():
            if self._dir is None:
                self._dir = tempfile.TemporaryDirectory(prefix="cosim-units-")
            path = Path(self._dir.name) / f"{name}.yaml"
            _write_unit_file(group, path)
            server = _ServerProcess(path, sorted({m for spec in group
                                                  for m in _plugins(spec.subsystem)}))
            self.servers.append(server)
            conn = self.connections[(server,)] = Connection(server.address, self.cfg.timeout)
            for spec in group:
                self.proxies[spec.name] = _SpawnedProxy(spec.name, server, conn)
        return dict(self.proxies)

    def stop(self) -> None:
        for conn in self.connections.values():
            conn.close()
        for server in self.servers:
            server.stop()
        self.proxies, self.servers, self.connections = {}, [], {}
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None


def _write_unit_file(group, path: Path) -> None:
    """A model file whose top-level atomic subsystems are ``group``'s units.

    The file's ``simulation:`` is the first unit's configuration; every other unit carries
    the fields in which its own differs as subsystem options, so that the server derives
    exactly each unit's configuration.
    """
    from dataclasses import fields

    from cosim.model import Model
    base = group[0].config
    wrapper = Model(f"units_{path.stem}", parameters=dict(group[0].workspace or {}))
    saved = []
    for spec in group:
        sub = spec.subsystem
        saved.append((sub, sub.options))
        sub.atomic, sub.dt = True, spec.config.dt
        sub.solver = sub.solver or spec.config.solver
        diff = {f.name: getattr(spec.config, f.name) for f in fields(base)
                if f.name not in ("dt", "solver")
                and getattr(spec.config, f.name) != getattr(base, f.name)}
        sub.options = {**sub.options, **diff}
        wrapper.blocks.append(sub)
    try:
        wrapper.to_yaml(path, simulation=base)
    finally:
        wrapper.blocks.clear()
        for sub, options in saved:
            sub.options = options
