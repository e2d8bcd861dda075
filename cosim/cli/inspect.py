"""``cosim check`` and ``cosim plan``: a model file read, evaluated and compiled, nothing run.

``check`` reports every problem of the file in one pass, each at its ``file:line:col``;
``plan`` prints the execution plan and, for a co-simulated model, its units (steps, solvers,
where they run), the coupling graph and the order the master steps them in.
"""

from __future__ import annotations

import re
import sys

from cosim.cli.common import EXIT_OK, existing, load_model, write_text
from cosim.cli.options import run_config

__all__ = ["cmd_check", "cmd_plan"]


def _compile(model, cfg):
    """The model's plan and, for a co-simulation, its units, without starting a backend."""
    from dataclasses import replace

    from cosim import simulation
    plan = simulation(model, replace(cfg, cosim=None)).plan   # evaluates and compiles
    units = None
    if cfg.cosim is not None:
        from cosim.master.partition import partition
        units = [u.name for u in partition(_split(model, cfg)[0], cfg).units]
    return plan, units


def _split(model, cfg):
    """An automatically split model (``--partition``): the parts and the split, else the
    model itself and None."""
    if cfg.cosim is None or cfg.cosim.partition is None:
        return model, None
    from cosim.master.autosplit import split_model
    split = split_model(model, cfg.cosim.partition, cfg)
    return split.model, split


def cmd_plan(args) -> int:
    model = load_model(args.model)
    cfg = run_config(model, args.model, args)
    plan, units = _compile(model, cfg)
    if units is None:
        print(plan.table())
        _write_dot(args.dot, plan.to_dot())
        return EXIT_OK
    from cosim.master.overview import overview
    split = _split(model, cfg)[1]
    if split is not None:                  # where the cuts are, before the units they make
        print(split.table())
        print()
    view = overview(model, cfg)
    print(view.table())
    if args.blocks:
        print(plan.table())
    _write_dot(args.dot, view.to_dot())
    return EXIT_OK


def _write_dot(path: str | None, dot: str) -> None:
    if path:
        write_text(path, dot)
        if path != "-":
            print(f"wrote {path}", file=sys.stderr)


def cmd_check(args) -> int:
    """Every problem of a model file in one pass: the file's own (schema, blocks, connections)
    and those found compiling what could be built (undriven inputs, sample times, loops),
    each at its file:line:col."""
    from cosim.errors import CompileError, ModelError
    from cosim.model.diagram import Subsystem
    from cosim.modelfile.load import read_model_file
    reading = read_model_file(existing(args.model))
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
            plan, units = _compile(model, cfg or run_config(model, args.model))
        except CompileError as err:
            problems += reading.locate(err.problems)
        except ModelError:
            if not problems:
                raise
    if problems:
        raise CompileError(sorted(problems, key=_position), reading.filename)
    print(f"OK: {args.model} (model {model.name!r}: {len(plan.blocks)} blocks in "
          f"{plan.n_levels} levels, {len(plan.tasks)} rate"
          f"{'s' if len(plan.tasks) != 1 else ''}"
          + (f"; co-simulation units: {', '.join(units)}" if units is not None else "") + ")")
    return EXIT_OK


def _position(problem: str) -> tuple[int, int]:
    """(line, col) of a ``file:LINE:COL: message`` problem; unlocated ones sort last."""
    m = re.match(r"[^\n]*?:(\d+):(\d+): ", problem)
    return (int(m.group(1)), int(m.group(2))) if m else (1 << 30, 0)
