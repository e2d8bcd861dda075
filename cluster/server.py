"""Unit servers: one standalone process hosting units for masters elsewhere (ZeroMQ).

A team serves its subsystem on a machine it owns; a master refers to the unit by address
(``CosimConfig(units={"plant": {"address": "tcp://host:5555"}})``) and sees only its ports.

Framing: :mod:`cluster.dataplane` (pairs of ``[unit name, batch]`` frames in, one reply batch
per pair out) on a ROUTER socket, the masters' REQ envelopes kept. Short requests are served
at once, one at a time; a ``DoStep`` expected to take longer than ``offload_after`` (from the
unit's measured speed) runs on a worker thread while the server keeps answering heartbeats and
the requests of other, idle units (handshakes of other masters among them); requests for a
busy unit wait their turn in order (at most ``max_waiting`` messages). Several clients may
be connected at once: one master drives a unit at a time, others are refused with an error
naming it except for read-only requests (:mod:`cluster.owners`), which are answered at each
reader's pace when another master drives the unit (:attr:`UnitServer.read_interval`: readers
cannot take the server's time from that master); a step whose logs would pass the memory
budgets is refused before it starts (:mod:`cluster.budget`). A step past the server's step
deadline stops with an error naming it. A malformed, oversized or misaddressed message is
answered with an ErrorReply and the server keeps serving; a master that disconnects leaves the units as they
are, and the next session starts with ``Initialize``. Binds loopback by default. With CURVE
keys (files made by ``zmq.auth.create_certificates``), clients must hold an authorized key;
refusals are logged.

Command line: ``cosim serve UNIT_FILE --bind tcp://127.0.0.1:5555 [--plugin MODULE]``
(UNIT_FILE: a model file whose top-level atomic subsystems are served, or a subsystem library
file; a plugin module registers the server owner's own block types).
"""

from __future__ import annotations

import argparse
import logging
import collections
import signal
import sys
import threading
import time

import zmq

from cluster.beats import Beats
from cluster.budget import MB, Budget
from cluster.codec import DEFAULT_MAX_SIZE, encode_batch
from cluster.dataplane import RunKeys, Work, guarded, parse, reply, watch
from cluster.lane import FusedLane
from cluster.owners import READ_ONLY, Owners, address_of
from cosim.master import protocol as P

__all__ = ["UnitServer", "main", "units_from_file"]

log = logging.getLogger("cosim.server")


class UnitServer:
    """Serve ``units`` (name -> :class:`~cosim.master.units.Unit`) on one REP socket.

    Parameters
    ----------
    units : dict of str to Unit
    bind : str
        Endpoint, loopback by default.
    curve_secret_key_file : str, optional
        This server's secret key file: enables CURVE encryption and authentication.
    authorized_keys_dir : str, optional
        Directory of the clients' public key files allowed in (with CURVE).
    max_message_size : int
        Larger requests are refused with an error reply.
    offload_after : float
        A ``DoStep`` expected to take longer (s) runs on a worker thread, so that heartbeats
        and other units are answered meanwhile; a unit's first step always does.
    reload : callable, optional
        ``reload(unit_file_text) -> units``: serve :class:`~cosim.master.protocol.Reload`
        by replacing every unit with those it builds (same names); None (default) refuses
        Reload, as a server that a team serves its units with must.
    owner_lease : float
        Seconds a unit's master may stay silent (its unit not advancing) before another
        master may take the unit over (:mod:`cluster.owners`).
    keys : RunKeys, optional
        A run's own CURVE keys (instead of key files): the server's pair, and the one
        client key let in (the master that spawned this server; see
        :class:`~cluster.zmq_backend.ZmqBackend`).
    budget : Budget, optional
        Memory budgets per request and per session (:mod:`cluster.budget`; default 256 MB
        and 1 GB): a step over either is refused before it starts.
    reparameterize : callable, optional
        ``reparameterize(parameters) -> units``: serve
        :class:`~cosim.master.protocol.SetParameters` likewise (the last unit file's units
        with these parameter values); None refuses it.
    """

    offload_after = 0.02
    #: Most messages waiting for busy units; more are refused with an error reply.
    max_waiting = 1024
    #: Seconds a Hello refused because another master drives its unit waits for that
    #: master to be seen leaving (see :meth:`_settles`) before the refusal is sent.
    settle = 0.25
    #: Least seconds between two replies to a client's read-only requests of units another
    #: master drives (a reader asking faster waits for its reply): 10 readers in a closed
    #: loop answered at once made a master's run 1.8-3.4 times slower.
    read_interval = 0.05

    def __init__(self, units: dict, bind: str = "tcp://127.0.0.1:5555", *,
                 curve_secret_key_file: str | None = None,
                 authorized_keys_dir: str | None = None,
                 max_message_size: int = DEFAULT_MAX_SIZE, reload=None, reparameterize=None,
                 owner_lease: float = 60.0, budget: Budget | None = None,
                 keys: RunKeys | None = None):
        self.units = dict(units)
        self.reload = reload
        self.reparameterize = reparameterize
        self.max_message_size = max_message_size
        self._ctx = zmq.Context()
        self._auth = None
        self.sock = self._ctx.socket(zmq.ROUTER)
        self.sock.setsockopt(zmq.LINGER, 0)
        # A hard cap far above the refusal threshold bounds what one message can allocate.
        self.sock.setsockopt(zmq.MAXMSGSIZE, 4 * max_message_size)
        self.owners = Owners(owner_lease)
        self.beats = Beats(self.units, self.owners)
        self._closed_fds: collections.deque = collections.deque()
        self.budget = budget or Budget()
        if keys is not None:
            from zmq.auth.thread import ThreadAuthenticator
            self._auth = ThreadAuthenticator(self._ctx)
            self._auth.start()
            self._auth.configure_curve_callback(domain="*",
                                                credentials_provider=_OnlyKey(keys.client_public))
            self.sock.curve_secretkey = keys.server_secret
            self.sock.curve_publickey = keys.server_public
            self.sock.curve_server = True
        elif curve_secret_key_file:
            from zmq import auth
            from zmq.auth.thread import ThreadAuthenticator
            public, secret = auth.load_certificate(curve_secret_key_file)
            if secret is None:
                raise ValueError(f"{curve_secret_key_file} holds no secret key")
            self._auth = ThreadAuthenticator(self._ctx)
            self._auth.start()
            self._auth.configure_curve(domain="*", location=authorized_keys_dir or ".")
            self.sock.curve_secretkey = secret
            self.sock.curve_publickey = public
            self.sock.curve_server = True
        # Who connects and leaves, and refused handshakes (wrong key, bad protocol), are
        # logged from the socket's monitor.
        self._monitor = watch(
            self.sock, zmq.EVENT_ACCEPTED | zmq.EVENT_DISCONNECTED
            | zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL)
        self.endpoint = self._bind(bind)
        self._running = True
        log.info("serving %s on %s", ", ".join(self.units), self.endpoint)

    def _bind(self, bind: str) -> str:
        if bind.endswith(":0") or bind.endswith(":*"):
            port = self.sock.bind_to_random_port(bind.rsplit(":", 1)[0])
            return f"{bind.rsplit(':', 1)[0]}:{port}"
        self.sock.bind(bind)
        return bind

    def serve_forever(self, poll_ms: int = 200) -> None:
        """Answer requests until :meth:`close` (or SIGTERM/SIGINT in :func:`main`)."""
        # A blocking receive with a timeout, not a Poller: a Poller over two sockets costs
        # more per request than the unit's own work; refusals are logged from a thread.
        watcher = threading.Thread(target=self._log_refusals, args=(poll_ms,),
                                   name="cosim-server-monitor", daemon=True)
        watcher.start()
        sock = self.sock
        # The receive timeout as last set: asking the socket (pyzmq's attribute sugar, an
        # import and an enum lookup per call) cost ~15 us of CPU a message, more than the
        # unit's step.
        sock.RCVTIMEO = timeout = poll_ms
        beats = self.beats
        self._job = None                       # (envelope, thread, result list, names)
        # Messages for busy units, in arrival order: (envelope, payload, unit names, fd).
        self._waiting = collections.deque()
        # Messages held for their units' masters to leave: (until, envelope, payload, fd).
        self._held = collections.deque()
        self._seconds_per_h: dict[str, float] = {}   # measured cost of simulated time
        # Steps known to be quick take the fast lane (from their units' owners); it learns
        # their cost here too.
        lane = FusedLane(self.units, self.max_message_size, self._seconds_per_h,
                         self.offload_after, self.owners.lane)
        try:
            while self._running:
                beats.flush(sock)           # heartbeats answered at their clients' pace
                held = self._held
                if held and (self._closed_fds or held[0][0] <= time.monotonic()):
                    self._held = collections.deque()
                    for until, env, payload, fd in held:    # (those still refused: again)
                        self._take(env, payload, fd, until)
                if self._job is None:
                    if self._waiting:
                        env, payload, _, fd = self._waiting.popleft()
                        self._take(env, payload, fd)
                        continue
                    # (a receive waits no longer than the next heartbeat reply due, nor,
                    # while messages are held, than a moment)
                    longest = poll_ms / 1000 if not self._held else 0.01
                    wait = int(beats.wait(longest) * 1000) or 1
                    if timeout != wait:
                        sock.RCVTIMEO = timeout = wait
                    # The fast lane first: it answers fused steps and hands on the rest.
                    frames = lane.answer(sock)
                    if frames is not None:
                        self._take(*_envelope(frames), lane.source.get(zmq.SRCFD))
                else:
                    # A long step runs on the worker: answer what can be answered meanwhile,
                    # and send its reply as soon as it is done.
                    if sock.poll(2):
                        got = sock.recv_multipart(zmq.NOBLOCK, copy=False)
                        self._take(*_envelope([f.bytes for f in got]), got[0].get(zmq.SRCFD))
                    if not self._job[1].is_alive():
                        env, _, result, names = self._job
                        self._job = None
                        self.owners.touch(names, {n: getattr(self.units.get(n), "t", None)
                                                  for n in names})
                        sock.send_multipart(env + result)
        finally:
            self._running = False
            watcher.join()

    def _take(self, env: list, payload: list, fd: int | None = None,
              until: float | None = None) -> None:
        """Answer one message (that came on connection ``fd``) now, start it on the worker,
        or queue it behind a busy unit (or, until ``until``, hold it for its unit's master
        to leave); anything that fails on the way is answered with an ErrorReply (no
        message may end the server)."""
        try:
            self._dispatch(env, payload, fd, until)
        except Exception as err:  # noqa: BLE001 - logged and answered, the server serves on
            self.sock.send_multipart(env + guarded(lambda: _reraise(err)))

    def _settles(self, env: list, payload: list, fd, items: list, busy,
                 until: float | None) -> bool:
        """Hold a session's start (a Hello) the owners refused (True) while its unit may
        yet be freed by its master's leaving: that master's connections are all the server
        knows of it, and the socket monitor reports a closed one late. A client that closes
        its socket and at once starts a session on another (a script that starts its next
        run) would otherwise be told the unit is busy, driven by its own first socket:
        ZeroMQ's own thread closes that a moment after, under load after the new one's
        first request came. The message is tried again as disconnections come, and refused
        once :attr:`settle` s passed. (Other requests are refused at once: a master that
        drives a unit is not kept waiting for the answer it is owed.)"""
        now = time.monotonic()
        until = now + self.settle if until is None else until
        if now >= until or len(self._held) >= self.max_waiting:
            return False
        peer = env[0]
        if not any(isinstance(w, Work) and w.requests and type(w.requests[0]) is P.Hello
                   and w.name not in busy and self.owners.may_free(peer, w.name)
                   for w in items):
            return False
        self._held.append((until, env, payload, fd))
        return True

    def _dispatch(self, env: list, payload: list, fd: int | None,
                  until: float | None = None) -> None:
        while self._closed_fds:                 # connections closed meanwhile (the monitor)
            self.owners.disconnected(self._closed_fds.popleft(), reported=True)
        if not payload:
            return                  # [peer, b""] of a DEALER: nothing to answer a REQ with
        busy = self._job[3] if self._job is not None else ()
        if self.beats.answer(self.sock, env, payload, busy):
            return                  # heartbeats, answered beside any step
        items = []
        failed = guarded(lambda: items.extend(parse(self.units, payload,
                                                    self.max_message_size)) or [])
        if failed:
            self.sock.send_multipart(env + failed)
            return
        peer = env[0]
        if any(isinstance(w, Work) and any(type(r) in _NEW_UNITS for r in w.requests)
               for w in items):
            self.sock.send_multipart(env + [self._reloaded(peer, items)])
            return
        # One pass over the requests: who may send them, the simulated time asked of each
        # unit, and whether the message is nothing but heartbeats.
        steps, beats, reads, refused, owned = {}, True, True, None, None
        for w in items:
            if isinstance(w, Work):
                owned = owned or self.owners.refusal(
                    peer, w.name, w.requests, getattr(w.unit, "t", None), w.name in busy)
                refused = refused or owned
                h = 0.0
                for r in w.requests:
                    kind = type(r)
                    if kind is P.DoStep or kind is P.Step:
                        h += r.h
                    beats = beats and kind is P.Heartbeat
                    reads = reads and kind in READ_ONLY
                steps[w.name] = h
                if h > 0 and refused is None:
                    refused = self.budget.refusal(w.name, w.unit, h)
        if owned is not None and self._settles(env, payload, fd, items, busy, until):
            return
        if refused is not None:
            # Every pair answered (the message is served whole or not at all).
            self.sock.send_multipart(env + [encode_batch([P.ErrorReply(
                P.ErrorKind.PROTOCOL, refused)])] * len(items))
            return
        if beats or not steps:                 # liveness, even when busy: the unit untouched
            self.sock.send_multipart(env + [
                w if isinstance(w, bytes) else
                encode_batch([P.Alive(getattr(w.unit, "t", None), w.name in busy)]
                             * len(w.requests)) for w in items])
            return
        for w in items:
            if isinstance(w, Work):
                self.owners.claim(peer, w.name, w.requests, getattr(w.unit, "t", None), fd)
        long = self._long(steps)
        if self._job is not None and (long or steps.keys() & self._job[3] or
                                      any(steps.keys() & m[2] for m in self._waiting)):
            if len(self._waiting) >= self.max_waiting:
                self.sock.send_multipart(env + [encode_batch([P.ErrorReply(
                    P.ErrorKind.PROTOCOL, f"the server is busy: {len(self._waiting)} "
                    "messages wait for units that step; ask again later")])] * len(items))
                return
            self._waiting.append((env, payload, set(steps), fd))
            return
        if long:
            result: list = []
            thread = threading.Thread(target=lambda: result.extend(self._reply(items, steps)),
                                      name="cosim-server-step", daemon=True)
            self._job = (env, thread, result, set(steps))
            thread.start()
            return
        if reads and self.owners.beside(peer, steps):
            # A reader of units another master drives: answered at its pace, so that
            # readers, however many and fast, leave the server's time to that master.
            self.beats.pace(self.sock, env + self._reply(items, steps), self.read_interval)
            return
        self.sock.send_multipart(env + self._reply(items, steps))

    def _reloaded(self, peer: bytes, items: list) -> bytes:
        """The reply to a message with a Reload or SetParameters: every unit replaced by the
        unit file's (with the parameter values), or an ErrorReply (nothing replaced) when the
        server refuses reloads, the message holds anything else, a unit is busy, or the new
        units are not this server's names."""
        def refuse(kind, why: str) -> bytes:
            return encode_batch([P.ErrorReply(kind, why)])
        request = next(r for w in items if isinstance(w, Work) for r in w.requests
                       if type(r) in _NEW_UNITS)
        kind = type(request).__name__
        build = self.reload if type(request) is P.Reload else self.reparameterize
        if build is None:
            return refuse(P.ErrorKind.UNSUPPORTED, f"this server does not serve {kind} "
                          "(only a server started with --reloadable does)")
        if len(items) != 1 or len(items[0].requests) != 1:
            return refuse(P.ErrorKind.PROTOCOL, f"a {kind} travels alone in its message")
        if self._job is not None or self._waiting:
            return refuse(P.ErrorKind.PROTOCOL, f"a unit is still stepping; {kind} between "
                          "runs")
        why = self.owners.reload_refusal(peer, self.units)
        if why is not None:
            return refuse(P.ErrorKind.PROTOCOL, f"{kind} refused: {why}")
        try:
            units = dict(build(request.unit_file if type(request) is P.Reload
                               else request.parameters))
        except Exception as err:  # noqa: BLE001 - the master hears why, the server serves on
            return refuse(P.ErrorKind.PROTOCOL, f"the unit file cannot be served: "
                          f"{type(err).__name__}: {err}")
        if set(units) != set(self.units):
            return refuse(P.ErrorKind.PROTOCOL, f"the unit file has units "
                          f"{', '.join(sorted(units))}; this server serves "
                          f"{', '.join(sorted(self.units))}")
        self.units.clear()
        self.units.update(units)
        self._seconds_per_h.clear()        # new units: their speed is measured again
        log.info("reloaded units %s", ", ".join(units))
        return encode_batch([P.Ok()])

    def _reply(self, items: list, steps: dict) -> list[bytes]:
        """Serve ``items``, learning how long each unit takes per second simulated."""
        t0 = time.perf_counter()
        out = guarded(lambda: reply(items, self.max_message_size))
        elapsed = time.perf_counter() - t0
        for name, h in steps.items():
            if h > 0:
                self._seconds_per_h[name] = elapsed / h
        return out

    def _long(self, steps: dict) -> bool:
        """True if stepping the units ``steps`` names (unit -> simulated seconds) is expected
        to take longer than ``offload_after``."""
        for name, h in steps.items():
            if h > 0:
                rate = self._seconds_per_h.get(name)
                if rate is None or rate * h > self.offload_after:
                    return True
        return False

    def _log_refusals(self, poll_ms: int) -> None:
        from zmq.utils.monitor import recv_monitor_message
        peers: dict[int, str] = {}          # connection fd -> the peer's address
        # A failed handshake's event carries an error code, not the connection: the refused
        # connection is the one open alone, or else the next to close (a refused client is
        # disconnected at once), and the log names it then.
        refused: list[str] = []
        while self._running:
            if not self._monitor.poll(poll_ms):
                continue
            event = recv_monitor_message(self._monitor)
            kind, fd = event["event"], event.get("value")
            if kind == zmq.EVENT_ACCEPTED:
                peers[fd] = _peer(fd)
                if peers[fd] == UNREADABLE:
                    log.info("a client connected and closed before its address could be read")
                else:
                    log.info("a client connected from %s", peers[fd])
            elif kind == zmq.EVENT_DISCONNECTED:
                peer = peers.pop(fd, UNREADABLE)
                if refused:
                    log.warning("refused a client from %s: handshake failed (%s)", peer,
                                refused.pop(0))
                log.info("the client from %s left", peer)
                self._closed_fds.append(fd)     # (deque: safe across threads)
            else:
                why = "authentication (its key is not authorized)" \
                    if kind == zmq.EVENT_HANDSHAKE_FAILED_AUTH \
                    else "protocol (encryption or version mismatch)"
                if len(peers) == 1:
                    log.warning("refused a client from %s: handshake failed (%s)",
                                next(iter(peers.values())), why)
                else:
                    refused.append(why)

    def stop(self) -> None:
        """Ask :meth:`serve_forever` to return (safe from a signal handler or thread)."""
        self._running = False

    def close(self) -> None:
        self._running = False
        self.sock.disable_monitor()
        self._monitor.close(linger=0)
        self.sock.close(linger=0)
        if self._auth is not None:
            self._auth.stop()
        self._ctx.term()


class _OnlyKey:
    """ZAP credentials that let in one client public key (Z85)."""

    def __init__(self, key: bytes):
        self.key = key

    def callback(self, domain: str, key: bytes) -> bool:
        return key == self.key


def is_loopback(endpoint: str) -> bool:
    """True if ``endpoint`` (``tcp://HOST:PORT``, ``ipc://``, ``inproc://``) can be reached
    only from this machine."""
    scheme, _, rest = endpoint.partition("://")
    if scheme in ("ipc", "inproc"):
        return True
    host = rest.rsplit(":", 1)[0].strip("[]")
    return host in ("localhost", "::1") or host.startswith("127.")


def _reraise(err: Exception):
    raise err


def _envelope(frames: list) -> tuple[list, list]:
    """A ROUTER message split into its envelope (peer identity and the REQ delimiter) and the
    request frames."""
    for i, f in enumerate(frames):
        if not f:
            return frames[:i + 1], frames[i + 1:]
    return frames[:1], frames[1:]


def _peer(fd: int) -> str:
    """``host:port`` of the peer on socket ``fd``, or :data:`UNREADABLE` (the descriptor
    closed, or already another's: the log says so rather than the thread that watches
    connections dying)."""
    return address_of(fd) or UNREADABLE


#: How the log names a client whose connection closed before its address could be read (a
#: refused client's reconnection, a port check).
UNREADABLE = "an address no longer readable"


#: The requests that replace a server's units.
_NEW_UNITS = (P.Reload, P.SetParameters)


def units_from_file(path: str, own_paths: bool = False) -> dict:
    """The units a UNIT_FILE defines: a model file's top-level atomic subsystems (with its
    ``simulation:`` options), or the one subsystem of a library file. ``path`` may be the
    file's text itself (as :func:`cosim.modelfile.load` reads it); ``own_paths``: the file
    is the master's own (see :func:`cosim.modelfile.load`)."""
    from cluster.unit_files import units_of
    from cosim.modelfile import load
    return units_of(load(path, own_paths=own_paths))


def main(argv=None) -> int:
    """``cosim serve UNIT_FILE [--bind ADDR] [--curve-secret FILE --authorized DIR]``."""
    ap = argparse.ArgumentParser(prog="cosim serve", description="Serve units over ZeroMQ.")
    ap.add_argument("unit_file", help="model file (its top-level atomic subsystems) or "
                                      "subsystem file")
    ap.add_argument("--bind", default="tcp://127.0.0.1:5555",
                    help="endpoint (default loopback; ':0' picks a free port)")
    ap.add_argument("--curve-secret", metavar="FILE", help="server secret key file (CURVE)")
    ap.add_argument("--authorized", metavar="DIR", help="directory of client public keys")
    ap.add_argument("--keys-stdin", action="store_true",
                    help="read a run's CURVE keys from standard input (three Z85 lines: the "
                         "server's public and secret key, the one client public key let "
                         "in): how a master's zmq backend starts its own servers")
    ap.add_argument("--insecure", action="store_true",
                    help="serve on an address other machines can reach without CURVE keys "
                         "(refused otherwise: anyone who reaches it could drive the units)")
    ap.add_argument("--plugin", action="append", default=[], metavar="MODULE",
                    help="import MODULE first (it registers its block types with "
                         "cosim.model.registry.register_block_type); repeatable")
    ap.add_argument("--max-message-size", type=int, default=DEFAULT_MAX_SIZE, metavar="BYTES",
                    help="larger requests are refused with an error reply")
    ap.add_argument("--max-ticks", type=int, default=None, metavar="N",
                    help="most base steps one DoStep may run (default 10^6): bounds the work "
                         "of one request")
    ap.add_argument("--step-deadline", type=float, default=600.0, metavar="SECONDS",
                    help="longest wall time one DoStep may run (default 600); a step past it "
                         "stops with an error naming the limit")
    ap.add_argument("--reloadable", action="store_true",
                    help="accept Reload: a master replaces the units with those of a unit "
                         "file it sends (for a master's own servers, never a team's)")
    ap.add_argument("--max-request-mb", type=float, default=256.0, metavar="MB",
                    help="most memory one request may make a unit's logs take (default "
                         "256); a step over it is refused before it starts")
    ap.add_argument("--max-session-mb", type=float, default=1024.0, metavar="MB",
                    help="most memory a unit's logs may hold from its Initialize on "
                         "(default 1024); a step that would pass it is refused")
    ap.add_argument("--owner-lease", type=float, default=60.0, metavar="SECONDS",
                    help="a unit's master may stay silent this long (default 60) before "
                         "another master may take the unit over; until then others are "
                         "refused ('busy') except for read-only requests")
    ap.add_argument("--log-level", default="INFO")
    args = ap.parse_args(argv)
    logging.basicConfig(level=args.log_level, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    keys = None
    if args.keys_stdin:
        lines = sys.stdin.read().split()
        if len(lines) != 3:
            print("cosim serve: error: --keys-stdin expects three Z85 keys on standard input "
                  f"(got {len(lines)} lines)", file=sys.stderr)
            return 2
        public, secret, client = (x.encode() for x in lines)
        keys = RunKeys(public, secret, client, b"")
    if not (keys or args.curve_secret or args.insecure or is_loopback(args.bind)):
        print(f"cosim serve: error: {args.bind} can be reached from other machines and no "
              "CURVE keys were given: anyone who reaches it could drive the units. Give "
              "--curve-secret FILE --authorized DIR (keys from `cosim keys`), bind "
              "tcp://127.0.0.1:PORT, or pass --insecure on a network you trust",
              file=sys.stderr)
        return 2
    try:
        import importlib
        for module in args.plugin:
            importlib.import_module(module)   # chosen by who runs the server, not the file

        def limited(units: dict) -> dict:
            for unit in units.values():
                if args.max_ticks is not None and hasattr(unit, "max_ticks"):
                    unit.max_ticks = args.max_ticks
                if hasattr(unit, "step_deadline"):
                    unit.step_deadline = args.step_deadline
            return units
        if args.reloadable:
            # The file is kept parsed: SetParameters builds its units with other values.
            from cluster.unit_files import UnitTemplate
            # A server started by its master with the run's keys serves that master's own
            # unit files (checked where the master read the model).
            own = keys is not None
            kept = [UnitTemplate(args.unit_file, limited, own)]
            units = kept[0].units()

            def reload(text: str) -> dict:
                template = UnitTemplate(text, limited, own)
                new = template.units()
                if set(new) != set(server.units):
                    raise ValueError(f"the unit file has units {', '.join(sorted(new))}; "
                                     f"this server serves {', '.join(sorted(server.units))}")
                kept[0] = template      # only a file the server serves replaces the last
                return new

            extra = {"reload": reload,
                     "reparameterize": lambda values: kept[0].units(values)}
        else:
            units, extra = limited(units_from_file(args.unit_file, keys is not None)), {}
        server = UnitServer(units, args.bind, curve_secret_key_file=args.curve_secret,
                            authorized_keys_dir=args.authorized,
                            max_message_size=args.max_message_size,
                            owner_lease=args.owner_lease, keys=keys,
                            budget=Budget(int(args.max_request_mb * MB),
                                          int(args.max_session_mb * MB)), **extra)
    except Exception as err:  # noqa: BLE001 - a clear message, not a traceback
        print(f"cosim serve: error: {err}", file=sys.stderr)
        return 2
    print(f"serving {', '.join(units)} on {server.endpoint}", flush=True)

    def stop(*_):
        server.stop()
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        server.serve_forever()
    finally:
        server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
