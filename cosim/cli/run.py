"""``cosim run``: simulate or co-simulate a model file, print a summary, save and plot.

The summary ends with where the wall time went (start-up, reading, compiling, starting
backends, the run, saving, plotting), so that the run time the simulation reports and the
time a user waited agree or the difference is explained.
"""

from __future__ import annotations

import os

from cosim.cli.common import EXIT_OK, RunFailed, Usage, load_model
from cosim.cli.options import overrides, run_config
from cosim.cli.wall import Phases

__all__ = ["cmd_run"]


def _show(value) -> str:
    """A logged sample, short: a number, or a (possibly elided) list; a negative zero shows
    as 0 (``-0.0 + 0.0`` is ``0.0``)."""
    import numpy as np
    if getattr(value, "dtype", None) == object:        # text (String / Binary samples)
        items = [repr(x) for x in np.ravel(value)]
        return items[0] if len(items) == 1 else "[" + ", ".join(items) + "]"
    a = np.ravel(np.asarray(value, dtype=float)) + 0.0
    if a.size == 1:
        return f"{a[0]:.6g}"
    return np.array2string(a, precision=6, separator=", ", threshold=6)


def _summary(model, cfg, sim, logs, params: dict, run_seconds: float) -> list[str]:
    size = f"{len(sim.plan.blocks)} blocks" if cfg.cosim is None else \
        f"{len(sim.partition.units)} units, co-simulated (H = {cfg.cosim.H:g} s, " \
        f"{cfg.cosim.scheme.value}, backend {cfg.cosim.backend})"
    lines = [f"model {model.name!r}: t = {cfg.t0:g} .. {cfg.t_end:g} s, dt = {cfg.dt:g} s "
             f"({cfg.n_steps} steps), {size}, solver {cfg.solver}"]
    if params:
        lines.append("parameters: " + ", ".join(f"{k} = {v}" for k, v in params.items()))
    events = getattr(sim, "event_log", [])
    fired = ", ".join(f"{n} at t={t:.6g}" for t, n in events[:10])
    if len(events) > 10:
        fired += f" (+{len(events) - 10} more)"
    lines.append(f"ran in {run_seconds:.3f} s; {len(logs)} signals logged; "
                 + (f"events: {fired}" if events else "no events"))
    keys = list(logs)[:12]
    if keys:
        lines.append("final values:")
        width = max(len(k) for k in keys)
        lines += [f"  {k:<{width}}  {_show(logs[k][-1]) if len(logs[k]) else '(no samples)'}"
                  for k in keys]
        if len(logs) > len(keys):
            lines.append(f"  ... ({len(logs) - len(keys)} more)")
    return lines


def _out_path(text: str | None):
    if not text:
        return None
    from pathlib import Path

    from cosim.run.results import FORMATS, check_writable
    if text.endswith(("/", os.sep)) or Path(text).is_dir():
        raise Usage(f"--out {text}: is a directory; give a file name, e.g. "
                    f"{Path(text) / 'results.npz'}")
    out = Path(text)
    if out.suffix.lower() not in FORMATS:
        out = out.with_name(out.name + ".npz")          # no known suffix: as numpy
    if not out.parent.is_dir():
        raise Usage(f"cannot write {out}: no directory {out.parent}")
    try:
        check_writable(out)                 # now, not after the run's work
    except OSError as err:
        raise Usage(f"cannot write {out}: {err.strerror or err}") from None
    return out


def _backend_phases(sim, phases: Phases) -> None:
    """Split the time spent making a co-simulation into compiling and starting backends."""
    started = getattr(sim, "backend_start_seconds", {})
    total = phases.durations.pop("compiling", 0.0)
    backends = sum(started.values())
    phases.add("compiling", max(0.0, total - backends))
    for name, seconds in started.items():
        what = " (Ray start-up and actors)" if name == "ray" else \
            " (server processes)" if name == "zmq" else \
            " (connecting to the servers)" if name == "remote" else ""
        phases.add(f"starting the {name} backend{what}", seconds)


def _failed(err: Exception) -> RunFailed:
    """The run failed with ``err``; a refused CURVE handshake also names the CLI options."""
    from cosim.errors import TransportError
    if isinstance(err, TransportError) and "curve" in err.message.lower():
        err = TransportError(err.unit, err.method, err.message + "; on the command line: "
                             "--server-key SERVER.key --client-key YOURS.key_secret", err.t)
    return RunFailed(err)


def _hold_dashboard(sim) -> None:
    """At a terminal, keep a run's dashboard up until the user has looked (Enter)."""
    import sys
    board = getattr(sim, "dashboard", None)
    if board is None or not sys.stdin.isatty():
        return
    board.update()
    print(f"the run is over; its dashboard stays at {board.url} until you press Enter",
          file=sys.stderr, flush=True)
    try:
        input()
    except EOFError:
        pass


def cmd_run(args) -> int:
    phases = Phases()
    with phases.timed("reading the model"):
        model = load_model(args.model)
        params = overrides(args.params or [], model)
        cfg = run_config(model, args.model, args)
    out = _out_path(args.out)
    plot_file, plot_patterns = (args.plot[0], args.plot[1:]) if args.plot else (None, [])
    model.parameters.update(params)
    from cosim import simulation
    from cosim.errors import TransportError
    if args.dashboard is not None and cfg.cosim is None:
        raise Usage("--dashboard shows co-simulations: add --cosim H (or any co-simulation "
                    "option), or a simulation.cosim section to the model file")
    with phases.timed("compiling"):
        try:
            if args.dashboard is not None:     # the address is printed as it opens
                from cosim.master.cosimulation import CoSimulation
                sim = CoSimulation(model, cfg, dashboard=args.dashboard)
            else:
                sim = simulation(model, cfg)   # evaluates and compiles: model errors here
        except TransportError as err:      # a served unit out of reach or refusing us
            raise _failed(err) from err
    _backend_phases(sim, phases)
    live = None
    try:
        if args.resume:
            sim.load_checkpoint(args.resume)      # a mismatch is a model error (exit 2)
        else:
            try:
                with phases.timed("initializing"):
                    sim.initialize()
            except Exception as err:
                raise _failed(err) from err
        keys = list(sim.logs)
        # Signals are checked before the run: a typo costs no simulation.
        from cosim.run.plotting import select_signals
        select_signals(keys, plot_patterns)
        if args.live is not None:
            with phases.timed("opening the live view"):
                from cosim.run.live import LiveView
                live = LiveView(sim, select_signals(keys, args.live), title=model.name,
                                backend=args.live_backend)
        with phases.timed("run"):
            try:
                if live is not None:
                    try:
                        live.run(realtime=args.realtime)
                    finally:
                        live.close()
                    logs = sim.logs
                elif args.realtime is not None:
                    for _ in sim.run_realtime(speed=args.realtime):
                        pass
                    logs = sim.logs
                else:
                    logs = sim.run()
            except Exception as err:
                raise _failed(err) from err
        _hold_dashboard(sim)
    finally:
        if hasattr(sim, "close"):
            with phases.timed("closing"):
                sim.close()
    run_seconds = phases.durations["run"]
    lines = _summary(model, cfg, sim, logs, params, run_seconds)
    if live is not None:
        lines.append(f"live view: {live.redraws} redraws")
    if out is not None:
        with phases.timed("saving"):
            try:
                if out.suffix.lower() == ".npz" and hasattr(sim, "save_logs"):
                    sim.save_logs(out)     # with the step log, timing and placement
                else:
                    logs.save(out)
            except OSError as err:
                raise Usage(f"cannot write {out}: {err.strerror or err}") from err
            except ValueError as err:                      # a format the logs do not fit
                raise Usage(str(err)) from err
        lines.append(f"saved {out}")
    if plot_file:
        with phases.timed("plotting"):
            try:
                logs.plot(plot_patterns, path=plot_file, title=model.name)
            except OSError as err:
                raise Usage(f"cannot write {plot_file}: {err.strerror or err}") from err
        lines.append(f"plotted {plot_file}")
    lines.append(phases.summary())
    print("\n".join(lines))
    return EXIT_OK
