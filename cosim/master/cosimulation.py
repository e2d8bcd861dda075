"""A model co-simulated: partitioned into units on a backend, advanced by a master.

``Simulator(model, SimulationConfig(..., cosim=CosimConfig(...)))`` returns a
:class:`CoSimulation`; it has the run/log/checkpoint surface of a Simulator.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from cosim.master.backends import get_backend
from cosim.master.master import Master
from cosim.model.diagram import Inport
from cosim.master.partition import REST, partition

__all__ = ["CoSimulation"]


class CoSimulation:
    """Co-simulation of a model with atomic subsystems as units.

    Parameters
    ----------
    model : Model
    config : SimulationConfig
        With ``cosim`` set.

    Attributes
    ----------
    master : Master
    partition : Partition
    """

    def __init__(self, model, config):
        from cosim.run.simulator import Simulator

        self.model = model
        self.config = config
        # The monolithic compile and initialize validate the whole model (every problem at
        # once) and give the shapes of the signals that cross between units.
        mono = Simulator(model, replace(config, cosim=None))
        mono.initialize()
        mono.finalize()          # release what initialize acquired (e.g. FMU instances)
        self.partition = partition(model, config)
        shapes = {}
        for name, blk in zip(mono.plan.names, mono.plan.blocks):
            for p in blk.output_names:
                shapes[f"{name}__{p}"] = blk.outputs[p].shape
        for spec in self.partition.units:
            if spec.name == REST:
                for b in spec.subsystem.blocks:
                    if isinstance(b, Inport) and b.name in shapes:
                        b.shape = shapes[b.name]
        # Units other teams serve (an ``address``) are remote whatever the backend; the
        # backend runs the others.
        cfg = config.cosim
        specs = self.partition.units
        remote = [s for s in specs if "address" in cfg.units.get(s.name, {})]
        self.remote = None
        if remote:
            from cluster.zmq_backend import RemoteUnits
            self.remote = RemoteUnits(cfg)
        self.backend = get_backend(cfg.backend)(cfg)
        try:
            proxies = self.remote.start(remote) if remote else {}
            local = [s for s in specs if "address" not in cfg.units.get(s.name, {})]
            proxies.update(self.backend.start(local))
        except BaseException:
            self._stop()            # what did start (servers, actors) must not outlive us
            raise
        # In the partition's order, wherever the units run: the master's order of units (and
        # so its results, bit for bit) must not depend on it.
        proxies = {s.name: proxies[s.name] for s in specs}
        self.master = Master(proxies, self.partition.links, config)

    def initialize(self) -> None:
        self.master.initialize()

    def step(self) -> float:
        """One macro step; returns its size."""
        if not self.master._initialized:
            self.master.initialize()
        return self.master.step()

    def run(self, t_end: float | None = None):
        """Run to ``t_end`` (default ``config.t_end``); returns the central logs."""
        return self.master.run(t_end)

    @property
    def logs(self):
        return self.master.logs

    @property
    def t(self) -> float:
        return self.master.T

    @property
    def stats(self) -> dict:
        return self.master.stats

    @property
    def step_log(self) -> list:
        return self.master.step_log

    def save_logs(self, path) -> None:
        """Logs as NPZ plus the iteration / step-rejection log under ``steps/...``."""
        logs = self.logs
        arrays = {"time": logs.time}
        for k in logs:
            arrays[f"values/{k}"] = logs[k]
            arrays[f"time/{k}"] = logs.time_of(k)
        for k, v in self.master.step_log_arrays().items():
            arrays[f"steps/{k}"] = v
        np.savez(path, **arrays)

    def save_checkpoint(self, path) -> None:
        self.master.save_checkpoint(path)

    def load_checkpoint(self, path) -> None:
        self.master.load_checkpoint(path)

    def close(self) -> None:
        """Terminate the units and stop the backend (units that already failed are skipped)."""
        from cosim.errors import CosimError
        try:
            if self.master._initialized:
                self.master.terminate()
        except CosimError:
            pass                # a failed unit cannot be terminated; the backend stops it
        finally:
            self._stop()

    def _stop(self) -> None:
        try:
            self.backend.stop()
        finally:
            if self.remote is not None:
                self.remote.stop()
