"""The Ray backend: every unit lives in a Ray actor anywhere on a Ray cluster.

Ray places the actors (per-unit CPUs, custom resources, node affinity), restarts them when they
die and tells the master when they are gone; the data travel as msgpack bytes
(:func:`cluster.codec.encode_batch`): one actor call per unit per macro step carries all of that
unit's requests, and the calls of one Jacobi group are in flight at once. With no cluster
given, a local Ray instance is started (the embedded default); ``CosimConfig(address=...)``
joins an existing cluster.
"""

from __future__ import annotations

import os
import time

import ray

from cluster.codec import decode_batch, encode_batch
from cosim.errors import ModelError, TransportError

__all__ = ["RayBackend", "RayProxy", "ensure_ray"]


def ensure_ray(address: str | None = None) -> None:
    """Start (or join) Ray once per process, quietly."""
    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(address=address, include_dashboard=False, log_to_driver=False,
             configure_logging=False)


@ray.remote
class UnitActor:
    """Hosts one unit; serves batches of encoded requests."""

    def __init__(self, spec):
        from cosim.units import LocalUnit
        self.unit = spec.factory() if spec.factory is not None else \
            LocalUnit(spec.subsystem, spec.config, spec.name)

    def handle(self, data: bytes) -> bytes:
        from cluster.codec import CodecError
        from cosim import protocol as P
        try:
            requests = decode_batch(data)
        except CodecError as err:
            return encode_batch([P.ErrorReply(P.ErrorKind.CODEC, str(err))])
        return encode_batch([self.unit.handle(r) for r in requests])

    def where(self) -> dict:
        """Node id and process id of this actor (placement checks, fault tests)."""
        return {"node": ray.get_runtime_context().get_node_id(), "pid": os.getpid()}


class RayProxy:
    """The master's handle on one unit actor.

    Parameters
    ----------
    name : str
        Unit name.
    actor : ray.actor.ActorHandle
    timeout : float
        Seconds to wait for one batch's replies before raising TransportError.
    """

    def __init__(self, name: str, actor, timeout: float):
        self.name = name
        self.actor = actor
        self.timeout = timeout

    def submit(self, requests):
        return requests, self.actor.handle.remote(encode_batch(requests))

    def result(self, handle):
        requests, ref = handle
        call = type(requests[-1]).__name__
        t = getattr(requests[-1], "t", None)
        try:
            data = ray.get(ref, timeout=self.timeout)
        except ray.exceptions.GetTimeoutError:
            raise TransportError(self.name, call, f"no reply within {self.timeout} s",
                                 t=t) from None
        except ray.exceptions.RayError as err:
            raise TransportError(self.name, call, f"the unit's actor failed: "
                                 f"{type(err).__name__}", t=t) from err
        replies = decode_batch(data)
        if len(replies) != len(requests) and len(replies) == 1:
            return replies * len(requests)          # a batch-level error answers all
        return replies

    def where(self) -> dict:
        """Node id and process id of the actor."""
        return ray.get(self.actor.where.remote(), timeout=self.timeout)

    def recover(self, deadline: float) -> None:
        """Wait until Ray has restarted the actor (after a crash), or raise TransportError."""
        while True:
            try:
                ray.get(self.actor.where.remote(), timeout=max(0.1, deadline - time.time()))
                return
            except ray.exceptions.RayError as err:
                if time.time() >= deadline:
                    raise TransportError(self.name, "recover", f"the actor did not come back "
                                         f"({type(err).__name__})") from err
                time.sleep(0.1)

    def close(self) -> None:
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
            unknown = set(opts) - {"num_cpus", "resources", "node", "address"}
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
        self.proxies = {name: RayProxy(name, a, self.cfg.timeout) for name, a in actors.items()}
        # Actors start in parallel; wait for all of them (placement failures surface here).
        refs = {name: a.where.remote() for name, a in actors.items()}
        for name, ref in refs.items():
            try:
                ray.get(ref, timeout=self.cfg.timeout)
            except ray.exceptions.GetTimeoutError:
                raise ModelError(f"unit {name!r} could not be placed within "
                                 f"{self.cfg.timeout} s: check its resources/node options "
                                 f"({self.cfg.units.get(name, {})}) against the cluster") from None
        return dict(self.proxies)

    def stop(self) -> None:
        for p in self.proxies.values():
            try:
                p.close()
            except Exception:  # noqa: BLE001 - already gone
                pass
        self.proxies = {}
