"""The ``cosim`` command: run, plan and check model files, and list the block library.

::

    cosim run MODEL [-p NAME=VALUE ...] [--t-end T] [--out results.npz] [--backend local]
    cosim plan MODEL [--dot FILE]
    cosim check MODEL
    cosim blocks [TYPE ...]

``-p`` values are numbers (``-p k=2.5``) or parameter expressions (``-p wn=2*pi*f``; a leading
``=`` is optional); they replace model parameters of the same name for this run.

Exit status: 0 on success; 2 for bad usage or a bad model (every problem of the model is
printed, each with its ``file:line:col``); 1 when a simulation fails. Messages go to stderr;
tracebacks only with ``--debug``.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
import time
from dataclasses import dataclass

__all__ = ["Command", "commands", "main"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

_NUMBER = re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$")
_INT = re.compile(r"^[-+]?\d+$")


class _Usage(Exception):
    """Bad input from the user: printed as it is, exit status 2."""


class _RunFailed(Exception):
    """The simulation itself failed: exit status 1."""


# --- commands ------------------------------------------------------------------------------

def _load(path: str):
    """A model file, or a file of another format a package registered for its suffix (entry
    point group ``cosim.model_formats``: suffix -> function of the path returning a Model,
    e.g. ``ssp`` -> :func:`blocks.ssp.load_ssp`)."""
    from cosim.model.diagram import Model
    p = _existing(path)
    suffix = p.suffix.lower().lstrip(".")
    if suffix not in ("yaml", "yml", ""):
        from importlib.metadata import entry_points
        for ep in entry_points(group="cosim.model_formats"):
            if ep.name == suffix:
                return ep.load()(p)
    return Model.from_yaml(p)


def _existing(path: str):
    from pathlib import Path
    p = Path(path)
    if not p.is_file():
        raise _Usage(f"no such model file: {path}" if not p.exists() else
                     f"{path} is not a file")
    return p


def _config(model, path: str, t_end: float | None = None, backend: str | None = None,
            macro_step: float | None = None, monolithic: bool = False):
    """The model file's simulation options with the command line's changes.

    ``--cosim H`` or ``--backend`` co-simulate (with the file's co-simulation options if it
    has any, else Jacobi at the macro step H, default the base step); ``--monolithic`` runs
    the model as one simulation whatever the file says.
    """
    from dataclasses import replace

    from cosim.config import CosimConfig
    cfg = getattr(model, "simulation", None)
    if cfg is None:
        raise _Usage(f"{path} has no 'simulation:' section; add one with at least dt and "
                     "t_end, e.g. 'simulation: {dt: 0.01, t_end: 10.0}'")
    if t_end is not None:
        cfg = replace(cfg, t_end=t_end)   # validated again: a bad value is a ModelError
    if monolithic:
        if macro_step is not None or backend is not None:
            raise _Usage("--monolithic cannot be combined with --cosim or --backend")
        return replace(cfg, cosim=None)
    if macro_step is not None or backend is not None:
        cosim = cfg.cosim or CosimConfig(H=cfg.dt)
        if macro_step is not None:
            cosim = replace(cosim, H=macro_step)
        if backend is not None:
            cosim = replace(cosim, backend=backend)
        cfg = replace(cfg, cosim=cosim)
    return cfg


def _overrides(assignments: list[str], model) -> dict:
    """``-p NAME=VALUE`` arguments as parameter overrides (numbers or expressions)."""
    from cosim.model.expr import check_expression
    out, problems = {}, []
    params = model.parameters
    for text in assignments:
        name, sep, value = text.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name.isidentifier() or not value:
            problems.append(f"-p {text!r}: write NAME=VALUE (a number or an expression)")
            continue
        if name not in params:
            close = difflib.get_close_matches(name, list(params), n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            problems.append(f"-p {name}: not a parameter of model {model.name!r}{hint} "
                            f"(parameters: {', '.join(params) or 'none'})")
            continue
        if _INT.match(value):
            out[name] = int(value)
        elif _NUMBER.match(value):
            out[name] = float(value)
        else:
            expression = value if value.startswith("=") else "=" + value
            problem = check_expression(expression, set(params) | set(model.context))
            if problem is not None:
                problems.append(f"-p {name}={value}: {problem}")
                continue
            out[name] = expression
    if problems:
        raise _Usage("bad parameter override" + ("s" if len(problems) > 1 else "") + ":\n"
                     + "\n".join(f"  {p}" for p in problems))
    return out


def _simulator(model, cfg):
    from cosim import simulation
    return simulation(model, cfg)   # evaluates and compiles: model errors raise here


def _compile(model, cfg):
    """The model's plan and, for a co-simulation, its units, without starting a backend."""
    from dataclasses import replace
    plan = _simulator(model, replace(cfg, cosim=None)).plan
    units = None
    if cfg.cosim is not None:
        from cosim.master.partition import partition
        units = [u.name for u in partition(model, cfg).units]
    return plan, units


def _show(value) -> str:
    """A logged sample, short: a number, or a (possibly elided) list."""
    import numpy as np
    a = np.ravel(np.asarray(value, dtype=float))
    if a.size == 1:
        return f"{a[0]:.6g}"
    return np.array2string(a, precision=6, separator=", ", threshold=6)


def _summary(model, cfg, sim, logs, overrides: dict, wall: float) -> list[str]:
    size = f"{len(sim.plan.blocks)} blocks" if cfg.cosim is None else \
        f"{len(sim.partition.units)} units, co-simulated (H = {cfg.cosim.H:g} s)"
    lines = [f"model {model.name!r}: t = {cfg.t0:g} .. {cfg.t_end:g} s, dt = {cfg.dt:g} s "
             f"({cfg.n_steps} steps), {size}, solver {cfg.solver}"]
    if overrides:
        lines.append("parameters: " + ", ".join(f"{k} = {v}" for k, v in overrides.items()))
    events = getattr(sim, "event_log", [])
    fired = ", ".join(f"{n} at t={t:.6g}" for t, n in events[:10])
    if len(events) > 10:
        fired += f" (+{len(events) - 10} more)"
    lines.append(f"ran in {wall:.3f} s; {len(logs)} signals logged; "
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


def cmd_run(args) -> int:
    from pathlib import Path
    model = _load(args.model)
    overrides = _overrides(args.params or [], model)
    cfg = _config(model, args.model, args.t_end, args.backend, args.cosim, args.monolithic)
    out = None
    if args.out:
        from cosim.run.results import FORMATS
        out = Path(args.out)
        if out.suffix.lower() not in FORMATS:
            out = out.with_name(out.name + ".npz")          # no known suffix: as numpy
        if not out.parent.is_dir():
            raise _Usage(f"cannot write {out}: no directory {out.parent}")
    model.parameters.update(overrides)
    sim = _simulator(model, cfg)
    if args.resume:
        sim.load_checkpoint(args.resume)      # a mismatch is a model error (exit 2)
    start = time.perf_counter()
    try:
        logs = sim.run()
    except Exception as err:
        raise _RunFailed(err) from err
    finally:
        if hasattr(sim, "close"):
            sim.close()
    lines = _summary(model, cfg, sim, logs, overrides, time.perf_counter() - start)
    if out is not None:
        try:
            logs.save(out)
        except OSError as err:
            raise _Usage(f"cannot write {out}: {err.strerror or err}") from err
        except ValueError as err:                      # a format the logs do not fit
            raise _Usage(str(err)) from err
        lines.append(f"saved {out}")
    if args.plot:
        try:
            logs.plot(path=args.plot, title=model.name)
        except OSError as err:
            raise _Usage(f"cannot write {args.plot}: {err.strerror or err}") from err
        lines.append(f"plotted {args.plot}")
    print("\n".join(lines))
    return EXIT_OK


def cmd_plan(args) -> int:
    model = _load(args.model)
    plan, units = _compile(model, _config(model, args.model))
    print(plan.table())
    if units is not None:
        print(f"co-simulation units: {', '.join(units)}")
    if args.dot:
        dot = plan.to_dot()
        if args.dot == "-":
            print(dot)
        else:
            try:
                with open(args.dot, "w", encoding="utf-8") as fh:
                    fh.write(dot + ("" if dot.endswith("\n") else "\n"))
            except OSError as err:
                raise _Usage(f"cannot write {args.dot}: {err.strerror or err}") from err
            print(f"wrote {args.dot}", file=sys.stderr)
    return EXIT_OK


def cmd_check(args) -> int:
    """Every problem of a model file in one pass: the file's own (schema, blocks, connections)
    and those found compiling what could be built (undriven inputs, sample times, loops),
    each at its file:line:col."""
    from cosim.errors import CompileError, ModelError
    from cosim.model.diagram import Subsystem
    from cosim.modelfile.load import read_model_file
    reading = read_model_file(_existing(args.model))
    model = reading.model
    if isinstance(model, Subsystem):
        print(f"OK: {args.model} is a library file (subsystem {model.name!r}, "
              f"{len(model.blocks)} blocks; it is evaluated and compiled in the models that "
              "reference it)")
        return EXIT_OK
    problems, plan, units = list(reading.problems), None, None
    # A file with problems is compiled as far as it was built, on its dt and t_end alone
    # (another option of its simulation section may be among the problems).
    cfg = reading.timing if problems else None
    if model is not None and (cfg is not None or not problems):
        try:
            plan, units = _compile(model, cfg or _config(model, args.model))
        except CompileError as err:
            problems += reading.locate(err.problems)
        except ModelError:
            if not problems:
                raise
    if problems:
        raise CompileError(sorted(problems, key=_position), reading.filename)
    print(f"OK: {args.model} (model {model.name!r}: {len(plan.blocks)} blocks in "
          f"{len(plan.levels)} levels, {len(plan.tasks)} rate"
          f"{'s' if len(plan.tasks) != 1 else ''}"
          + (f"; co-simulation units: {', '.join(units)}" if units is not None else "") + ")")
    return EXIT_OK


def _position(problem: str) -> tuple[int, int]:
    """(line, col) of a ``file:LINE:COL: message`` problem; unlocated ones sort last."""
    m = re.match(r"[^\n]*?:(\d+):(\d+): ", problem)
    return (int(m.group(1)), int(m.group(2))) if m else (1 << 30, 0)


def _rate(value) -> str:
    if value is None:
        return "inherited (the base step)"
    if value == 0:
        return "continuous"
    if isinstance(value, tuple):
        return f"period {value[0]:g} s, offset {value[1]:g} s"
    return f"period {value:g} s"


def block_reference(names=None, markdown: bool = False) -> str:
    """The block library described from the classes' own declarations (text or Markdown)."""
    from cosim.model import declarations, registry as blocktypes
    types = blocktypes.known()
    # The Markdown reference documents the library itself, not types a program registered.
    names = list(names or (blocktypes.library() if markdown else types))
    unknown = [n for n in names if n not in types]
    if unknown:
        raise _Usage("\n".join(blocktypes.unknown_message(n, types) for n in unknown))

    def ports(fixed, default):
        if fixed is not None:
            return ", ".join(fixed) or "none"
        if default is not None:
            return f"set by the parameters ({', '.join(default) or 'none'} with the defaults)"
        return "set by the parameters"

    out = ["# Block reference", "",
           "Generated by `cosim blocks --markdown` from the block classes' declarations; a test "
           "keeps it current.", ""] if markdown else []
    for name in names:
        d = declarations.describe(name, types[name])
        ft = "yes" if d.feedthrough else "no"
        rows = [("inputs", ports(d.inputs, d.default_inputs)),
                ("outputs", ports(d.outputs, d.default_outputs)),
                ("parameters", ", ".join(map(str, d.params)) or "none"),
                ("feedthrough", ft + (" (class default); the parameters may change it"
                                      if d.feedthrough_varies else "")),
                ("sample time", _rate(d.sample_time) + ("; continuous state" if d.continuous
                                                        else ""))]
        if markdown:
            out += [f"## {name}", "", f"`{d.cls.__module__}` — {d.summary}", "",
                    "| | |", "|---|---|"]
            out += [f"| {k} | {v.replace('|', '/')} |" for k, v in rows] + [""]
        else:
            out.append(f"{name}  ({d.cls.__module__})  {d.summary}")
            out += [f"    {k + ':':<13} {v}" for k, v in rows]
    if not markdown:
        out += [f"note: {c}" for c in blocktypes.conflicts()]
    return "\n".join(out) + ("\n" if markdown else "")


def cmd_blocks(args) -> int:
    print(block_reference(args.types, markdown=args.markdown), end="" if args.markdown else "\n")
    return EXIT_OK


# --- the parser ----------------------------------------------------------------------------

def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true",
                        help="show the traceback of an error")
    parser = argparse.ArgumentParser(
        prog="cosim", description="Simulate and co-simulate block-diagram model files.",
        epilog="Exit status: 0 ok, 1 simulation failed, 2 bad usage or bad model.")
    from cosim import __version__
    from cosim.master.backends import backend_names
    parser.add_argument("--version", action="version", version=f"cosim {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("run", parents=[common], help="simulate a model file",
                       description="Simulate a model file and print a summary.")
    p.add_argument("model", help="model file (.yaml)")
    p.add_argument("-p", "--param", dest="params", action="append", metavar="NAME=VALUE",
                   help="override a model parameter (a number or an expression); repeatable")
    p.add_argument("--t-end", type=float, metavar="T", help="end time (s), instead of the "
                                                              "file's simulation.t_end")
    p.add_argument("--out", metavar="FILE", help="save the logs; the suffix chooses the "
                   "format: .csv, .parquet, .h5, .mat or .npz (the default)")
    p.add_argument("--backend", choices=backend_names(), default=None,
                   help="co-simulate, with the units running there (local: in this "
                        "process; ray: Ray actors, a local Ray is started if none runs; "
                        "zmq: server processes; remote: every unit at its address)")
    p.add_argument("--cosim", type=float, metavar="H", default=None,
                   help="co-simulate with macro step H (s): every top-level atomic "
                        "subsystem is a unit")
    p.add_argument("--monolithic", action="store_true",
                   help="simulate as one plan even if the file asks for co-simulation")
    p.add_argument("--resume", metavar="CHECKPOINT",
                   help="continue from a checkpoint (e.g. the one a failed run left)")
    p.add_argument("--plot", metavar="FILE.png", help="plot the logs (needs matplotlib)")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("plan", parents=[common], help="print the execution plan",
                       description="Compile a model file and print its execution plan.")
    p.add_argument("model", help="model file (.yaml)")
    p.add_argument("--dot", metavar="FILE", help="also write the plan as Graphviz DOT "
                                                 "('-' for stdout)")
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("check", parents=[common], help="check a model file",
                       description="Read, evaluate and compile a model file; print OK or "
                                   "every problem.")
    p.add_argument("model", help="model file or library file (.yaml)")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("blocks", parents=[common], help="list the block types",
                       description="List the block types model files can use: ports, "
                                   "parameters, feedthrough and sample time.")
    p.add_argument("types", nargs="*", metavar="TYPE", help="only these types")
    p.add_argument("--markdown", action="store_true",
                   help="print the reference as Markdown (docs/blocks.md is made this way)")
    p.set_defaults(func=cmd_blocks)
    for name, command in commands().items():
        sub.add_parser(name, help=command.help, add_help=False)
    return parser


@dataclass(frozen=True)
class Command:
    """A command another package adds to ``cosim`` (entry point group ``cosim.commands``).

    The entry point names the command and points at a ``Command`` in a light module; the
    implementation is imported only when the command runs, so ``cosim --help`` never imports
    zmq or ray.

    Parameters
    ----------
    help : str
        One line for ``cosim --help``.
    target : str
        ``"module:function"``; ``function(argv) -> int`` runs the command.
    """

    help: str
    target: str

    def run(self, argv: list[str]) -> int:
        import importlib
        module, _, attr = self.target.partition(":")
        return getattr(importlib.import_module(module), attr)(argv)


def commands() -> dict[str, Command]:
    """The commands other packages add, by name (sorted)."""
    from importlib.metadata import entry_points
    return {ep.name: ep.load() for ep in sorted(entry_points(group="cosim.commands"),
                                                key=lambda ep: ep.name)}


def main(argv: list[str] | None = None) -> int:
    """Run the ``cosim`` command line; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    added = commands()
    if argv and argv[0] in added:
        return added[argv[0]].run(argv[1:])
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:   # --help, --version, usage errors (argparse printed them)
        return stop.code if isinstance(stop.code, int) else EXIT_USAGE
    if args.command is None:
        parser.print_usage(sys.stderr)
        print(f"cosim: error: choose a command (run, plan, check, blocks, "
              f"{', '.join(added)})", file=sys.stderr)
        return EXIT_USAGE
    from cosim.errors import ModelError

    def fail(message: str, status: int) -> int:
        if args.debug:
            import traceback
            traceback.print_exc()
        print(f"cosim: error: {message}", file=sys.stderr)
        return status

    try:
        return args.func(args)
    except _Usage as err:
        return fail(str(err), EXIT_USAGE)
    except ModelError as err:   # CompileError included: every problem, located
        return fail(str(err), EXIT_USAGE)
    except _RunFailed as err:
        cause = err.__cause__
        return fail(f"simulation failed: {type(cause).__name__}: {cause}", EXIT_FAILED)
    except KeyboardInterrupt:
        return fail("interrupted", 130)
    except Exception as err:   # a bug: say so, and how to see where
        hint = "" if args.debug else " (run with --debug for the traceback)"
        return fail(f"internal error: {type(err).__name__}: {err}{hint}", EXIT_FAILED)


if __name__ == "__main__":
    sys.exit(main())
