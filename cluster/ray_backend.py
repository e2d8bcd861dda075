"""The Ray backend: units live in Ray actors anywhere on a Ray cluster.

Ray places the actors (per-unit CPUs, custom resources, node affinity), restarts them when they
die and tells the master when they are gone. The data do not travel as actor calls (about
1 ms each here): each actor serves its units on a ZeroMQ socket (:mod:`cluster.dataplane`)
and the master talks to it directly, one message per actor per call, all actors' messages in
flight at once. With no cluster given, a local Ray instance is started (the embedded
default); ``CosimConfig(address=...)`` joins an existing cluster (a Ray already started in
this process on another cluster is an error naming both addresses; Ray Client addresses,
``ray://``, are refused: the master must reach every node's data-plane ports).

Each actor checks the driver's cosim and protocol versions when it starts
(:mod:`cluster.versions`), binds its data-plane port in ``CosimConfig.ports`` when given, and
the master checks that it can reach that port before the run starts. Liveness is cosim's
own: the master keeps a heartbeat connection to every actor (ZeroMQ heartbeats, answered by
the actor's I/O thread even while its units step), and a lost actor is re-placed by cosim
on a surviving node at once (the old one killed, never restarted by Ray, and its connection
replaced, so a late reply from it cannot reach the run), without waiting for Ray's verdict
on the node (~15 s of failed health checks).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time

import socket

import ray
import zmq

from cluster.channel import Channel
from cluster.dataplane import RunKeys, serve, watch
from cluster.reach import check_reachable
from cluster.versions import check as check_versions
from cluster.versions import versions
from cosim.errors import ModelError, TransportError
from cosim.master.backends import process_groups
from cosim.master.proxy import Backend, Proxy
from cosim.modelfile.writer import emit

__all__ = ["Heartbeat", "RayBackend", "RayProxy", "SpareActor", "await_actors",
           "await_placement", "check_ports", "ensure_ray", "live_nodes", "node_answers",
           "notices_beside_progress_bars", "silent_nodes", "taken", "unplaceable",
           "unschedulable", "uploaded"]

log = logging.getLogger("cosim.ray")

#: Seconds a unit actor or sweep puller may wait for its resources before the wait is
#: reported (naming the resources and what the cluster offers and has free).
NOTICE = 2.0


def ensure_ray(address: str | None = None) -> None:
    """Start (or join) Ray once per process, quietly: Ray's own notices (such as "Token
    authentication is enabled") are printed as whole ``ray: ...`` lines that never break a
    progress bar (:func:`notices_beside_progress_bars`).

    Parameters
    ----------
    address : str, optional
        The cluster to join: ``"auto"`` (the cluster of this machine), or the head's
        ``host:port``. When Ray is already initialised in this process, ``host:port`` must
        name the cluster it is connected to (``"auto"`` accepts it).

    Raises
    ------
    ModelError
        A ``ray://`` (Ray Client) address; or Ray already connected to another cluster,
        naming both addresses.
    """
    if address is not None and address.startswith("ray://"):
        raise ModelError(f"address {address!r}: Ray Client (ray://) is not supported: the "
                         "master exchanges data directly with every node's unit actors, "
                         "which a client outside the cluster cannot reach; run the driver on "
                         "a node of the cluster and give the head's host:port (or 'auto')")
    if ray.is_initialized():
        if address not in (None, "auto"):
            current = ray.get_runtime_context().gcs_address
            if _canonical(address) != _canonical(current):
                raise ModelError(f"Ray is already initialised in this process, connected to "
                                 f"{current}, but address {address!r} was asked; call "
                                 "ray.shutdown() first, or leave address out to use the "
                                 "cluster Ray is connected to")
        return
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # ray.init(configure_logging=False) removes every handler of the "ray" logger, which
    # does not propagate: a notice logged during the start (token authentication) would
    # reach logging's last resort and print bare. It goes through ours meanwhile.
    last = logging.lastResort
    logging.lastResort = _LastResort(last)
    try:
        ray.init(address=address, include_dashboard=False, log_to_driver=False,
                 configure_logging=False)
    finally:
        logging.lastResort = last
    notices_beside_progress_bars()


def uploaded(runtime_env: dict | None) -> dict | None:
    """``runtime_env`` with its local ``working_dir`` and ``py_modules`` directories
    packed and uploaded to the cluster (replaced by their ``gcs://`` URIs, by content: an
    unchanged directory is uploaded once), so that they can be given to single actors and
    tasks: Ray itself uploads local directories only for the whole job (``ray.init``), and
    cosim ships them per run. Ray must be initialised.

    Uses the functions ``ray.init`` uses for that (Ray's internal
    ``ray._private.runtime_env``); ``.gitignore`` files and ``excludes`` are honoured.
    """
    if not runtime_env or not ({"working_dir", "py_modules"} & set(runtime_env)):
        return runtime_env
    from ray._private.runtime_env.py_modules import upload_py_modules_if_needed
    from ray._private.runtime_env.working_dir import upload_working_dir_if_needed
    from ray._private.worker import global_worker
    scratch = global_worker.node.get_runtime_env_dir_path()
    env = upload_py_modules_if_needed(dict(runtime_env), include_gitignore=True,
                                      scratch_dir=scratch, logger=log)
    env = upload_working_dir_if_needed(env, include_gitignore=True, scratch_dir=scratch,
                                       logger=log)
    env.pop("excludes", None)           # used by the upload only
    return env


def _canonical(address: str) -> str:
    """``ip:port`` of a ``host:port`` address (a host name resolved)."""
    host, _, port = address.rpartition(":")
    try:
        host = socket.gethostbyname(host)
    except OSError:
        pass
    return f"{host}:{port}"


class _ProgressSafeHandler(logging.Handler):
    """Writes a record as one line through ``tqdm.write``: a progress bar on the terminal is
    cleared first and drawn again below the line."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            from tqdm import tqdm
            tqdm.write(self.format(record), file=sys.stderr)
        except Exception:  # noqa: BLE001 - logging must never raise (logging's own rule)
            self.handleError(record)


class _LastResort(logging.Handler):
    """logging's last resort (records no handler took) that prints Ray's records as
    ``ray: ...`` lines beside progress bars, and hands the others to ``fallback``."""

    def __init__(self, fallback: logging.Handler | None):
        super().__init__(logging.WARNING)
        self.fallback = fallback
        self.ray = _ProgressSafeHandler()
        self.ray.setFormatter(logging.Formatter("ray: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        if record.name == "ray" or record.name.startswith("ray."):
            self.ray.handle(record)
        elif self.fallback is not None:
            self.fallback.handle(record)


def notices_beside_progress_bars() -> None:
    """Print Ray's Python log records through ``tqdm.write``, as ``ray: ...`` lines.

    Ray's driver logs to stderr through its own plain handler, which writes into the middle
    of a progress bar's line ("Token authentication is enabled ..." on every run). That
    handler is replaced by one that clears the bars, writes the whole line and draws them
    again; so is logging's last resort, which prints Ray's notices bare when Ray has no
    handler of its own (``configure_logging=False``) and the application none either.
    Handlers an application added are left alone. Idempotent.
    """
    logger = logging.getLogger("ray")
    if any(type(h) is _ProgressSafeHandler for h in logger.handlers):
        return
    plain = [h for h in logger.handlers if type(h).__name__ == "PlainRayHandler"]
    # Without Ray's handler (``ray.init(configure_logging=False)``) and no handler of the
    # application's, a notice would reach logging's last resort: printed bare, unprefixed.
    if not plain and (logger.handlers or logging.getLogger().handlers):
        return
    handler = _ProgressSafeHandler()
    handler.setFormatter(logging.Formatter("ray: %(message)s"))
    for h in plain:
        logger.removeHandler(h)
    logger.addHandler(handler)


@ray.remote(max_concurrency=4)
class UnitActor:
    """Hosts units (one, or several that share a ``process``) and serves them on its
    data-plane socket.

    Made in two steps, so that the master knows when Ray has placed it (:meth:`placed`
    answers as soon as it exists: its arguments are plain) apart from the units' start,
    which may fail on the node (:meth:`start`: a module missing there, another version).

    Parameters
    ----------
    generation : int
        How often the units were re-placed (0: the first actor); in :meth:`where`.
    """

    def __init__(self, generation: int = 0):
        self.generation = generation
        self.ip = ray.util.get_node_ip_address()
        self.units, self.endpoint, self.template = {}, None, None

    def placed(self) -> str:
        """This actor's node id (it exists: Ray has placed it)."""
        return ray.get_runtime_context().get_node_id()

    def warm(self) -> str:
        """Import and build what a unit actor's start needs first (a spare's preparation,
        :class:`SpareActor`); this actor's node id."""
        from cluster.spare import warm_up
        warm_up()
        return self.placed()

    def start(self, specs, keys=None, unit_file: str | None = None, driver=None,
              ports=None, generation: int | None = None) -> dict:
        """Build the units of ``specs`` and serve them; :meth:`where` it serves them.

        Parameters
        ----------
        specs : list of UnitSpec
        keys : RunKeys, optional
        unit_file : str, optional
            See :meth:`reload`.
        driver : dict, optional
            The driver's :func:`~cluster.versions.versions`: a node with others refuses.
        ports : (int, int), optional
            Bind the data plane to a port in ``[lo, hi]``.
        generation : int, optional
            This actor's generation, when it is another than it was made with (a spare
            taking a lost actor's place).
        """
        if generation is not None:
            self.generation = generation
        if driver is not None:
            check_versions(driver, f"the unit actor of {', '.join(s.name for s in specs)}")
        self.units = _units(specs)
        self.endpoint, _ = serve(self.units, self.ip, keys, ports)
        self.template = _template(unit_file)
        return self.where()

    def reload(self, specs, unit_file: str | None = None) -> None:
        """Host the units of ``specs`` (the same names) instead of the current ones, built
        as a new actor builds them; between runs (the data plane serves the new ones from
        its next message on). ``unit_file``, the text of a unit file of those units, is kept
        parsed for :meth:`reparameterize`."""
        self._replace(_units(specs))
        self.template = _template(unit_file)

    def reparameterize(self, parameters: dict) -> None:
        """Host the units of the last unit file given with these parameter values instead
        of the current ones (:class:`~cluster.unit_files.UnitTemplate`): bit for bit the
        units of :meth:`reload` with the file of these values."""
        if self.template is None:
            raise ModelError("the actor was given no unit file to build units from")
        self._replace(self.template.units(parameters))

    def _replace(self, units: dict) -> None:
        if set(units) != set(self.units):
            raise ModelError(f"the actor hosts {', '.join(self.units)}, not "
                             f"{', '.join(units)}")
        self.units.clear()              # the dict the data plane serves: replaced in place
        self.units.update(units)

    def where(self) -> dict:
        """Node id, node address, process id, data-plane endpoint and generation of this
        actor."""
        return {"node": ray.get_runtime_context().get_node_id(), "ip": self.ip,
                "pid": os.getpid(), "endpoint": self.endpoint,
                "generation": self.generation}

    def watch(self) -> None:
        """Never returns: its reference fails the moment the actor dies (failure detection)."""
        threading.Event().wait()


def _template(unit_file: str | None):
    from cluster.unit_files import UnitTemplate
    return UnitTemplate(unit_file) if unit_file is not None else None


def _unit_file(group, key) -> tuple[dict, dict, dict] | None:
    """``(structure, parameter values, data)`` of the unit file of ``group``'s units
    (:mod:`cluster.unit_files`), or None when they cannot be written as one (a unit made by
    a factory, events, a block a model file cannot hold): those are always reloaded whole."""
    from cluster.unit_files import split_parameters, unit_file_data
    if any(s.subsystem is None or s.factory is not None or getattr(s.subsystem, "events", ())
           for s in group):
        return None
    try:
        data = unit_file_data(group, f"{key[0]}-{key[1]}")
    except ModelError:
        return None
    return (*split_parameters(data), data)


def _units(specs) -> dict:
    """The units of ``specs`` (UnitSpec), built in this process, by name."""
    from cosim.master.local_unit import LocalUnit
    return {s.name: s.factory() if s.factory is not None else
            LocalUnit(s.subsystem, s.config, s.name) for s in specs}


class Heartbeat:
    """cosim's own liveness check of one actor: a DEALER connection to its data-plane
    socket that sends nothing but ZeroMQ heartbeats (PING every :attr:`INTERVAL` s,
    answered by the actor's ZeroMQ I/O thread, so a unit in a long step still answers).
    The connection is dropped when no PONG came for :attr:`TIMEOUT` s, or at once when the
    actor's process ends (its node's kernel resets the connection): :meth:`lost` says since
    when, until the connection is made again (a process that was only stalled).
    """

    INTERVAL = 0.25
    TIMEOUT = 1.5
    #: Seconds without a heartbeat after which an actor counts as lost even though its
    #: node's raylet still accepts connections (a frozen machine whose kernel answers).
    FROZEN = 10.0

    def __init__(self, endpoint: str, keys: RunKeys | None):
        ctx = zmq.Context.instance()
        self.sock = ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.HEARTBEAT_IVL, int(self.INTERVAL * 1000))
        self.sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, int(self.TIMEOUT * 1000))
        self.sock.setsockopt(zmq.HEARTBEAT_TTL, int(self.TIMEOUT * 1000))
        if keys is not None:
            self.sock.curve_serverkey = keys.server_public
            self.sock.curve_publickey, self.sock.curve_secretkey = (keys.client_public,
                                                                    keys.client_secret)
        self.monitor = watch(self.sock, zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED)
        self.sock.connect(endpoint)
        self.endpoint = endpoint
        self.since: float | None = None     # when the connection was lost
        # The proxies of a unit may be polled from the threads that drive them; a ZeroMQ
        # socket (the monitor) is not thread-safe.
        self._lock = threading.Lock()

    def lost(self) -> float | None:
        """``time.monotonic()`` when the connection was lost, or None while it holds."""
        from zmq.utils.monitor import recv_monitor_message
        with self._lock:
            while not self.monitor.closed and self.monitor.poll(0):
                event = recv_monitor_message(self.monitor)["event"]
                if event == zmq.EVENT_DISCONNECTED:
                    self.since = self.since or time.monotonic()
                elif event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                    self.since = None       # connected (again): it was only stalled
            return self.since

    def close(self) -> None:
        with self._lock:
            self.sock.disable_monitor()
            self.monitor.close(linger=0)
            self.sock.close(linger=0)


class _Host:
    """One unit actor as the master sees it: the actor, its channel (shared by the proxies
    of its units), heartbeat and Ray liveness watch, where it runs, and how to make it again
    (re-placement after a loss, :meth:`replace`)."""

    def __init__(self, backend: RayBackend, key, group, actor, info: dict, conn: Channel):
        self.backend = backend
        self.key, self.group = key, group
        self.names = ", ".join(s.name for s in group)
        self.actor, self.conn = actor, conn
        self.generation = 0
        self._adopt(actor, info)

    def _adopt(self, actor, info: dict) -> None:
        self.actor = actor
        self.location = {k: info[k] for k in ("node", "ip", "pid", "generation")}
        self.heartbeat = Heartbeat(info["endpoint"], self.backend.keys)
        self.watch = actor.watch.remote()

    def gone(self) -> str | None:
        """Why the actor cannot answer any more, or None.

        Its process died (Ray says so within a second when its node lives), or its
        heartbeat stopped and its node's raylet no longer accepts connections (the node
        lost), or no heartbeat came for :attr:`Heartbeat.FROZEN` s. A heartbeat missed
        while the node answers is a stall (a loaded machine), not a loss: waited out.
        """
        done, _ = ray.wait([self.watch], timeout=0)
        if done:
            return f"the unit actor on node {self.location['ip']} died"
        since = self.heartbeat.lost()
        if since is None:
            return None
        where = f"the unit actor on node {self.location['ip']} (pid {self.location['pid']})"
        if not node_answers(self.location["node"]):
            return f"lost {where}: no heartbeat, and its node's raylet does not answer"
        if time.monotonic() - since >= Heartbeat.FROZEN:
            return f"lost {where}: no heartbeat for {Heartbeat.FROZEN:g} s"
        return None

    def replace(self, deadline: float) -> None:
        """Re-place a lost actor: kill it (Ray will not restart it; its connection is
        replaced, so a late reply from it is never read) and start its units anew on a
        surviving node, bumping the generation; the caller restores them from the last
        checkpoint. Nothing to do while the actor answers.

        Raises
        ------
        TransportError
            No surviving node can host the units, or the new actor did not start by
            ``deadline`` (the cause named).
        """
        why = self.gone()
        if why is None:
            return
        lost = self.location
        try:
            ray.kill(self.actor, no_restart=True)
        except Exception:  # noqa: BLE001 - a dead actor's handle may refuse; it is gone
            pass
        self.heartbeat.close()
        self.generation += 1
        opts = self.backend.cfg.options(self.group[0].name)
        if opts.node is not None and opts.node == lost["node"]:
            raise TransportError(self.names, "recover", f"{why}; the units are pinned to "
                                 f"that node (node option {opts.node!r}) and cannot be "
                                 "re-placed elsewhere: drop the node option to let them move")
        # The node itself lost (its raylet silent too), or only the actor's process?
        dead = None if node_answers(lost["node"]) else lost["node"]
        node = _surviving_node(opts, dead, lost["node"])
        if node is None:
            raise TransportError(self.names, "recover", f"{why}; no surviving node offers "
                                 f"{_fmt(_need(opts))} (the nodes offer: "
                                 f"{_offered(_alive(ray.nodes(), exclude=dead))})")
        made = self.backend.spare.take(self, opts, dead) or \
            self.backend.create(self.key, self.group, node=node, generation=self.generation)
        try:
            info = await_actors({self.key: made}, {self.key: (self.names, _need(opts))},
                                max(0.1, deadline - time.time()))[self.key]
        except ModelError as err:
            ray.kill(made[0], no_restart=True)
            raise TransportError(self.names, "recover", f"{why}; re-placing the units "
                                 f"failed: {err}") from err
        try:
            check_reachable(info["endpoint"], self.backend.cfg.connect_timeout,
                            f"the unit actor of {self.names}")
        except ConnectionError as err:
            ray.kill(made[0], no_restart=True)
            raise TransportError(self.names, "recover", f"{why}; {err}") from None
        self.conn.reconnect(info["endpoint"])       # once for all the units of the actor
        self._adopt(made[0], info)
        self.backend.spare.fill()
        log.warning("units %s re-placed from node %s to node %s (generation %d) after: %s",
                    self.names, lost["ip"], info["ip"], self.generation, why)

    def close(self) -> None:
        self.heartbeat.close()
        self.conn.close()
        ray.kill(self.actor, no_restart=True)


class SpareActor:
    """A warm unit actor (its worker process started, :meth:`UnitActor.warm` done) that
    takes a lost actor's place: a re-placement then starts the units in it instead of
    waiting for Ray to start a worker and for its imports (most of a re-placement's time).

    One per backend, asking for no resources, placed where Ray puts it: it serves a lost
    actor that asks for none either (the default), is not pinned to another node, and was
    not on the spare's own node if that node was lost; other losses make a new actor.
    """

    def __init__(self, backend: RayBackend):
        self.backend = backend
        self.actor = self.warmed = None

    def fill(self) -> None:
        """Make a spare unless one exists (a run that recovers: ``checkpoint_every``)."""
        cfg = self.backend.cfg
        if self.actor is not None or not (cfg.checkpoint_every and cfg.max_restarts):
            return
        options = {"num_cpus": 0, "max_restarts": 0, "max_task_retries": 0}
        if self.backend.runtime_env is not None:
            options["runtime_env"] = self.backend.runtime_env
        self.actor = UnitActor.options(**options).remote()
        self.warmed = self.actor.warm.remote()

    def take(self, host: _Host, opts, dead: str | None) -> tuple | None:
        """``host``'s units started in the spare (``(actor, placed ref, started ref)``, as
        :meth:`RayBackend.create` makes), or None when it cannot host them."""
        if self.actor is None or _need(opts):
            return None
        try:
            # Still warming up: waited for (it started before any new actor would), unless
            # a node was lost: then it may be the spare's, which Ray declares dead only
            # after its health checks (~15 s).
            node = ray.get(self.warmed, timeout=0 if dead else self.backend.cfg.connect_timeout)
        except ray.exceptions.RayError:
            node = None
        if node is None or node == dead or opts.node not in (None, node):
            self.close()
            return None
        actor, self.actor = self.actor, None
        backend = self.backend
        return (actor, self.warmed,
                actor.start.remote(host.group, backend.keys, None, versions(), backend.ports,
                                   host.generation))

    def close(self) -> None:
        actor, self.actor = self.actor, None
        if actor is not None:
            try:
                ray.kill(actor, no_restart=True)
            except Exception:  # noqa: BLE001 - already gone
                pass


class RayProxy(Proxy):
    """The master's handle on one unit: data over its actor's :class:`Channel` (shared by
    the units of one actor), liveness from the actor's heartbeat and Ray, re-placement by
    the backend.

    Parameters
    ----------
    name : str
        Unit name.
    host : _Host
        The actor hosting the unit (shared by the units of one actor).
    timeout : float
        Seconds to wait for one batch's replies before raising TransportError.
    """

    #: Seconds between checks that the actor is still alive while waiting for a reply: a
    #: death Ray reports is noticed within this (a check is a ``ray.wait`` of no time).
    POLL = 0.02

    def __init__(self, name: str, host: _Host, timeout: float):
        self.name = name
        self.host = host
        self.conn = host.conn           # the same object across re-placements
        self.timeout = timeout

    @property
    def actor(self):
        return self.host.actor

    @property
    def location(self) -> dict:
        """Where the unit runs now: ``node`` id, ``ip``, ``pid`` and ``generation``."""
        return dict(self.host.location)

    def submit(self, requests):
        self.conn.submit(self.name, requests)
        return requests

    def flush(self) -> None:
        self.conn.flush()

    def result(self, requests):
        return self.conn.result_watched(self.name, requests, self._gone, self.timeout)

    def lane(self):
        return self.conn.lane().watched(self._gone, self.timeout)

    def _gone(self) -> str | None:
        return self.host.gone()

    def where(self) -> dict:
        """Node id, address, process id, endpoint and generation of the actor (asked)."""
        return ray.get(self.actor.where.remote(), timeout=self.timeout)

    def recover(self, deadline: float) -> None:
        """After a failure: re-place the unit's actor if it was lost (once for all the
        units of the actor), else nothing."""
        self.host.replace(deadline)

    def close(self) -> None:
        self.host.close()


def _need(opts) -> dict:
    """The resources an actor with placement ``opts`` (UnitOptions) asks for."""
    need = {"CPU": opts.num_cpus or 0, **(opts.resources or {})}
    return {k: v for k, v in need.items() if v > 0}


def _fmt(need: dict) -> str:
    return ", ".join(f"{k}={v:g}" for k, v in sorted(need.items())) or "nothing"


def _alive(nodes: list[dict], exclude: str | None = None) -> list[dict]:
    return [n for n in nodes if n.get("Alive") and n["NodeID"] != exclude]


def _offered(nodes: list[dict]) -> str:
    """Each node's address and resources (Ray's own ``node:`` and memory entries left out)."""
    return "; ".join(
        f"{n.get('NodeManagerAddress', n['NodeID'][:8])}: " + (", ".join(
            f"{k}={v:g}" for k, v in sorted(n["Resources"].items())
            if not k.startswith(("node:", "memory", "object_store_memory"))) or "nothing")
        for n in nodes) or "no node"


def unschedulable(need: dict, nodes: list[dict], node: str | None = None) -> str | None:
    """Why no alive node of the cluster could ever run work needing ``need``, or None.

    Parameters
    ----------
    need : dict of str to float
        Resources, e.g. ``{"CPU": 1, "gpu_node": 1}``.
    nodes : list of dict
        ``ray.nodes()``: each node's ``NodeID``, ``Alive`` and total ``Resources``.
    node : str, optional
        Only this node (hard affinity) may run it.
    """
    alive = _alive(nodes)
    if node is not None:
        alive = [n for n in alive if n["NodeID"] == node]
        if not alive:
            return f"no alive node has id {node!r}"
    if any(all(n["Resources"].get(k, 0) >= v for k, v in need.items()) for n in alive):
        return None
    missing = sorted(k for k, v in need.items()
                     if not any(n["Resources"].get(k, 0) >= v for n in alive))
    what = (f"no node has {_fmt({k: need[k] for k in missing})}" if missing else
            f"no single node has all of {_fmt(need)}")
    return f"{what} (the nodes offer: {_offered(alive)})"


def unplaceable(opts, nodes: list[dict]) -> str | None:
    """Why no node of the cluster could ever host an actor with placement ``opts``
    (:class:`~cosim.config.UnitOptions`: ``num_cpus``, ``resources``, ``node``), with a
    remedy, or None (see :func:`unschedulable`)."""
    why = unschedulable(_need(opts), nodes, opts.node)
    return None if why is None else \
        f"{why}; change its num_cpus / resources / node options or add a node that has them"


def taken(need: dict, nodes: list[dict], available: dict) -> str | None:
    """Why work needing ``need`` waits although the cluster has those resources: they are
    all taken now (naming each, its total and what is free), or None.

    Parameters
    ----------
    need : dict of str to float
    nodes : list of dict
        ``ray.nodes()``.
    available : dict of str to float
        ``ray.available_resources()``.
    """
    alive = _alive(nodes)
    total = {k: sum(n["Resources"].get(k, 0) for n in alive) for k in need}
    short = {k: v for k, v in need.items() if available.get(k, 0) < v}
    if not short:
        return None
    return ("it needs " + ", ".join(f"{k}={v:g} but all of the cluster's {total[k]:g} "
                                    f"{'is' if total[k] == 1 else 'are'} taken "
                                    f"(free: {available.get(k, 0):g})"
                                    for k, v in sorted(short.items())) +
            " by other actors or tasks")


#: Node id -> its raylet's (address, port): they never change for a node id.
_raylets: dict[str, tuple[str, int]] = {}


def node_answers(node: str, timeout: float = 0.5) -> bool:
    """Whether ``node``'s raylet accepts a connection: cosim's own check that a node lives
    (Ray declares a node dead only after its health checks, ~15 s). ~0.1 ms when it does."""
    if node not in _raylets:
        for n in ray.nodes():
            if n.get("Alive"):
                _raylets[n["NodeID"]] = (n["NodeManagerAddress"], n["NodeManagerPort"])
    if node not in _raylets:
        return False                    # not (or no longer) an alive node of the cluster
    try:
        with socket.create_connection(_raylets[node], timeout=timeout):
            return True
    except OSError:
        return False


def silent_nodes() -> list[dict]:
    """The nodes Ray counts alive whose raylet no longer answers (lost, not yet declared
    dead: Ray might still place work there)."""
    return [n for n in _alive(ray.nodes()) if not node_answers(n["NodeID"])]


def live_nodes() -> list[dict]:
    """``ray.nodes()`` without the nodes Ray still counts alive but whose raylet no longer
    answers (lost: Ray's own verdict comes ~15 s later)."""
    return [n for n in ray.nodes() if n.get("Alive") and node_answers(n["NodeID"])]


def _surviving_node(opts, lost: str | None, last: str | None = None) -> str | None:
    """A live node (:func:`live_nodes`) other than ``lost`` whose resources can host an
    actor with ``opts`` (node ``last`` only when no other can: the actor was lost there,
    though its raylet answers), or None."""
    need = _need(opts)
    fits = [n for n in live_nodes() if n["NodeID"] != lost
            and all(n["Resources"].get(k, 0) >= v for k, v in need.items())]
    if opts.node is not None:
        fits = [n for n in fits if n["NodeID"] == opts.node]
    fits.sort(key=lambda n: n["NodeID"] == last)
    return fits[0]["NodeID"] if fits else None


def await_placement(refs: dict, asked: dict, timeout: float) -> dict:
    """Wait for each actor's (or task's) first answer, reporting a wait for resources
    within :data:`NOTICE` s instead of waiting silently.

    Parameters
    ----------
    refs : dict
        Key -> the object ref of the actor's first answer.
    asked : dict
        Key -> ``(what, need)``: a description (``"unit motor"``) and the resources.
    timeout : float
        Seconds to wait in all.

    Returns
    -------
    dict
        Key -> the answer.

    Raises
    ------
    ModelError
        An actor failed to start (the cause named, with a remedy for a missing module or a
        version mismatch), no alive node can host it any more, or it waited ``timeout`` s
        (naming the resources it waits for and what the cluster has free).
    """
    start = time.monotonic()
    noticed = set()
    out, pending = {}, dict(refs)
    while pending:
        ready, _ = ray.wait(list(pending.values()), num_returns=len(pending),
                            timeout=min(NOTICE, max(0.05, start + timeout - time.monotonic())))
        for key in [k for k, r in pending.items() if r in ready]:
            try:
                out[key] = ray.get(pending.pop(key))
            except ray.exceptions.RayError as err:
                raise ModelError(f"{asked[key][0]} could not be placed: "
                                 f"{_start_failure(err)}") from None
        if not pending:
            break
        nodes, free = live_nodes(), ray.available_resources()
        late = time.monotonic() - start >= timeout
        for key in pending:
            what, need = asked[key]
            why = unschedulable(need, nodes)
            if why is not None:             # a node was lost since the placement check
                raise ModelError(f"{what} cannot be placed: {why}")
            busy = taken(need, nodes, free)
            if late:
                raise ModelError(f"{what} could not be placed within {timeout:g} s: "
                                 f"{busy or 'it did not start (a slow node or runtime_env?)'}"
                                 f"; the nodes offer: {_offered(_alive(nodes))}")
            # Resources all taken: said at once; a start merely slow (a runtime_env being
            # installed, a loaded node): after a while.
            waited = time.monotonic() - start
            if key not in noticed and (busy and waited >= NOTICE or waited >= 5 * NOTICE):
                noticed.add(key)
                log.warning("%s waits to be placed: %s", what,
                            busy or f"it has not started after {waited:.0f} s (a "
                                    "runtime_env being installed, or a slow node)")
    return out


def await_actors(made: dict, asked: dict, timeout: float) -> dict:
    """Wait until each actor of ``made`` (key -> ``(actor, placed ref, started ref)``,
    :meth:`RayBackend.create`) is placed (:func:`await_placement`) and has started its
    units; their :meth:`UnitActor.where`, by key.

    Raises
    ------
    ModelError
        As :func:`await_placement`; or an actor's start failed on its node (the cause
        named, with a remedy for a module missing there or another version) or took
        longer than the rest of ``timeout``.
    """
    deadline = time.monotonic() + timeout
    await_placement({k: m[1] for k, m in made.items()}, asked, timeout)
    out = {}
    for key, (_, _, started) in made.items():
        try:
            out[key] = ray.get(started, timeout=max(0.1, deadline - time.monotonic()))
        except ray.exceptions.GetTimeoutError:
            raise ModelError(f"{asked[key][0]} was placed but did not start within "
                             f"{timeout:g} s") from None
        except ray.exceptions.RayError as err:
            raise ModelError(f"{asked[key][0]} could not start: "
                             f"{_start_failure(err)}") from None
    return out


def _start_failure(err) -> str:
    """An actor's start-up failure in a line, with a remedy when there is one."""
    import re
    cause = getattr(err, "cause", None) or err
    if isinstance(cause, ModelError):           # a version mismatch: says it all
        return str(cause)
    text = str(err)
    ip = re.search(r"\bip=([\w.:-]+)", text)
    where = f" on node {ip[1]}" if ip else ""
    missing = re.search(r"No module named '([^']+)'", text)
    if missing:
        return (f"ModuleNotFoundError: no module named {missing[1]!r}{where}; install it on "
                "every node, or ship it with the run: CosimConfig(runtime_env={'py_modules':"
                " [...]}) or --runtime-env FILE")
    return f"{type(cause).__name__}{where}: {str(cause).strip().splitlines()[-1]}"


class RayBackend(Backend):
    """Creates one actor per unit, or per ``process`` shared by units (in parallel), with
    their placement options.

    The data between master and actors is encrypted and authenticated with CURVE keys made
    for the run (``CosimConfig(curve=False)`` opts out, for trusted networks).

    Per-unit options (``CosimConfig.units[name]``): ``num_cpus`` (default 0: units mostly
    wait for the master, so they do not reserve a core unless asked), ``resources`` (custom
    resources, e.g. ``{"gpu_node": 1}``), ``node`` (a Ray node id: hard affinity), ``process``
    (a name: units sharing it live in one actor, which takes their common placement).
    ``CosimConfig.runtime_env`` is every actor's Ray runtime environment (code and packages
    shipped to the nodes), ``CosimConfig.ports`` the range their data-plane ports are bound
    in.
    """

    PLACEMENT = ("num_cpus", "resources", "node")

    @property
    def reloads(self) -> bool:
        """Not with fault recovery (``checkpoint_every``): a re-placed actor is built with
        the units it was created with, which after a reload are another run's."""
        return self.cfg.checkpoint_every is None

    def __init__(self, cosim_config):
        self.cfg = cosim_config
        self.proxies: dict[str, RayProxy] = {}
        self.hosts: list[_Host] = []
        self.keys: RunKeys | None = None
        self.silent: list[dict] = []        # see silent_nodes, as of the last (re)start
        self.ports = check_ports(cosim_config.ports)
        self.runtime_env: dict | None = None
        #: Per actor (group key), the structure of the unit file it keeps (see
        #: :func:`~cluster.unit_files.split_parameters`), or None.
        self._structures: dict = {}
        #: Actors' reloads that sent parameter values only, and those that sent units.
        self.reparameterized = self.reloaded = 0
        #: A warm actor for the next re-placement, when the run recovers from failures.
        self.spare = SpareActor(self)

    def _layout(self, specs) -> tuple[dict, list[tuple]]:
        """The units of each actor and what a reload must find unchanged: per actor its
        key, unit names and placement."""
        groups = process_groups(specs, self.cfg.units, self.cfg.processes)
        return groups, [(key, tuple(s.name for s in group),
                         repr(self.cfg.options(group[0].name)))
                        for key, group in groups.items()]

    def reload(self, specs) -> dict:
        """Every actor hosts its units of ``specs`` instead of the last run's (see
        :meth:`Backend.reload <cosim.master.proxy.Backend.reload>`); the proxies, their
        channels and the actors' liveness watches stay."""
        groups, layout = self._layout(specs)
        if layout != [(h.key, tuple(s.name for s in h.group),
                       repr(self.cfg.options(h.group[0].name))) for h in self.hosts]:
            raise ModelError("the units group into other actors or ask for other placements "
                             "than the last run's")
        refs, files = [], {}
        for host in self.hosts:
            key = host.key
            files[key] = _unit_file(groups[key], key)
            if files[key] is not None and files[key][0] == self._structures.get(key):
                # Only parameter values changed: the actor builds its kept file with them.
                refs.append(host.actor.reparameterize.remote(files[key][1]))
                self.reparameterized += 1
            else:
                self.reloaded += 1
                text = emit(files[key][2]) if files[key] is not None else None
                refs.append(host.actor.reload.remote(groups[key], text))
            host.group = groups[key]
        self._structures.clear()        # not known while (or if) an actor fails to reload
        try:
            ray.get(refs, timeout=self.cfg.timeout)
        except ray.exceptions.RayError as err:
            raise ModelError(f"an actor did not reload its units: {err}") from err
        for key, file in files.items():
            self._structures[key] = file[0] if file is not None else None
        return dict(self.proxies)

    def create(self, key, group, node: str | None = None, generation: int = 0) -> tuple:
        """A new actor hosting ``group``'s units with their placement options (on ``node``
        when given: a re-placement): ``(actor, placed ref, started ref)`` (see
        :func:`await_actors`)."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        opts = self.cfg.options(group[0].name)
        # Ray never restarts it: a lost actor is re-placed by cosim (_Host.replace).
        options = {"num_cpus": opts.num_cpus if opts.num_cpus is not None else 0,
                   "name": None, "max_restarts": 0, "max_task_retries": 0}
        if opts.resources is not None:
            options["resources"] = dict(opts.resources)
        node = node if node is not None else opts.node
        need = _need(opts)
        if node is None and any(all(n["Resources"].get(k, 0) >= v for k, v in need.items())
                                for n in self.silent):
            # Ray still counts a lost node alive (until its health checks fail) and may
            # place the actor there: pin it to a live node instead.
            node = _surviving_node(opts, None)
        if node is not None:
            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node, soft=False)
        if self.runtime_env is not None:
            options["runtime_env"] = self.runtime_env
        text = None
        if generation == 0:
            file = _unit_file(group, key) if self.reloads else None
            self._structures[key] = file[0] if file is not None else None
            text = emit(file[2]) if file is not None else None
        actor = UnitActor.options(**options).remote(generation)
        return (actor, actor.placed.remote(),
                actor.start.remote(group, self.keys, text, versions(), self.ports))

    def start(self, specs) -> dict:
        ensure_ray(self.cfg.address)
        self.runtime_env = uploaded(self.cfg.runtime_env)
        self.silent = silent_nodes()

        def placement(spec) -> dict:
            opts = self.cfg.options(spec.name)
            return {k: getattr(opts, k) for k in self.PLACEMENT if getattr(opts, k) is not None}

        groups = process_groups(specs, self.cfg.units, self.cfg.processes)
        problems = []
        for key, group in groups.items():
            names = ", ".join(s.name for s in group)
            if any(placement(s) != placement(group[0]) for s in group[1:]):
                problems.append(f"units {names} share process {key[1]!r} but ask for "
                                "different placements; give them the same num_cpus / "
                                "resources / node")
                continue
            why = unplaceable(self.cfg.options(group[0].name), live_nodes())
            if why is not None:
                problems.append(f"unit {names} cannot be placed: {why}")
        if problems:
            # Before any actor exists: a request no node can meet would otherwise wait out
            # the timeout.
            raise ModelError("; ".join(problems))
        # The data plane binds the node's address: CURVE with keys made for this run, handed
        # over through Ray's own channel, unless the run opted out.
        self.keys = RunKeys.new() if self.cfg.curve else None
        made = {key: self.create(key, group) for key, group in groups.items()}
        self.spare.fill()               # made beside the units' actors, not awaited
        actors = {key: m[0] for key, m in made.items()}
        # Actors start in parallel; wait for all of them (placement failures surface here,
        # and a wait for resources is reported within seconds).
        asked = {key: ("unit " + ", ".join(s.name for s in group),
                       _need(self.cfg.options(group[0].name)))
                 for key, group in groups.items()}
        try:
            infos = await_actors(made, asked, self.cfg.timeout)
        except ModelError:
            for actor in actors.values():
                ray.kill(actor, no_restart=True)
            raise
        for key, group in groups.items():
            info = infos[key]
            try:
                check_reachable(info["endpoint"], self.cfg.connect_timeout,
                                f"the unit actor of {asked[key][0]} on node {info['ip']}")
            except ConnectionError as err:
                for actor in actors.values():
                    ray.kill(actor, no_restart=True)
                raise ModelError(str(err)) from None
            conn = Channel(info["endpoint"], RayProxy.POLL, keys=self.keys, patient=True)
            host = _Host(self, key, group, actors[key], info, conn)
            self.hosts.append(host)
            for spec in group:
                self.proxies[spec.name] = RayProxy(spec.name, host, self.cfg.timeout)
        return dict(self.proxies)

    def stop(self) -> None:
        for h in self.hosts:
            try:
                h.close()
            except Exception:  # noqa: BLE001 - already gone
                pass
        self.spare.close()
        self.proxies = {}
        self.hosts = []
        self._structures = {}


def check_ports(ports) -> tuple[int, int] | None:
    """``(lo, hi)`` of a data-plane port range, checked (None: any free port).

    Raises
    ------
    ModelError
        Not two whole numbers with ``1024 <= lo <= hi <= 65535``.
    """
    if ports is None:
        return None
    try:
        lo, hi = (int(p) for p in ports)
        ok = all(float(p) == int(p) for p in ports) and 1024 <= lo <= hi <= 65535
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ModelError(f"ports={ports!r}: give the data-plane port range as (low, high) "
                         "with 1024 <= low <= high <= 65535, e.g. (50000, 50100)")
    return lo, hi
