"""The Ray backend: units live in Ray actors anywhere on a Ray cluster.

Ray places the actors (per-unit CPUs, custom resources, node affinity), restarts them when they
die and tells the master when they are gone. The data do not travel as actor calls (about
1 ms each here): each actor serves its units on a ZeroMQ socket (:mod:`cluster.dataplane`)
and the master talks to it directly, one message per actor per call, all actors' messages in
flight at once. With no cluster given, a local Ray instance is started (the embedded
default); ``CosimConfig(address=...)`` joins an existing cluster.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time

import ray

from cluster.channel import Channel
from cluster.dataplane import RunKeys, serve
from cosim.errors import ModelError, TransportError
from cosim.master.backends import process_groups
from cosim.master.proxy import Backend, Proxy
from cosim.modelfile.writer import emit

__all__ = ["RayBackend", "RayProxy", "ensure_ray", "notices_beside_progress_bars", "unplaceable"]


def ensure_ray(address: str | None = None) -> None:
    """Start (or join) Ray once per process, quietly: Ray's own notices (such as "Token
    authentication is enabled") are printed as whole ``ray: ...`` lines that never break a
    progress bar (:func:`notices_beside_progress_bars`)."""
    if ray.is_initialized():
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
    data-plane socket."""

    def __init__(self, specs, keys=None, unit_file: str | None = None):
        self.units = _units(specs)
        self.endpoint, _ = serve(self.units, ray.util.get_node_ip_address(), keys)
        self.template = _template(unit_file)

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
        """Node id, process id and data-plane endpoint of this actor."""
        return {"node": ray.get_runtime_context().get_node_id(), "pid": os.getpid(),
                "endpoint": self.endpoint}

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


class RayProxy(Proxy):
    """The master's handle on one unit: data over its actor's :class:`Channel` (shared by
    the units of one actor), life cycle over Ray.

    Parameters
    ----------
    name : str
        Unit name.
    actor : ray.actor.ActorHandle
    conn : Channel
        To the actor's data-plane endpoint.
    timeout : float
        Seconds to wait for one batch's replies before raising TransportError.
    alone : bool
        The actor hosts this unit only: the proxy may be driven from a thread of its own
        (:attr:`~cosim.master.proxy.Proxy.concurrent`; a channel shared by the units of one
        actor is not).
    """

    #: Seconds between checks that the actor is still alive while waiting for a reply.
    POLL = 0.05

    def __init__(self, name: str, actor, conn: Channel, timeout: float, alone: bool = False):
        self.name = name
        self.actor = actor
        self.conn = conn
        self.timeout = timeout
        self.concurrent = alone
        self._watch = actor.watch.remote()

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
        done, _ = ray.wait([self._watch], timeout=0)
        return "the unit's actor died" if done else None

    def where(self) -> dict:
        """Node id, process id and endpoint of the actor."""
        return ray.get(self.actor.where.remote(), timeout=self.timeout)

    def recover(self, deadline: float) -> None:
        """After a crash: wait until Ray has restarted the actor, then reconnect to it."""
        done, _ = ray.wait([self._watch], timeout=0)
        if not done:
            return                          # this unit is alive; another one failed
        while True:
            try:
                info = ray.get(self.actor.where.remote(),
                               timeout=max(0.1, deadline - time.time()))
                break
            except ray.exceptions.RayError as err:
                if time.time() >= deadline:
                    raise TransportError(self.name, "recover", f"the actor did not come back "
                                         f"({type(err).__name__})") from err
                time.sleep(0.1)
        if info["endpoint"] != self.conn.address:
            self.conn.reconnect(info["endpoint"])   # once for all the units of the actor
        self._watch = self.actor.watch.remote()

    def close(self) -> None:
        self.conn.close()
        ray.kill(self.actor, no_restart=True)


def unplaceable(opts, nodes: list[dict]) -> str | None:
    """Why no node of the cluster could ever host an actor with placement ``opts``
    (:class:`~cosim.config.UnitOptions`), or None.

    Parameters
    ----------
    opts : UnitOptions
        ``num_cpus``, ``resources``, ``node``.
    nodes : list of dict
        ``ray.nodes()``: each alive node's ``NodeID`` and total ``Resources``.
    """
    need = {"CPU": opts.num_cpus or 0, **(opts.resources or {})}
    need = {k: v for k, v in need.items() if v > 0}
    alive = [n for n in nodes if n.get("Alive")]
    if opts.node is not None:
        alive = [n for n in alive if n["NodeID"] == opts.node]
        if not alive:
            return f"no alive node has id {opts.node!r}"
    for n in alive:
        if all(n["Resources"].get(k, 0) >= v for k, v in need.items()):
            return None
    offered = "; ".join(
        ", ".join(f"{k}={v:g}" for k, v in sorted(n["Resources"].items())
                  if not k.startswith(("node:", "memory", "object_store_memory")))
        for n in alive)
    missing = sorted(k for k, v in need.items()
                     if not any(n["Resources"].get(k, 0) >= v for n in alive))
    what = (f"no node has {', '.join(f'{k}={need[k]:g}' for k in missing)}" if missing else
            f"no single node has all of {need}")
    return f"{what} (the nodes offer: {offered or 'nothing'}); change its num_cpus / " \
           "resources / node options or add a node that has them"


class RayBackend(Backend):
    """Creates one actor per unit, or per ``process`` shared by units (in parallel), with
    their placement options.

    The data between master and actors is encrypted and authenticated with CURVE keys made
    for the run (``CosimConfig(curve=False)`` opts out, for trusted networks).

    Per-unit options (``CosimConfig.units[name]``): ``num_cpus`` (default 0: units mostly
    wait for the master, so they do not reserve a core unless asked), ``resources`` (custom
    resources, e.g. ``{"gpu_node": 1}``), ``node`` (a Ray node id: hard affinity), ``process``
    (a name: units sharing it live in one actor, which takes their common placement).
    """

    PLACEMENT = ("num_cpus", "resources", "node")

    @property
    def reloads(self) -> bool:
        """Not with fault recovery (``checkpoint_every``): Ray restarts a dead actor with the
        units it was created with, which after a reload are another run's."""
        return self.cfg.checkpoint_every is None

    def __init__(self, cosim_config):
        self.cfg = cosim_config
        self.proxies: dict[str, RayProxy] = {}
        self._actors: list[tuple] = []          # (actor, group key, unit names)
        #: Per actor (group key), the structure of the unit file it keeps (see
        #: :func:`~cluster.unit_files.split_parameters`), or None.
        self._structures: dict = {}
        #: Actors' reloads that sent parameter values only, and those that sent units.
        self.reparameterized = self.reloaded = 0

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
        if layout != [(k, names, opts) for _, k, names, opts in self._actors]:
            raise ModelError("the units group into other actors or ask for other placements "
                             "than the last run's")
        refs, files = [], {}
        for actor, key, _, _ in self._actors:
            files[key] = _unit_file(groups[key], key)
            if files[key] is not None and files[key][0] == self._structures.get(key):
                # Only parameter values changed: the actor builds its kept file with them.
                refs.append(actor.reparameterize.remote(files[key][1]))
                self.reparameterized += 1
            else:
                self.reloaded += 1
                text = emit(files[key][2]) if files[key] is not None else None
                refs.append(actor.reload.remote(groups[key], text))
        self._structures.clear()        # not known while (or if) an actor fails to reload
        try:
            ray.get(refs, timeout=self.cfg.timeout)
        except ray.exceptions.RayError as err:
            raise ModelError(f"an actor did not reload its units: {err}") from err
        for key, file in files.items():
            self._structures[key] = file[0] if file is not None else None
        return dict(self.proxies)

    def start(self, specs) -> dict:
        ensure_ray(self.cfg.address)
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

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
            why = unplaceable(self.cfg.options(group[0].name), ray.nodes())
            if why is not None:
                problems.append(f"unit {names} cannot be placed: {why}")
        if problems:
            # Before any actor exists: a request no node can meet would otherwise wait out
            # the timeout.
            raise ModelError("; ".join(problems))
        # The data plane binds the node's address: CURVE with keys made for this run, handed
        # over through Ray's own channel, unless the run opted out.
        keys = RunKeys.new() if self.cfg.curve else None
        actors = {}
        for key, group in groups.items():
            opts = self.cfg.options(group[0].name)
            options = {"num_cpus": opts.num_cpus if opts.num_cpus is not None else 0,
                       "name": None, "max_restarts": self.cfg.max_restarts,
                       "max_task_retries": 0}
            if opts.resources is not None:
                options["resources"] = dict(opts.resources)
            if opts.node is not None:
                options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(
                    opts.node, soft=False)
            file = _unit_file(group, key) if self.reloads else None
            self._structures[key] = file[0] if file is not None else None
            text = emit(file[2]) if file is not None else None
            actors[key] = (UnitActor.options(**options).remote(group, keys, text), group)
        # Actors start in parallel; wait for all of them (placement failures surface here).
        refs = {key: a.where.remote() for key, (a, _) in actors.items()}
        for key, ref in refs.items():
            actor, group = actors[key]
            names = ", ".join(s.name for s in group)
            try:
                info = ray.get(ref, timeout=self.cfg.timeout)
            except ray.exceptions.GetTimeoutError:
                raise ModelError(f"unit {names} could not be placed within "
                                 f"{self.cfg.timeout} s: check its resources/node options "
                                 f"({placement(group[0])}) against the "
                                 "cluster") from None
            conn = Channel(info["endpoint"], RayProxy.POLL, keys=keys, patient=True)
            self._actors.append((actor, key, tuple(s.name for s in group),
                                 repr(self.cfg.options(group[0].name))))
            for spec in group:
                self.proxies[spec.name] = RayProxy(spec.name, actor, conn, self.cfg.timeout,
                                                   alone=len(group) == 1)
        return dict(self.proxies)

    def stop(self) -> None:
        for p in self.proxies.values():
            try:
                p.close()
            except Exception:  # noqa: BLE001 - already gone
                pass
        self.proxies = {}
        self._actors = []
        self._structures = {}
