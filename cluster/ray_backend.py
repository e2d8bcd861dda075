"""The Ray backend: every unit lives in a Ray actor anywhere on a Ray cluster.

Ray places the actors (per-unit CPUs, custom resources, node affinity), restarts them when they
die and tells the master when they are gone. The data do not travel as actor calls (about
1 ms each here): each actor serves its unit on a ZeroMQ socket (:mod:`cluster.dataplane`) and
the master talks to it directly, one msgpack batch per unit per macro step, all units' batches
in flight at once. With no cluster given, a local Ray instance is started (the embedded
default); ``CosimConfig(address=...)`` joins an existing cluster.
"""

from __future__ import annotations

import os
import threading
import time

import ray

from cluster.dataplane import DataClient, serve
from cosim.errors import ModelError, TransportError

__all__ = ["RayBackend", "RayProxy", "ensure_ray"]


def ensure_ray(address: str | None = None) -> None:
    """Start (or join) Ray once per process, quietly."""
    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(address=address, include_dashboard=False, log_to_driver=False,
             configure_logging=False)


@ray.remote(max_concurrency=4)
class UnitActor:
    """Hosts one unit and serves it on its data-plane socket."""

    def __init__(self, spec):
        from cosim.units import LocalUnit
        self.unit = spec.factory() if spec.factory is not None else \
            LocalUnit(spec.subsystem, spec.config, spec.name)
        self.endpoint, _ = serve(self.unit, ray.util.get_node_ip_address())

    def where(self) -> dict:
        """Node id, process id and data-plane endpoint of this actor."""
        return {"node": ray.get_runtime_context().get_node_id(), "pid": os.getpid(),
                "endpoint": self.endpoint}

    def watch(self) -> None:
        """Never returns: its reference fails the moment the actor dies (failure detection)."""
        threading.Event().wait()


class RayProxy:
    """The master's handle on one unit actor: data over ZeroMQ, life cycle over Ray.

    Parameters
    ----------
    name : str
        Unit name.
    actor : ray.actor.ActorHandle
    endpoint : str
        The actor's data-plane endpoint.
    timeout : float
        Seconds to wait for one batch's replies before raising TransportError.
    """

    #: Seconds between checks that the actor is still alive while waiting for a reply.
    POLL = 0.05

    def __init__(self, name: str, actor, endpoint: str, timeout: float):
        self.name = name
        self.actor = actor
        self.timeout = timeout
        self.data = DataClient(name, endpoint, self.POLL)
        self._watch = actor.watch.remote()

    def submit(self, requests):
        return self.data.submit(requests)

    def result(self, requests):
        deadline = time.time() + self.timeout
        while True:
            try:
                return self.data.result(requests)
            except TransportError:
                done, _ = ray.wait([self._watch], timeout=0)
                last = requests[-1]
                if done:
                    raise TransportError(self.name, type(last).__name__, "the unit's actor "
                                         "died", t=getattr(last, "t", None)) from None
                if time.time() >= deadline:
                    raise TransportError(self.name, type(last).__name__, f"no reply within "
                                         f"{self.timeout} s", t=getattr(last, "t", None)) \
                        from None

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
        self.data.reconnect(info["endpoint"])
        self._watch = self.actor.watch.remote()

    def close(self) -> None:
        self.data.close()
        ray.kill(self.actor, no_restart=True)


class RayBackend:
    """Creates one actor per unit (in parallel) with its placement options.

    Per-unit options (``CosimConfig.units[name]``): ``num_cpus`` (default 0: units mostly
    wait for the master, so they do not reserve a core unless asked), ``resources`` (custom
    resources, e.g. ``{"gpu_node": 1}``), ``node`` (a Ray node id: hard affinity).
    """

    def __init__(self, cosim_config):
        self.cfg = cosim_config
        self.proxies: dict[str, RayProxy] = {}

    def start(self, specs) -> dict:
        ensure_ray(self.cfg.address)
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        actors = {}
        for spec in specs:
            opts = dict(self.cfg.units.get(spec.name, {}))
            # "process" groups units of the zmq backend; here each unit has its actor.
            unknown = set(opts) - {"num_cpus", "resources", "node", "process"}
            if unknown:
                raise ModelError(f"unit {spec.name!r}: unknown Ray placement options "
                                 f"{sorted(unknown)} (use num_cpus, resources, node)")
            options = {"num_cpus": opts.get("num_cpus", 0), "name": None,
                       "max_restarts": self.cfg.max_restarts, "max_task_retries": 0}
            if "resources" in opts:
                options["resources"] = dict(opts["resources"])
            if "node" in opts:
                options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(
                    opts["node"], soft=False)
            actors[spec.name] = UnitActor.options(**options).remote(spec)
        # Actors start in parallel; wait for all of them (placement failures surface here).
        refs = {name: a.where.remote() for name, a in actors.items()}
        for name, ref in refs.items():
            try:
                info = ray.get(ref, timeout=self.cfg.timeout)
            except ray.exceptions.GetTimeoutError:
                raise ModelError(f"unit {name!r} could not be placed within "
                                 f"{self.cfg.timeout} s: check its resources/node options "
                                 f"({self.cfg.units.get(name, {})}) against the cluster") from None
            self.proxies[name] = RayProxy(name, actors[name], info["endpoint"],
                                          self.cfg.timeout)
        return dict(self.proxies)

    def stop(self) -> None:
        for p in self.proxies.values():
            try:
                p.close()
            except Exception:  # noqa: BLE001 - already gone
                pass
        self.proxies = {}
