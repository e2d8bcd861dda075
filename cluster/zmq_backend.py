"""ZeroMQ units: remote units other teams serve, and a backend that runs units as servers.

A unit with an ``address`` in ``CosimConfig.units`` is a remote unit served by another team
(``cosim serve``), whatever the backend: the ``remote`` backend (:class:`RemoteUnits`) runs
it like any registered backend runs its units. The master connects, shakes
hands (protocol version and the unit's description) and sends one message per server per
call, carrying the batch of every unit of that server the call involves. The ``zmq`` backend
runs the other units as local server processes (``python -m cluster.server`` on a model file
written for them; units sharing a ``process`` share one) and re-spawns one that dies, so the
master can restore it from a checkpoint.
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import weakref
from pathlib import Path

from cluster.channel import Channel
from cluster.dataplane import RunKeys
from cluster.liveness import Pulse
from cluster.unit_files import split_parameters, unit_file_data
from cosim.compile.flatten import ALL_OUTPUTS
from cosim.errors import ModelError, TransportError
from cosim.master import protocol as P
from cosim.master.backends import process_groups
from cosim.master.proxy import Backend, Proxy
from cosim.modelfile.writer import emit

__all__ = ["CONNECT_TIMEOUT", "RemoteUnits", "ServedProxy", "ZmqBackend", "ZmqProxy"]

#: Default seconds to reach a unit server and shake hands.
CONNECT_TIMEOUT = 10.0
#: Seconds a spawned server may be stopped (SIGSTOP) before it counts as gone.
FROZEN_AFTER = 2.0


class ZmqProxy(Proxy):
    """The master's handle on one remote unit: its requests travel on a :class:`Channel`
    (its own, or one shared with the other units of the same server).

    Parameters
    ----------
    name : str
        Unit name (as served).
    address : str or Channel
        ``tcp://host:port`` of the unit server, or an open (patient) connection to it.
    timeout : float
        Seconds a batch may take.
    curve_server_public, curve_client_keys : str, optional
        For a CURVE server, when ``address`` is a string (see :class:`Channel`).
    connect_timeout : float, optional
        Seconds to reach the server and shake hands (default: ``timeout``, at most
        :data:`CONNECT_TIMEOUT`). A refused handshake fails at once; the error says which
        of nothing listening, handshake refused (and why) or a slow server it was.
    """

    #: Seconds between checks while waiting for a reply (a patient channel's timeout).
    POLL = 0.05

    def __init__(self, name: str, address, timeout: float = 60.0, *,
                 curve_server_public: str | None = None,
                 curve_client_keys: str | None = None,
                 connect_timeout: float | None = None):
        self.name = name
        self.timeout = timeout
        self.connect_timeout = min(timeout, CONNECT_TIMEOUT) if connect_timeout is None \
            else connect_timeout
        owned = not isinstance(address, Channel)
        self.conn = Channel(address, self.POLL, curve_server_public=curve_server_public,
                            curve_client_keys=curve_client_keys, patient=True) \
            if owned else address
        try:
            self.description = self.hello()
        except BaseException:
            if owned:               # a refused channel would retry (and be watched) forever
                self.conn.close()
            raise

    @property
    def address(self) -> str:
        return self.conn.address

    def hello(self) -> P.UnitDescription:
        """Handshake: protocol versions must agree; returns the unit's description."""
        conn = self.conn
        try:
            (reply,) = conn.result_watched(
                self.name, self.submit([P.Hello(P.PROTOCOL_VERSION, uuid.uuid4().hex)]),
                lambda: conn.connection_trouble(final=False), self.connect_timeout)
        except TransportError as err:
            why = conn.connection_trouble(final=True) or err.message
            raise TransportError(self.name, "Hello", f"{why} (connect_timeout "
                                 f"{self.connect_timeout:g} s)") from None
        if isinstance(reply, P.ErrorReply):
            raise TransportError(self.name, "Hello", reply.message)
        if not isinstance(reply, P.Welcome) or reply.protocol_version != P.PROTOCOL_VERSION:
            raise TransportError(self.name, "Hello", f"protocol version mismatch: server "
                                 f"{getattr(reply, 'protocol_version', '?')}, master "
                                 f"{P.PROTOCOL_VERSION}")
        return reply.unit

    def where(self) -> dict:
        """The server's address."""
        return {"address": self.address}

    def submit(self, requests):
        self.conn.submit(self.name, requests)
        return requests

    def flush(self) -> None:
        self.conn.flush()

    def result(self, requests):
        return self._await(requests, self.timeout)

    def lane(self):
        return self.conn.lane().watched(self._gone, self.timeout)

    def heartbeat(self, timeout: float) -> bool:
        """True if the server answers a Heartbeat within ``timeout`` s."""
        try:
            self._await(self.submit([P.Heartbeat()]), timeout)
            return True
        except TransportError:
            return False

    def _await(self, requests, timeout: float) -> list:
        """The replies to ``requests``, waiting at most ``timeout`` s."""
        return self.conn.result_watched(self.name, requests, self._gone, timeout)

    def _gone(self) -> str | None:
        """Why the server can no longer answer, when that is known before the timeout."""
        return None

    def recover(self, deadline: float) -> None:
        """Wait (heartbeats) until the server answers again, or raise TransportError."""
        while time.time() < deadline:
            if self.heartbeat(min(1.0, max(0.05, deadline - time.time()))):
                return
        raise TransportError(self.name, "recover", f"{self.address} unreachable")

    def close(self) -> None:
        self.conn.close()


class ServedProxy(ZmqProxy):
    """A unit another team serves from its own file: it logs what that file selects (every
    output and port, see :func:`cluster.unit_files.units_of`), not what this master
    selects; its log batches keep the signals the master's selection for it names
    (``shown``: the unit's ``SimulationConfig.log``, in its own names; None or one with
    ``"*"`` keeps every signal), so its columns are those of the unit run in process.

    While a reply is awaited, ``pulse`` (a :class:`~cluster.liveness.Pulse` of its server)
    watches the server: a server frozen or gone fails the call within seconds (naming the
    server, and how far the unit's step had come), not at the timeout; a timeout says how
    the step progressed."""

    def __init__(self, name: str, address, timeout: float = 60.0, *, shown=None,
                 pulse: Pulse | None = None, **options):
        self.watch = self._gone if pulse is None else pulse.watch(name)
        super().__init__(name, address, timeout, **options)
        self.shown = None if shown is None or ALL_OUTPUTS in shown else frozenset(shown)

    def lane(self):
        return self.conn.lane().watched(self.watch, self.timeout)

    def _await(self, requests, timeout: float) -> list:
        return self.conn.result_watched(self.name, requests, self.watch, timeout)

    def result(self, requests):
        replies = super().result(requests)
        if self.shown is None:
            return replies
        shown = self.shown
        return [P.LogBatch({k: v for k, v in r.signals.items() if k in shown})
                if type(r) is P.LogBatch else r for r in replies]


class _ServerProcess:
    """One spawned ``cluster.server`` process, shared by the proxies of the units it hosts.

    On Linux the process gets SIGTERM when its master's process dies (``PR_SET_PDEATHSIG``),
    so a master that is killed leaves no server behind holding its port. (The signal comes
    when the *thread* that started the child ends: every server is started from
    :data:`_SPAWNER`, a thread that lives as long as the process, so that a co-simulation
    made in one thread runs on from another.) A master that returns or raises stops its
    servers through :meth:`ZmqBackend.stop`, a CoSimulation closed or left as a context
    manager, garbage-collected or alive at interpreter exit through the backend's
    finalizer.
    """

    def __init__(self, unit_file: Path, plugins=(), reloadable: bool = False, *,
                 wait: bool = True, keys: RunKeys | None = None,
                 spares: _Spares | None = None):
        self.unit_file = unit_file
        self.plugins = tuple(plugins)
        self.reloadable = reloadable
        self.keys = keys
        self.spares = spares
        self.generation = 0
        self._launch()
        if wait:
            self.ready()

    def _launch(self, warm: bool = False) -> bool:
        """Start the server: in a new process, or (``warm``) in a spare one when there is
        one (:mod:`cluster.spare`: its interpreter started and its imports done); True if
        a spare was taken."""
        self._stopped_since = None      # since when the process is seen stopped
        args = _server_args(self.unit_file, self.plugins, self.reloadable, self.keys)
        spare = self.spares.take() if warm and self.spares is not None else None
        self.proc, self._err = _hand(spare, args, self.keys) if spare is not None else \
            _popen(["-m", "cluster.server", *args], self.keys)
        self.address = None
        return spare is not None

    def ready(self) -> None:
        """Wait until the process serves (its address known); raise ModelError if it
        cannot. A backend launches all its processes first, then waits for each: they
        start (import, build their units) side by side."""
        if self.address is None:
            err, self._err = self._err, None
            with err:
                self.address = _address_of(self.proc, err, self.unit_file)
            self.generation += 1

    def restart(self) -> None:
        """A new server process in place of this one (a spare's, when there is one; the
        spare replaced once the server serves)."""
        self.proc.kill()
        self.proc.wait()
        if self._err is not None:
            self._err.close()
        warm = self._launch(warm=True)
        try:
            self.ready()
        except ModelError:
            if not warm:
                raise
            self._launch()          # the spare failed (not the unit file): a new process
            self.ready()
        if self.spares is not None:
            self.spares.fill()

    def gone(self) -> str | None:
        """Why the process cannot answer — it exited, or it has been stopped (SIGSTOP, a
        debugger) for :data:`FROZEN_AFTER` seconds — or None while it runs. A stopped
        process is told from a slow one by its state, not by the step's timeout."""
        code = self.proc.poll()
        if code is None:
            if not _stopped(self.proc.pid):
                self._stopped_since = None
                return None
            now = time.monotonic()
            if self._stopped_since is None:
                self._stopped_since = now
            elif now - self._stopped_since >= FROZEN_AFTER:
                return (f"its server process (pid {self.proc.pid}) is frozen: stopped "
                        f"(SIGSTOP or a debugger) for {now - self._stopped_since:.1f} s")
            return None
        how = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
        return f"its server process (pid {self.proc.pid}) died ({how})"

    def stop(self) -> None:
        if self._err is not None:
            self._err.close()
            self._err = None
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class _SpawnedProxy(ZmqProxy):
    """A proxy whose server this backend started: a reply is awaited while the process
    lives (its death fails the call at once, not at the timeout), and recovery re-spawns it
    (once for all the units that process hosts: the others find it restarted and
    reconnect)."""

    #: Seconds between checks that the process lives while a reply is awaited: a death is
    #: noticed within this (a check is one read of ``/proc``).
    POLL = 0.01

    def __init__(self, name, server: _ServerProcess, conn: Channel, timeout: float,
                 connect_timeout: float):
        self.server = server
        self._generation = server.generation
        super().__init__(name, conn, timeout, connect_timeout=connect_timeout)

    def _gone(self) -> str | None:
        return self.server.gone()

    def where(self) -> dict:
        """The server's address and process id (a new one after a recovery)."""
        return {"address": self.address, "pid": self.server.proc.pid}

    def recover(self, deadline: float) -> None:
        server = self.server
        if server.generation == self._generation:
            if server.gone() is None and self.heartbeat(0.5):
                return                              # alive: another unit failed
            server.restart()
            self.conn.reconnect(server.address)
        self._generation = server.generation
        super().recover(deadline)


def _stopped(pid: int) -> bool:
    """True if process ``pid`` is stopped (Linux ``/proc``; elsewhere never)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rpartition(b")")[2].split()[0] in (b"T", b"t")
    except (OSError, IndexError):
        return False


def _server_args(unit_file: Path, plugins=(), reloadable: bool = False,
                 keys: RunKeys | None = None) -> list[str]:
    """The arguments of ``python -m cluster.server`` serving ``unit_file`` on a free
    loopback port (with ``reloadable``: it accepts Reload; with ``keys``: CURVE, the keys
    read from its standard input, never from disk)."""
    return [str(unit_file), "--bind", "tcp://127.0.0.1:0", "--log-level", "WARNING",
            *[arg for m in plugins for arg in ("--plugin", m)],
            *(["--reloadable"] if reloadable else []),
            *(["--keys-stdin"] if keys is not None else [])]


def _popen(args: list[str], keys: RunKeys | None = None, *, stdin: bool = False):
    """Start ``python *args`` (from :data:`_SPAWNER`: it dies with this process); the
    process and the file its log goes to (read by :func:`_address_of`). With ``keys``,
    they are written to its standard input and that closed; with ``stdin``, its standard
    input is left open (a spare's: :func:`_hand`)."""
    # The server's log goes to a file, not a pipe nobody reads once it runs: a pipe would
    # fill after 64 KiB of warnings and block the server mid-run.
    err = tempfile.TemporaryFile("w+")
    proc = _SPAWNER.call(lambda: subprocess.Popen(
        [sys.executable, *args],
        stdin=subprocess.PIPE if keys is not None or stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=err, text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        preexec_fn=_die_with_parent))
    if keys is not None:
        with proc.stdin:
            proc.stdin.write(_keys_text(keys))
    return proc, err


def _keys_text(keys: RunKeys) -> str:
    """What ``--keys-stdin`` reads: three Z85 lines."""
    return b"\n".join((keys.server_public, keys.server_secret,
                       keys.client_public)).decode() + "\n"


def _hand(spare, args: list[str], keys: RunKeys | None):
    """Make the spare ``(process, log file)`` the server of ``args``: its arguments (and
    keys) written to its standard input, which is then closed."""
    proc, err = spare
    with proc.stdin:
        proc.stdin.write(json.dumps(args) + "\n" + (_keys_text(keys) if keys else ""))
    return proc, err


class _Spares:
    """A warm spare server process (:mod:`cluster.spare`) for a backend's next re-spawn:
    started with the backend's servers, replaced once taken and serving."""

    def __init__(self):
        self.spare = None           # (process, log file) or None

    def fill(self) -> None:
        """Start a spare unless one waits."""
        if self.spare is None:
            self.spare = _popen(["-m", "cluster.spare"], stdin=True)

    def take(self):
        """The waiting spare ``(process, log file)`` (None: none, or it died)."""
        spare, self.spare = self.spare, None
        if spare is not None and spare[0].poll() is not None:
            spare[1].close()
            return None
        return spare

    def stop(self) -> None:
        spare, self.spare = self.spare, None
        if spare is None:
            return
        proc, err = spare
        try:
            proc.stdin.close()      # it ends on end of input (or on SIGTERM, mid-import)
        except OSError:
            pass
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        err.close()


def _address_of(proc, err, unit_file: Path) -> str:
    """The address a launched server serves on, once it does (its first line)."""
    line = proc.stdout.readline()
    if not line.startswith("serving "):
        proc.wait()
        err.seek(0)
        raise ModelError(f"unit server for {unit_file} did not start: {line}{err.read()}")
    return line.strip().rsplit(" on ", 1)[1]


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the parent dies (Linux; elsewhere a no-op)."""
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


# Loaded before any fork: the child only calls it (nothing to import between fork and exec).
_PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


class _Spawner:
    """A daemon thread, started on first use, that runs the calls given to :meth:`call`
    (the server processes' starts): it ends only with the process."""

    def __init__(self):
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = None
        self._lock = threading.Lock()

    def call(self, fn):
        """``fn()`` run on the spawner thread; its result, or the exception it raised."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name="cosim-spawner",
                                                daemon=True)
                self._thread.start()
        done = concurrent.futures.Future()
        self._jobs.put((fn, done))
        return done.result()

    def _serve(self) -> None:
        while True:
            fn, done = self._jobs.get()
            try:
                done.set_result(fn())
            except BaseException as err:  # noqa: BLE001 - handed to the caller
                done.set_exception(err)


_SPAWNER = _Spawner()


def _stop_servers(servers: list, spares: _Spares) -> None:
    """Stop ``servers`` (all told first, then awaited: each takes up to its poll interval
    to notice) and empty the list, and the spare. A backend's finalizer: it holds no
    backend."""
    for server in servers:
        if server.proc.poll() is None:
            server.proc.terminate()
    spares.stop()
    for server in servers:
        server.stop()
    servers.clear()


def _plugins(diagram) -> list[str]:
    """Modules of the block classes in ``diagram`` outside cosim's own library: the spawned
    server imports them, so their registered block types are known there too."""
    from cosim.model.diagram import Diagram
    mods, stack = set(), [diagram]
    while stack:
        d = stack.pop()
        for b in d.blocks:
            if isinstance(b, Diagram):
                stack.append(b)
            elif not type(b).__module__.startswith(("blocks.", "cosim.")):
                mods.add(type(b).__module__)
    return sorted(mods)


class RemoteUnits(Backend):
    """The ``remote`` backend: units that other teams serve, those with an ``address`` in
    ``CosimConfig.units`` (with ``curve_server_public`` / ``curve_client_keys`` for a CURVE
    server), whatever the backend that runs the others. Units at one address share a
    :class:`Channel`."""

    def __init__(self, cosim_config):
        self.cfg = cosim_config
        self.connections: dict[tuple, Channel] = {}
        self.pulses: dict[tuple, Pulse] = {}

    def start(self, specs) -> dict:
        proxies = {}
        for spec in specs:
            opts = self.cfg.options(spec.name)
            if opts.address is None:
                raise ModelError(f"unit {spec.name!r} has no address: the remote backend "
                                 "runs only units other teams serve; give it "
                                 "units={name: {'address': 'tcp://host:port'}} or choose "
                                 "another backend")
            if opts.process is not None:
                raise ModelError(f"unit {spec.name!r} has both an address (a remote unit) "
                                 "and a process (a spawned one): keep one")
            key = (opts.address, opts.curve_server_public, opts.curve_client_keys)
            if key not in self.connections:
                self.connections[key] = Channel(
                    opts.address, ZmqProxy.POLL,
                    curve_server_public=opts.curve_server_public,
                    curve_client_keys=opts.curve_client_keys, patient=True)
                self.pulses[key] = Pulse(self.connections[key])
            proxies[spec.name] = ServedProxy(spec.name, self.connections[key],
                                             self.cfg.timeout, shown=spec.config.log,
                                             connect_timeout=self.cfg.connect_timeout,
                                             pulse=self.pulses[key])
        return proxies

    def stop(self) -> None:
        for pulse in self.pulses.values():
            pulse.close()
        for conn in self.connections.values():
            conn.close()
        self.connections, self.pulses = {}, {}


class ZmqBackend(Backend):
    """Runs every unit as a local server process (``cosim serve`` on a unit file).

    Per-unit option (``CosimConfig.units[name]``): ``process``, a name: the units that share
    it are hosted by one server process (by default each unit has its own). On 2 cores, 8
    small units in 2 processes exchange faster than in 8, while heavy units want a process
    (a core) each.

    The servers accept :class:`~cosim.master.protocol.Reload` (they are this master's own):
    :meth:`reload` sends each the unit file of the next run's units, which it builds as a
    new server would; when the file differs from the server's last only in its parameter
    values (the rule in a parameter study), the values alone
    (:class:`~cosim.master.protocol.SetParameters`: the server builds its units from the file
    it keeps parsed, :class:`~cluster.unit_files.UnitTemplate`).
    """

    reloads = True

    def __init__(self, cosim_config):
        self.cfg = cosim_config
        self.proxies: dict = {}
        self.servers: list[_ServerProcess] = []
        #: This run's CURVE keys: its servers let in only this master (no other local
        #: process can drive, read or reload them).
        self.keys = RunKeys.new()
        #: A warm server process for the next re-spawn, when the run recovers from
        #: failures (it has a checkpoint period and restarts).
        self.spares = _Spares()
        # Stops the servers when the backend is stopped, garbage-collected or alive at exit.
        self._finalizer = weakref.finalize(self, _stop_servers, self.servers, self.spares)
        self.connections: list[Channel] = []
        self._dir = None
        self._layout: list[tuple] = []
        #: Per server, the structure of the unit file it builds its units from (what a
        #: SetParameters keeps: :func:`~cluster.unit_files.split_parameters`).
        self._structures: list[dict] = []
        #: Reloads that sent parameter values only, and those that sent unit files.
        self.reparameterized = self.reloaded = 0

    def _check(self, specs) -> None:
        for spec in specs:
            if spec.subsystem is None:
                raise ModelError(f"unit {spec.name!r} cannot run as a server process (it is "
                                 "not a subsystem); give it an address or use another backend")
            events = getattr(spec.subsystem, "events", ())
            if events:
                # A unit file cannot carry them (a callback is Python code): refuse rather
                # than run the unit without them.
                names = ", ".join(e.name for e in events)
                raise ModelError(f"unit {spec.name!r} has events ({names}) that a server "
                                 "process cannot be given; run it on the local or ray backend")

    def _groups(self, specs) -> tuple[dict, list[tuple]]:
        """The units of each server process, and the layout they make: per process its
        key, unit names and plugin modules (what a reload must find unchanged)."""
        groups = process_groups(specs, self.cfg.units, self.cfg.processes)
        layout = [(key, tuple(s.name for s in group),
                   tuple(sorted({m for s in group for m in _plugins(s.subsystem)})))
                  for key, group in groups.items()]
        return groups, layout

    def start(self, specs) -> dict:
        self._check(specs)
        groups, self._layout = self._groups(specs)
        for (kind, name), group in groups.items():
            if self._dir is None:
                self._dir = tempfile.TemporaryDirectory(prefix="cosim-units-")
            # Kind in the name: unit "a" and a process called "a" must not share a file.
            path = Path(self._dir.name) / f"{kind}-{name}.yaml"
            data = unit_file_data(group, path.stem)
            emit(data, path)
            self._structures.append(split_parameters(data)[0])
            self.servers.append(_ServerProcess(path, sorted({m for spec in group
                                                             for m in _plugins(spec.subsystem)}),
                                               reloadable=True, wait=False,
                                               keys=self.keys, spares=self.spares))
        if self.cfg.checkpoint_every and self.cfg.max_restarts:
            # The run recovers from failures: a spare that imports beside the servers (not
            # awaited) lets a recovery re-spawn a lost server without an interpreter's start
            # and imports (0.5-1 s of a loaded 2-core machine, against some 30 ms).
            self.spares.fill()
        # Launched all before any is awaited: they import and build their units side by side.
        for group, server in zip(groups.values(), self.servers):
            server.ready()
            conn = Channel(server.address, _SpawnedProxy.POLL, patient=True, keys=self.keys)
            self.connections.append(conn)
            for spec in group:
                self.proxies[spec.name] = _SpawnedProxy(spec.name, server, conn,
                                                        self.cfg.timeout,
                                                        self.cfg.connect_timeout)
        return dict(self.proxies)

    def reload(self, specs) -> dict:
        """Send every server the unit file of its units in ``specs``; their new proxies
        (see :meth:`Backend.reload <cosim.master.proxy.Backend.reload>`)."""
        self._check(specs)
        groups, layout = self._groups(specs)
        if layout != self._layout:
            raise ModelError(f"the units group into other server processes (now "
                             f"{_describe(layout)}, were {_describe(self._layout)})")
        for server in self.servers:
            why = server.gone()
            if why is not None:
                raise ModelError(why)
        sent = []
        for i, (((kind, name), group), conn) in enumerate(zip(groups.items(),
                                                              self.connections)):
            path = Path(self._dir.name) / f"{kind}-{name}.yaml"
            data = unit_file_data(group, path.stem)
            structure, values = split_parameters(data)
            if structure == self._structures[i]:
                request = [P.SetParameters(values)]     # the server's file, other values
            else:
                request = [P.Reload(emit(data, path))]
            conn.submit(group[0].name, request)
            sent.append((group[0].name, conn, request, structure))
        for i, ((unit, conn, request, structure), server) in enumerate(zip(sent,
                                                                           self.servers)):
            (reply,) = conn.result_watched(unit, request, server.gone, self.cfg.timeout)
            if not isinstance(reply, P.Ok):
                raise ModelError(f"the server of unit {unit!r} did not reload: "
                                 f"{getattr(reply, 'message', reply)}")
            self._structures[i] = structure
            if type(request[0]) is P.SetParameters:
                self.reparameterized += 1
            else:
                self.reloaded += 1
        self.proxies = {}
        for group, server, conn in zip(groups.values(), self.servers, self.connections):
            for spec in group:
                self.proxies[spec.name] = _SpawnedProxy(spec.name, server, conn,
                                                        self.cfg.timeout,
                                                        self.cfg.connect_timeout)
        return dict(self.proxies)

    def stop(self) -> None:
        for conn in self.connections:
            conn.close()
        _stop_servers(self.servers, self.spares)
        self.proxies, self.connections = {}, []
        self._structures = []
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None


def _describe(layout: list[tuple]) -> str:
    """A layout (:meth:`ZmqBackend._groups`) as ``"[a, b] [c]"``."""
    return " ".join(f"[{', '.join(names)}]" for _, names, _ in layout) or "none"

