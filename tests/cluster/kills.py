"""Kill a unit's process at a random moment of a co-simulation run, for the kill tables
(tests/cluster/test_kills.py, tests/benchmarks/test_bench_kills.py).

One run, one SIGKILL: of a random unit's server process (zmq backend) or actor (Ray), at a
random moment of a random kind:

- ``Initialize``: as the master initializes the units (the run has no checkpoint yet);
- ``step``: once the master's time has passed a random point (mostly in a step, sometimes
  in a checkpoint's capture around it);
- ``GetState`` / ``CollectLogs``: as the master captures a random periodic checkpoint
  (asks for the units' states, collects their logs);
- ``final logs``: as the run ends (the last checkpoint's capture, the outputs refreshed
  at the end point, the logs collected).

A request-kind kill comes either before the request is sent, or from a thread a random
0-3 ms after (while the server handles it, or after it answered: then, at the end of a run,
it may come after the unit's last request, and there is nothing to recover: such a kill is
*late*, and not counted). Every run must end as the run that was never killed, bit for bit;
the wall time it took is kept, to tell what a recovery costs, and when the death was seen
(the recovery began) and the units answered again (before the restore and the replay).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass

import numpy as np

from cosim import CoSimulation, CosimConfig, SimulationConfig
from cosim.master import protocol as P
from tests.cluster.scenarios import three_units

KINDS = ("Initialize", "step", "GetState", "CollectLogs", "final logs")

T_END = 1.0
H = 0.02
EVERY = 5                       # a checkpoint every 5 macro steps: 10 of them


def config(backend: str) -> SimulationConfig:
    """The runs' configuration: every unit in a process of its own (the top-level blocks'
    unit ``main`` too, placed: by default it runs beside the master, which no kill can
    reach without ending the run)."""
    units = {} if backend == "local" else {"main": {"process": "glue"}}
    return SimulationConfig(dt=0.002, t_end=T_END, cosim=CosimConfig(
        H=H, scheme="gauss-seidel", extrapolation=1, backend=backend, timeout=60.0,
        checkpoint_every=EVERY, max_restarts=3, units=units))


_ARMED = threading.Lock()     # held while a kill fires, and while a run is disarmed


@dataclass
class Kill:
    """One planned kill: of ``unit``'s process, at a moment of ``kind``: the ``nth``
    request of that kind (a checkpoint's capture), or once the master passed time ``at``
    (``step``); ``delay`` s after the request is sent (0: before)."""

    kind: str
    unit: str
    nth: int = 0
    at: float = 0.0
    delay: float = 0.0
    #: Filled in by :func:`killed_run`: when it came (master time), and the run's result.
    when: float | None = None
    recoveries: int = 0
    wall: float = 0.0
    identical: bool = False
    error: str = ""
    #: While the run goes on: a kill that comes later (its timer) kills nothing, not even
    #: a process that took the number of a stopped server.
    armed: bool = True
    #: perf_counter() of the kill, when the master began the recovery (its first unit's
    #: ``recover``: the death noticed) and when every unit answered again.
    killed: float | None = None
    noticed: float | None = None
    back: float | None = None

    @property
    def late(self) -> bool:
        """It came after the unit's last request of the run: nothing was lost."""
        return self.recoveries == 0 and not self.error


def plan(rng: np.random.Generator, units=("a", "b", "main")) -> Kill:
    """A random kill (its kind, unit and moment) drawn from ``rng``."""
    kind = KINDS[int(rng.integers(len(KINDS)))]
    delay = 0.0 if rng.random() < 0.5 else float(rng.uniform(0.0, 0.003))
    return Kill(kind, str(rng.choice(units)), nth=int(rng.integers(1, T_END / H / EVERY)),
                at=float(rng.uniform(0.05, T_END - 0.05)), delay=delay)


def pid_of(proxy) -> int:
    """The process serving ``proxy``'s unit now (a server process, or a Ray actor)."""
    server = getattr(proxy, "server", None)
    return server.proc.pid if server is not None else proxy.location["pid"]


def _kill(proxy, kill: Kill) -> None:
    with _ARMED:
        if not kill.armed:
            return
        os.kill(pid_of(proxy), signal.SIGKILL)
        kill.killed = time.perf_counter()
    server = getattr(proxy, "server", None)
    if server is not None:
        server.proc.wait()


def _timed_recovery(proxies, kill: Kill) -> None:
    """Note in ``kill`` when the recovery begins and when its units answer again."""
    for p in proxies.values():
        def recover(deadline, original=p.recover):
            kill.noticed = kill.noticed or time.perf_counter()
            original(deadline)
            kill.back = time.perf_counter()
        p.recover = recover


def arm(sim: CoSimulation, kill: Kill) -> threading.Thread | None:
    """Make ``kill`` happen in ``sim``'s next run; a watching thread (``step``) or None."""
    master = sim.master
    proxy = master.proxies[kill.unit]
    _timed_recovery(master.proxies, kill)
    if kill.kind == "step":
        def watch():
            while master.T < kill.at and not kill.when:
                time.sleep(0.0005)
            if kill.when is None:
                kill.when = master.T
                _kill(proxy, kill)
        thread = threading.Thread(target=watch, daemon=True)
        thread.start()
        return thread
    wanted = {"Initialize": P.Initialize, "GetState": P.GetState, "CollectLogs": P.CollectLogs,
              "final logs": (P.GetState, P.RefreshOutputs, P.CollectLogs)[kill.nth % 3]
              }[kill.kind]
    submit, seen = proxy.submit, [0]

    def due(requests) -> bool:
        if kill.when is not None or not any(type(r) is wanted for r in requests):
            return False
        if kill.kind == "final logs":
            return master.T >= T_END - 1e-9
        if kill.kind in ("GetState", "CollectLogs"):
            if not 1e-9 < master.T < T_END - 1e-9:
                return False
            seen[0] += 1
            return seen[0] == kill.nth
        return True

    def hooked(requests):
        if due(requests):
            kill.when = master.T
            if kill.delay == 0.0:
                _kill(proxy, kill)
            else:
                threading.Timer(kill.delay, _kill, (proxy, kill)).start()
        return submit(requests)
    proxy.submit = hooked
    return None


def timed(backend: str, kill: Kill | None = None):
    """One run on ``backend`` (with ``kill`` armed): its logs and ``sim.run()``'s wall time;
    the kill's fields filled in."""
    with CoSimulation(three_units(), config(backend)) as sim:
        watcher = arm(sim, kill) if kill is not None else None
        start = time.perf_counter()
        try:
            logs = sim.run()
        except Exception as err:  # noqa: BLE001 - reported in the table, the test fails on it
            if kill is None:
                raise
            kill.error = f"{type(err).__name__}: {err}"
            return None, time.perf_counter() - start
        finally:
            if kill is not None:
                with _ARMED:
                    kill.armed = False
            if watcher is not None:
                kill.when = kill.when if kill.when is not None else -1.0
                watcher.join()
        wall = time.perf_counter() - start
        if kill is not None:
            kill.recoveries, kill.wall = sim.stats["recoveries"], wall
        return logs, wall


def same(logs, ref) -> bool:
    """``logs`` equal ``ref`` bit for bit: the same keys, samples and times."""
    return sorted(logs) == sorted(ref) and all(
        np.array_equal(logs[k], ref[k]) and np.array_equal(logs.time_of(k), ref.time_of(k))
        for k in ref)


def table(backend: str, kills: list, refs: list[float]) -> str:
    """The rows of ``kills`` on ``backend`` and what a recovery added to the run."""
    base = float(np.median(refs))
    lines = [f"{backend}: uninterrupted run {base:.2f} s (median of {len(refs)}, "
             f"{min(refs):.2f}-{max(refs):.2f})",
             f"{'kind':<12} {'unit':<5} {'at t':>6} {'delay ms':>8} {'recov':>5} "
             f"{'identical':>9} {'wall s':>7} {'added s':>7} {'seen ms':>7} {'back ms':>7}"]
    for k in kills:
        at = f"{k.when:6.2f}" if k.when is not None and k.when >= 0 else "     -"
        phases = (f"{(k.noticed - k.killed) * 1e3:7.0f} {(k.back - k.killed) * 1e3:7.0f}"
                  if k.recoveries and None not in (k.killed, k.noticed, k.back) else
                  f"{'-':>7} {'-':>7}")
        lines.append(f"{k.kind:<12} {k.unit:<5} {at} {k.delay * 1e3:8.1f} {k.recoveries:5d} "
                     f"{'yes' if k.identical else 'NO':>9} {k.wall:7.2f} "
                     f"{k.wall - base:7.2f} {phases}" + ("  (late: after the unit's last request)"
                                                 if k.late else "")
                     + (f"  {k.error[:120]}" if k.error else ""))
    counted = [k for k in kills if not k.late]
    ok = [k for k in counted if k.identical and k.recoveries == 1]
    added = [k.wall - base for k in ok]
    back = [k.back - k.killed for k in ok if None not in (k.killed, k.back)]
    lines.append(f"{backend}: {len(ok)}/{len(counted)} recovered bit-identical "
                 f"({len(kills) - len(counted)} late kills not counted)"
                 + (f"; added per recovery: median {np.median(added):.2f} s, max "
                    f"{max(added):.2f} s" if added else "")
                 + (f"; units back after the kill: median {np.median(back) * 1e3:.0f} ms, "
                    f"max {max(back) * 1e3:.0f} ms" if back else ""))
    return "\n".join(lines)

