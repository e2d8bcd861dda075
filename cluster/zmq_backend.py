"""ZeroMQ remote units: the master's client, and a backend that runs units as servers.

A unit with an ``address`` in ``CosimConfig.units`` is a remote unit served by another team
(``cosim serve``); the master connects, shakes hands (protocol version and the unit's
description) and sends one batch per macro step. The ``zmq`` backend also runs the other
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

__all__ = ["ZmqBackend", "ZmqProxy"]


class ZmqProxy:
    """The master's handle on one remote unit (a REQ socket; one batch in flight).

    Parameters
    ----------
    name : str
        Unit name (as served).
    address : str
        ``tcp://host:port`` of the unit server.
    timeout : float
        Seconds a batch may take; also the handshake's.
    curve_server_public, curve_client_keys : str, optional
        The server's public key file and this client's key file (with its secret), for a
        CURVE server.
    """

    def __init__(self, name: str, address: str, timeout: float = 60.0, *,
                 curve_server_public: str | None = None,
                 curve_client_keys: str | None = None):
        self.name = name
        self.address = address
        self.timeout = timeout
        self._curve = (curve_server_public, curve_client_keys)
        self._ctx = zmq.Context.instance()
        self._connect()
        self.description = self.hello()

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
        try:
            self._sock.send_multipart([self.name.encode(), encode_batch(requests)])
        except zmq.ZMQError as err:
            raise TransportError(self.name, type(requests[-1]).__name__,
                                 f"cannot send to {self.address}: {err}",
                                 t=getattr(requests[-1], "t", None)) from err
        return requests

    def result(self, requests):
        try:
            data = self._sock.recv()
        except zmq.Again:
            # A REQ socket that lost its reply cannot send again: start a fresh one.
            self._sock.close(linger=0)
            self._connect()
            last = requests[-1]
            raise TransportError(self.name, type(last).__name__,
                                 f"no reply from {self.address} within {self.timeout:g} s",
                                 t=getattr(last, "t", None)) from None
        replies = decode_batch(data)
        if len(replies) == 1 and len(requests) > 1:
            return replies * len(requests)          # a batch-level error answers all
        return replies

    def heartbeat(self, timeout: float) -> bool:
        """True if the server answers a Heartbeat within ``timeout`` s."""
        saved = self.timeout
        self._set_timeout(timeout)
        try:
            self.result(self.submit([P.Heartbeat()]))
            return True
        except TransportError:
            return False
        finally:
            self._set_timeout(saved)

    def _set_timeout(self, timeout: float) -> None:
        self.timeout = timeout
        self._sock.RCVTIMEO = int(timeout * 1000)

    def recover(self, deadline: float) -> None:
        """Wait (heartbeats) until the server answers again, or raise TransportError."""
        while time.time() < deadline:
            if self.heartbeat(min(1.0, max(0.05, deadline - time.time()))):
                return
        raise TransportError(self.name, "recover", f"{self.address} unreachable")

    def close(self) -> None:
        self._sock.close(linger=0)


class _SpawnedProxy(ZmqProxy):
    """A proxy whose server this backend started: recovery re-spawns it."""

    def __init__(self, name, unit_file: Path, timeout: float, plugins=()):
        self.unit_file = unit_file
        self.plugins = tuple(plugins)
        self.proc, address = _spawn(unit_file, self.plugins)
        super().__init__(name, address, timeout)

    def recover(self, deadline: float) -> None:
        if self.proc.poll() is None and self.heartbeat(0.5):
            return                                  # alive: another unit failed
        self.proc.kill()
        self.proc.wait()
        self.proc, self.address = _spawn(self.unit_file, self.plugins)
        self._sock.close(linger=0)
        self._connect()
        super().recover(deadline)

    def close(self) -> None:
        super().close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()


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


class ZmqBackend:
    """Units with an ``address`` are remote; the others run as local server processes."""

    def __init__(self, cosim_config):
        self.cfg = cosim_config
        self.proxies: dict = {}
        self._dir = None

    def start(self, specs) -> dict:
        from cosim.model import Model
        for spec in specs:
            opts = self.cfg.units.get(spec.name, {})
            if "address" in opts:
                self.proxies[spec.name] = ZmqProxy(
                    spec.name, opts["address"], self.cfg.timeout,
                    curve_server_public=opts.get("curve_server_public"),
                    curve_client_keys=opts.get("curve_client_keys"))
                continue
            if spec.subsystem is None:
                raise ModelError(f"unit {spec.name!r} cannot run as a server process (it is "
                                 "not a subsystem); give it an address or use another backend")
            if self._dir is None:
                self._dir = tempfile.TemporaryDirectory(prefix="cosim-units-")
            sub = spec.subsystem
            sub.atomic, sub.dt = True, spec.config.dt
            sub.solver = sub.solver or spec.config.solver
            wrapper = Model(f"unit_{spec.name}", parameters=dict(spec.workspace or {}))
            wrapper.blocks.append(sub)
            path = Path(self._dir.name) / f"{spec.name}.yaml"
            wrapper.to_yaml(path, simulation=spec.config)
            wrapper.blocks.clear()
            self.proxies[spec.name] = _SpawnedProxy(spec.name, path, self.cfg.timeout,
                                                    _plugins(sub))
        return dict(self.proxies)

    def stop(self) -> None:
        for p in self.proxies.values():
            p.close()
        self.proxies = {}
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None
