"""A model co-simulated: partitioned into units on a backend, advanced by a master.

``CoSimulation(model, SimulationConfig(..., cosim=CosimConfig(...)))`` (or
``cosim.simulation(model, config)``) has the run/log/checkpoint surface of a Simulator, run
modes included, per macro step where a Simulator goes per tick: ``run(duration=...)`` /
``run(t_end=...)``, ``initialize()`` / ``step()``, ``run_streaming`` / ``run_realtime``
(:class:`~cosim.run.pacing.PacedRuns`, the same pacing as a Simulator's), ``stop()``.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from cosim.config import REMOTE_BACKEND
from cosim.errors import ModelError, SimulationError, TransportError
from cosim.master.backends import get_backend
from cosim.master.master import Master
from cosim.model.diagram import Inport
from cosim.master.partition import REST, partition
from cosim.numerics.timegrid import EXCHANGE_RTOL, time_tolerance
from cosim.run.pacing import PacedRuns

__all__ = ["CoSimulation"]


def _check_unit_options(cfg, units: list[str]) -> None:
    """Options for a unit that does not exist are an error, not ignored (a typo would run
    the unit with defaults, or locally although an ``address`` was meant)."""
    import difflib
    unknown = [u for u in cfg.units if u not in units]
    if unknown:
        parts = []
        for u in unknown:
            close = difflib.get_close_matches(u, units, n=1, cutoff=0.5)
            parts.append(f"{u!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        raise ModelError(f"CosimConfig.units names no unit {', '.join(parts)}; the units are "
                         f"{', '.join(units)} (each top-level atomic subsystem, and {REST!r} "
                         "for the other top-level blocks)")


class CoSimulation(PacedRuns):
    """Co-simulation of a model with atomic subsystems as units.

    Every way of running takes the same macro steps as ``run()`` and logs the same samples,
    bit for bit; stopping and continuing (``run(t_end=...)`` then ``run()``, or a checkpoint
    saved and loaded in between) is the run that never stopped (see
    :meth:`Master.run <cosim.master.master.Master.run>` for a macro step shortened to stop at
    an intermediate end time).

    Parameters
    ----------
    model : Model
    config : SimulationConfig
        With ``cosim`` set.
    hosts : UnitHosts, optional
        Take the units' backends from these (reloading units into processes a run before
        started) and hand them back on :meth:`close` (:mod:`cosim.master.hosts`).
    dashboard : bool, str or Dashboard, optional
        Show the run in the browser (:mod:`cosim.dashboard`): True (localhost, a free port;
        the address with its token is printed), ``"HOST:PORT"``, or a
        :class:`~cosim.dashboard.Dashboard` of yours (not closed by :meth:`close`).

    Attributes
    ----------
    master : Master
    partition : Partition
    backend_start_seconds : dict of str to float
        Wall time each backend took to start its units (s), by backend name: a Ray backend's
        includes starting Ray when none ran.
    """

    def __init__(self, model, config, hosts=None, dashboard=None):
        from cosim.run import checkpoint
        from cosim.run.simulator import Simulator
        if isinstance(dashboard, str):
            from cosim.dashboard.server import parse_address
            parse_address(dashboard)        # a misspelt address fails before anything starts

        self.model = model
        self.config = config
        self.hosts = hosts
        self.backends = {}
        # The monolithic compile and initialize validate the whole model (every problem at
        # once) and give the shapes of the signals that cross between units.
        # Signals inside a unit ("plant/lag.out") are checked by that unit's own compile.
        inner = {b.name for b in model.blocks if getattr(b, "atomic", False)
                 or hasattr(b, "as_unit")}
        log = None if config.log is None else tuple(
            k for k in config.log if k.partition("/")[0] not in inner or "/" not in k)
        if config.cosim.checkpoint_path is not None:
            # Found now, not when a unit fails and the checkpoint is due.
            checkpoint.check_writable(config.cosim.checkpoint_path)
        mono = Simulator(model, replace(config, cosim=None, log=log))
        mono.initialize()
        mono.finalize()          # release what initialize acquired (e.g. FMU instances)
        #: The automatic split (``CosimConfig(partition=k)``), or None.
        self.split = None
        if config.cosim.partition is not None:
            from cosim.master.autosplit import split_model
            self.split = split_model(model, config.cosim.partition, config, shapes={
                f"{name}.{p}": blk.outputs[p].shape
                for name, blk in zip(mono.plan.names, mono.plan.blocks)
                for p in blk.output_names})
            model = self.split.model
            if config.log is not None:          # the selection, in the parts' names
                mine = {mono: key for key, mono in self.split.keys.items() if mono}
                config = replace(config, log=tuple(mine.get(k, k) for k in config.log))
        self.partition = partition(model, config)
        _check_unit_options(config.cosim, [s.name for s in self.partition.units])
        shapes = {}
        for name, blk in zip(mono.plan.names, mono.plan.blocks):
            for p in blk.output_names:
                shapes[f"{name}__{p}"] = blk.outputs[p].shape
        for spec in self.partition.units:
            if spec.name == REST:
                # Made anew with the shape (not the attribute set): a top-level unit run in
                # a server process is rebuilt there from its constructor arguments.
                spec.subsystem.blocks = [
                    Inport(b.name, shape=shapes[b.name])
                    if isinstance(b, Inport) and b.name in shapes else b
                    for b in spec.subsystem.blocks]
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
        self.backend_start_seconds = {}
        proxies = {}
        try:
            for name, cls in classes.items():
                started = time.perf_counter()
                # (Hosts are kept only by backends that can reload units into them: the
                # others, e.g. the top-level blocks' unit beside the master, start anew.)
                if hosts is not None and getattr(cls, "reloads", False):
                    self.backends[name], mine = hosts.start(name, cls, cfg, by_backend[name])
                else:
                    self.backends[name] = cls(cfg)
                    mine = self.backends[name].start(by_backend[name])
                proxies.update(mine)
                self.backend_start_seconds[name] = time.perf_counter() - started
        except BaseException:
            self._stop()            # what did start (servers, actors) must not outlive us
            raise
        self.backend = self.backends[cfg.backend]
        # In the partition's order, wherever the units run: the master's order of units (and
        # so its results, bit for bit) must not depend on it.
        proxies = {s.name: proxies[s.name] for s in specs}
        keys = dict(self.split.keys) if self.split else {}
        keys.update((k, keys.get(v, v)) for k, v in self.partition.keys.items())
        self.master = Master(proxies, self.partition.links, config, keys=keys)
        # Checkpoints carry the whole model's identity (structure, parameter values, run).
        self.master.identity = checkpoint.identity(mono, checkpoint.run_id(self))
        self._stop_requested = False
        self._closed = False
        #: The :class:`~cosim.dashboard.Dashboard` showing this run, or None.
        self.dashboard = None
        self._own_dashboard = False
        if dashboard is not None and dashboard is not False:
            from cosim.dashboard import open_dashboard
            try:
                self.dashboard, self._own_dashboard = open_dashboard(dashboard)
            except BaseException:
                self._stop()        # the units started must not outlive a refused address
                raise
            self.dashboard.watch(self)

    def initialize(self) -> None:
        """Initialize every unit and co-initialize their outputs at ``t0``."""
        self.master.initialize()

    def step(self) -> float:
        """One macro step as :meth:`run` takes it (initializing first if needed); returns its
        size (s). The logs then hold the samples before :attr:`t`, as a Simulator's after
        ``step()``; ``run()`` at the end logs the end point."""
        self._stop_requested = False
        return self.master.advance()

    def run(self, duration: float | None = None, *, t_end: float | None = None):
        """Initialize (if needed) and run; returns the central logs.

        Parameters
        ----------
        duration : float, optional
            Run for this long from the current time.
        t_end : float, optional
            Run until this time; with neither given, until ``config.t_end``.
        """
        self._stop_requested = False
        end = self._end_time(duration, t_end)
        if self.dashboard is None:
            return self.master.run(end)
        try:
            logs = self.master.run(end)
        except BaseException as err:
            self.dashboard.update("failed", f"{type(err).__name__}: {err}")
            raise
        self.dashboard.update()
        return logs

    def stop(self) -> None:
        """Ask a paced run (``run_streaming``, ``run_realtime``) to stop after the current
        macro step (from a callback or another thread)."""
        self._stop_requested = True

    @property
    def stop_requested(self) -> bool:
        """True once :meth:`stop` asked a paced run to stop."""
        return self._stop_requested

    def _end_time(self, duration: float | None, t_end: float | None) -> float:
        """The time a run ends at: ``duration`` from now, or ``t_end``, or ``config.t_end``."""
        if duration is not None and t_end is not None:
            raise ModelError("run: give duration or t_end, not both")
        if duration is not None:
            if not duration >= 0:
                raise ModelError(f"run: duration must be >= 0 s, got {duration!r}")
            return self.t + duration
        t_end = self.config.t_end if t_end is None else t_end
        if t_end < self.t - time_tolerance(self.t, EXCHANGE_RTOL):
            raise SimulationError(f"run: end time {t_end} is before the current time {self.t}")
        return t_end

    # -- paced runs (run_streaming, run_realtime: pacing.PacedRuns) -------------------------

    def _pace_start(self, duration: float | None) -> float:
        if not self.master.initialized:
            self.master.initialize()
        self._stop_requested = False
        return self._end_time(duration, None)

    def _pace_more(self, t_end: float) -> bool:
        return self.t < t_end - time_tolerance(t_end, EXCHANGE_RTOL)

    def _pace_to(self, t_target: float, t_end: float) -> None:
        self.master.advance(t_end, until=t_target)

    def _pace_finish(self, complete: bool) -> None:
        if complete:
            self.master.finish()
        else:
            self.master.collect_logs()

    # -- logs, state ------------------------------------------------------------------------

    @property
    def logs(self):
        """The central logs so far: the units' pending batches are collected first while the
        units run (after :meth:`close` or a unit's failure, the logs collected before)."""
        if not self.master.initialized or self._closed:
            return self.master.logs
        try:
            return self.master.collect_logs()
        except TransportError:
            return self.master.logs     # the run already raised the failure

    def logs_since(self, marks: dict[str, int]) -> dict:
        """Samples logged after ``marks[key]`` samples, as ``{key: (time, values)}``; updates
        ``marks`` to the new lengths (as :meth:`Simulator.logs_since
        <cosim.run.simulator.Simulator.logs_since>`)."""
        logs = self.logs
        out = {}
        for key in logs:
            t = logs.time_of(key)
            n = marks.get(key, 0)
            if len(t) > n:
                out[key] = (t[n:], logs[key][n:])
            marks[key] = len(t)
        return out

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
        """Logs as NPZ (``time``, ``values/KEY``, ``time/KEY``, as ``Logs.load`` reads them)
        plus the iteration / step-rejection log under ``steps/...``, the wall time of every
        call that stepped a unit under ``timing/UNIT`` (shape ``(n, 2)``: master time, s;
        seconds; see :attr:`UnitCalls.step_times <cosim.master.calls.UnitCalls>`) and
        ``run.json``: the run's placement (each unit's backend, options, step and solver)
        as JSON text, and ``dashboard.json``: the model's diagram, where the units ran and
        their couplings (:func:`cosim.dashboard.static.run_facts`). ``cosim report`` turns
        the file into a page."""
        import json
        logs = self.logs
        arrays = {"time": logs.time}
        for k in logs:
            arrays[f"values/{k}"] = logs[k]
            arrays[f"time/{k}"] = logs.time_of(k)
        for k, v in self.master.step_log_arrays().items():
            arrays[f"steps/{k}"] = v
        for unit, (ts, seconds) in self.master.calls.step_times.items():
            arrays[f"timing/{unit}"] = np.column_stack([np.asarray(ts), np.asarray(seconds)])
        arrays["run.json"] = np.array(json.dumps(self.placement()))
        from cosim.dashboard.static import dumps, run_facts
        from cosim.run.results import replacing
        arrays["dashboard.json"] = np.array(dumps(run_facts(self)))   # the report's diagram
        with replacing(path) as tmp:        # whole or not at all
            np.savez(tmp, **arrays)

    def placement(self) -> dict:
        """Where and how each unit ran: model, macro step, scheme, backend, and per unit its
        backend, options that were set, step (s) and solver, and, when its proxy knows it
        (a Ray unit: ``location``), where it ran last: node id, ip, process id and
        generation (re-placements after a node loss) (plain data, JSON-ready)."""
        cfg = self.config.cosim
        units = {}
        for spec in self.partition.units:
            opts = {k: v for k, v in vars(cfg.options(spec.name)).items() if v is not None}
            units[spec.name] = {"backend": cfg.backend_of(spec.name), "options": opts,
                                "dt": getattr(spec.config, "dt", None),
                                "solver": getattr(spec.config, "solver", None)}
            where = getattr(self.master.proxies.get(spec.name), "location", None)
            if where is not None:
                units[spec.name]["where"] = where
        return {"model": self.model.name, "H": cfg.H, "scheme": cfg.scheme.value,
                "backend": cfg.backend, "compiled": self.master.compiled is not None,
                "units": units}

    def save_checkpoint(self, path) -> None:
        self.master.save_checkpoint(path)

    def load_checkpoint(self, path) -> None:
        self.master.load_checkpoint(path)

    def __enter__(self) -> CoSimulation:
        return self

    def __exit__(self, kind, value, traceback) -> None:
        """Leaving a ``with CoSimulation(...) as sim:`` block closes it (see :meth:`close`;
        after an exception, the backends are not handed back to :attr:`hosts`)."""
        self.close(keep=kind is None)

    def close(self, keep: bool = True) -> None:
        """Terminate the units and stop the backend (units that already failed are skipped).
        Closing again does nothing. (A CoSimulation never closed stops its backends' server
        processes when it is garbage-collected or the interpreter exits.)

        With :attr:`hosts`, the backends are handed back to them instead, unless ``keep`` is
        false (the caller saw the run fail) or a unit could not be terminated: a failed
        run's processes are never handed to the next run.
        """
        from cosim.errors import CosimError
        if self._closed:
            return
        self._closed = True
        if self.dashboard is not None:
            self.dashboard.update()             # the page's last look at the run
            if self._own_dashboard:
                self.dashboard.close()
            else:
                self.dashboard.detach()
        try:
            if self.master.initialized:
                self.master.terminate()
        except CosimError:
            keep = False        # a failed unit cannot be terminated; the backend stops it
        finally:
            if self.hosts is not None and keep:
                for name, backend in self.backends.items():
                    self.hosts.give_back(name, self.config.cosim, backend, True)
                self.backends = {}
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
