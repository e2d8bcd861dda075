"""Unit hosts kept between the runs of a parameter study.

Starting a co-simulation's units costs far more than a short run: a Ray actor or a server
process per unit (or per shared ``process``), each importing cosim and compiling its unit.
A :class:`UnitHosts` keeps the backends of a finished run and hands them to the next run of
the same backend and options, which reloads its units into them
(:meth:`Backend.reload <cosim.master.proxy.Backend.reload>`): new units, built as new
processes would build them (so results are bit for bit those of fresh units), in the old
processes. A run whose units group into processes differently (a structure change) gets
new hosts, and the reason is logged and kept in :attr:`UnitHosts.fallbacks`; the hosts of a
run that failed are stopped, never handed on.

>>> hosts = UnitHosts()
>>> for params in design:
...     sim = CoSimulation(model_with(params), config, hosts=hosts)
...     try:
...         logs = sim.run()
...     finally:
...         sim.close()            # hands the hosts back (stops them if the run failed)
>>> hosts.close()
"""

from __future__ import annotations

import logging

__all__ = ["UnitHosts"]

log = logging.getLogger("cosim.hosts")


class UnitHosts:
    """Backends idle between runs, by backend name and co-simulation options.

    Attributes
    ----------
    reused : int
        Runs' backends that reloaded units into kept processes.
    started : int
        Backends started new (the first run, structure changes); runs hand only backends
        that can reload units (``Backend.reloads``) to their hosts.
    fallbacks : list of str
        Why a kept backend could not host a run's units (each a structure change or a
        failed reload); it was stopped and a new one started.
    """

    def __init__(self):
        self._idle: list[tuple[tuple, object]] = []
        self.reused = 0
        self.started = 0
        self.fallbacks: list[str] = []

    def start(self, name: str, cls, cosim_config, specs: list) -> tuple[object, dict]:
        """A backend running the units of ``specs`` and their proxies: a kept one of the
        same ``name`` and options with the units reloaded, else a new one started.

        Raises
        ------
        Exception
            What a new backend's ``start`` raised (the backend is stopped first).
        """
        key = (name, repr(cosim_config))
        for i, (k, backend) in enumerate(self._idle):
            if k != key:
                continue
            del self._idle[i]
            try:
                proxies = backend.reload(specs)
            except Exception as err:  # noqa: BLE001 - any reason: new hosts, reported
                why = f"backend {name!r}: {err}"
                self.fallbacks.append(why)
                log.warning("units started in new processes (the kept ones cannot host "
                            "this run's units): %s", why)
                _stop(backend)
                break
            self.reused += 1
            return backend, proxies
        backend = cls(cosim_config)
        try:
            proxies = backend.start(specs)
        except BaseException:
            _stop(backend)
            raise
        self.started += 1
        return backend, proxies

    @property
    def kept(self) -> int:
        """Backends idle, waiting for the next run."""
        return len(self._idle)

    def give_back(self, name: str, cosim_config, backend, healthy: bool) -> None:
        """Keep ``backend`` for the next run (when it can reload units and its run ended
        well), else stop it."""
        if healthy and getattr(backend, "reloads", False):
            self._idle.append(((name, repr(cosim_config)), backend))
        else:
            _stop(backend)

    def close(self) -> None:
        """Stop every kept backend."""
        idle, self._idle = self._idle, []
        for _, backend in idle:
            _stop(backend)

    def __enter__(self) -> UnitHosts:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _stop(backend) -> None:
    try:
        backend.stop()
    except Exception as err:  # noqa: BLE001 - the others must stop all the same
        log.warning("a backend failed to stop: %s: %s", type(err).__name__, err)
