"""A model co-simulated: partitioned into units on a backend, advanced by a master.

``CoSimulation(model, SimulationConfig(..., cosim=CosimConfig(...)))`` (or
``cosim.simulation(model, config)``) has the run/log/checkpoint surface of a Simulator.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from cosim.config import REMOTE_BACKEND
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
        # Each unit runs on its registered backend: the configured one, or the remote one
        # for units other teams serve (an ``address``). The configured backend is made even
        # when no unit uses it, so that ``self.backend`` always exists.
        cfg = config.cosim
        specs = self.partition.units
        by_backend: dict[str, list] = {cfg.backend: []}
        for s in specs:
            by_backend.setdefault(cfg.backend_of(s.name), []).append(s)
        # Remote units first: a handshake that fails refuses the run before anything is
        # spawned. Every backend is looked up before any starts (an unknown name fails
        # first).
        classes = {name: get_backend(name)
                   for name in sorted(by_backend, key=lambda b: b != REMOTE_BACKEND)}
        self.backends = {}
        proxies = {}
        try:
            for name, cls in classes.items():
                self.backends[name] = cls(cfg)
                proxies.update(self.backends[name].start(by_backend[name]))
        except BaseException:
            self._stop()            # what did start (servers, actors) must not outlive us
            raise
        self.backend = self.backends[cfg.backend]
        # In the partition's order, wherever the units run: the master's order of units (and
        # so its results, bit for bit) must not depend on it.
        proxies = {s.name: proxies[s.name] for s in specs}
        self.master = Master(proxies, self.partition.links, config)

    def initialize(self) -> None:
        self.master.initialize()

    def step(self) -> float:
        """One macro step; returns its size."""
        if not self.master.initialized:
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
            if self.master.initialized:
                self.master.terminate()
        except CosimError:
            pass                # a failed unit cannot be terminated; the backend stops it
        finally:
            self._stop()

    def _stop(self) -> None:
        """Stop every backend, the last started first, even when one fails to stop."""
        errors = []
        for backend in reversed(list(self.backends.values())):
            try:
                backend.stop()
            except Exception as err:  # noqa: BLE001 - the others must stop all the same
                errors.append(err)
        if errors:
            raise errors[0]
