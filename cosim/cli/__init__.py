"""The ``cosim`` command: run, plan and check model files, export units, list the blocks.

::

    cosim run MODEL [-p NAME=VALUE ...] [--t-end T] [--out results.csv] [--plot F.png SIGNAL...]
              [--live [SIGNAL ...]] [--realtime SPEED] [--dashboard [HOST:PORT]]
              [co-simulation options]
    cosim plan MODEL [--dot FILE] [--blocks]
    cosim view MODEL [-o FILE.html | --serve [HOST:PORT]]
    cosim check MODEL
    cosim export-unit MODEL --subsystem NAME -o unit.yaml
    cosim report RESULTS -o report.html [--signals SIGNAL ...]
    cosim blocks [TYPE ...]

``-p`` values are numbers (``-p k=2.5``) or parameter expressions (``-p wn=2*pi*f``; a leading
``=`` is optional); they replace model parameters of the same name for this run. The
co-simulation options (``--cosim H``, ``--scheme``, ``--extrapolation``, ``--iterate``,
``--acceleration``, ``--backend``, ``--unit NAME.OPTION=VALUE``, ``--server-key``,
``--client-key``) are in :mod:`cosim.cli.options`. Other packages add commands (``serve``,
``keys``, ``sweep``, ``export-fmu``) through the ``cosim.commands`` entry point group.

Start-up is kept short: this module imports only argparse; a command imports what it needs
when it runs (``cosim --help``, ``check`` and ``plan`` never import scipy, matplotlib, ray,
zmq or fmpy).

Exit status: 0 on success; 2 for bad usage or a bad model (every problem of the model is
printed, each with its ``file:line:col``); 1 when a simulation fails. Messages go to stderr;
tracebacks only with ``--debug``.

Modules: :mod:`~cosim.cli.common` (errors, reading a file), :mod:`~cosim.cli.options` (run
options to a configuration), :mod:`~cosim.cli.run`, :mod:`~cosim.cli.inspect` (check, plan),
:mod:`~cosim.cli.export`, :mod:`~cosim.cli.report`, :mod:`~cosim.cli.view`, :mod:`~cosim.cli.blocks`, :mod:`~cosim.cli.wall` (where the wall
time went).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from cosim.cli.common import EXIT_FAILED, EXIT_USAGE, RunFailed, Usage

__all__ = ["Command", "block_reference", "commands", "main"]


def block_reference(names=None, markdown: bool = False) -> str:
    """The block library described from the classes' declarations (text or Markdown)."""
    from cosim.cli.blocks import block_reference as describe
    return describe(names, markdown)


def _command(module: str, name: str):
    """``args -> int`` running ``cosim.cli.<module>.<name>``, imported when it runs."""
    def run(args) -> int:
        import importlib
        return getattr(importlib.import_module(f"cosim.cli.{module}"), name)(args)
    return run


# --- the parser ----------------------------------------------------------------------------

def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true",
                        help="show the traceback of an error")
    parser = argparse.ArgumentParser(
        prog="cosim", description="Simulate and co-simulate block-diagram model files.",
        epilog="Exit status: 0 ok, 1 simulation failed, 2 bad usage or bad model. "
               "Guides: docs/guides/ in the repository.")
    from cosim import __version__
    parser.add_argument("--version", action="version", version=f"cosim {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("run", parents=[common], help="simulate a model file",
                       description="Simulate (or co-simulate) a model file and print a "
                                   "summary, with where the wall time went.")
    p.add_argument("model", help="model file (.yaml)")
    p.add_argument("-p", "--param", dest="params", action="append", metavar="NAME=VALUE",
                   help="override a model parameter (a number or an expression); repeatable")
    p.add_argument("--t-end", type=float, metavar="T", help="end time (s), instead of the "
                                                              "file's simulation.t_end")
    p.add_argument("--out", metavar="FILE", help="save the logs; the suffix chooses the "
                   "format: .csv, .parquet, .h5, .mat or .npz (the default)")
    p.add_argument("--resume", metavar="CHECKPOINT",
                   help="continue from a checkpoint (e.g. the one a failed run left)")
    p.add_argument("--plot", nargs="+", metavar=("FILE", "SIGNAL"),
                   help="plot the logs to FILE (.png, .pdf, .svg; needs matplotlib): the "
                        "signals named (names or globs such as 'motor/*'; default all), "
                        "checked before the run")
    p.add_argument("--live", nargs="*", metavar="SIGNAL",
                   help="show a live plot of these signals (names or globs; default all) "
                        "while the run goes (needs matplotlib)")
    p.add_argument("--live-backend", metavar="NAME", default=None,
                   help="matplotlib backend of the live plot (default: matplotlib's choice)")
    p.add_argument("--realtime", type=float, metavar="SPEED", default=None,
                   help="run in step with the wall clock, SPEED simulated seconds per second")
    p.add_argument("--dashboard", nargs="?", const=True, default=None, metavar="HOST:PORT",
                   help="show the co-simulation live in the browser: the address (with its "
                        "token) is printed; default 127.0.0.1 and a free port")
    from cosim.cli.options import add_cosim_arguments
    add_cosim_arguments(p)
    p.set_defaults(func=_command("run", "cmd_run"))

    p = sub.add_parser("plan", parents=[common], help="print the execution plan",
                       description="Compile a model file and print its execution plan; for "
                                   "a co-simulation, its units (step, solver, where they "
                                   "run), coupling graph and stepping order.")
    p.add_argument("model", help="model file (.yaml)")
    p.add_argument("--dot", metavar="FILE", help="also write the plan (a co-simulation: its "
                                                 "coupling graph) as Graphviz DOT ('-' for "
                                                 "stdout)")
    p.add_argument("--blocks", action="store_true",
                   help="a co-simulation: print the block plan as well")
    add_cosim_arguments(p)
    p.set_defaults(func=_command("inspect", "cmd_plan"), t_end=None)

    p = sub.add_parser("view", parents=[common], help="show a model's diagram in the browser",
                       description="Draw a model file as a diagram without running it: "
                                   "blocks and wires laid out, subsystems to open and close, "
                                   "units with their step, solver, feedthrough and where they "
                                   "would run, algebraic couplings marked.")
    p.add_argument("model", help="model file (.yaml)")
    p.add_argument("-o", "--out", metavar="FILE.html",
                   help="write the page as one self-contained file instead of serving it")
    p.add_argument("--serve", nargs="?", const=True, default=True, metavar="HOST:PORT",
                   help="serve the page (the default; 127.0.0.1 and a free port)")
    p.add_argument("--seconds", type=float, default=None, help=argparse.SUPPRESS)
    add_cosim_arguments(p)
    p.set_defaults(func=_command("view", "cmd_view"), t_end=None)

    p = sub.add_parser("check", parents=[common], help="check a model file",
                       description="Read, evaluate and compile a model file; print OK or "
                                   "every problem.")
    p.add_argument("model", help="model file or library file (.yaml)")
    p.set_defaults(func=_command("inspect", "cmd_check"))

    p = sub.add_parser("export-unit", parents=[common],
                       help="write an atomic subsystem as a unit file to serve",
                       description="Write atomic subsystem NAME of MODEL as a model file "
                                   "whose ports are the unit's: 'cosim check' accepts it and "
                                   "'cosim serve' serves it as unit NAME.")
    p.add_argument("model", help="model file (.yaml)")
    p.add_argument("--subsystem", required=True, metavar="NAME",
                   help="a top-level atomic subsystem of MODEL")
    p.add_argument("-o", "--out", required=True, metavar="FILE", help="unit file to write")
    p.set_defaults(func=_command("export", "cmd_export_unit"))

    p = sub.add_parser("report", parents=[common], help="write an HTML page about a run",
                       description="Write one self-contained HTML page about a results "
                                   "file: placement, plots per unit, macro-step timing per "
                                   "unit, coupling iterations and rejected steps (the last "
                                   "three from a co-simulation's .npz: cosim run --out R.npz).")
    p.add_argument("results", help="results file (.npz from a co-simulation, or any "
                                   "format cosim run --out writes)")
    p.add_argument("-o", "--out", required=True, metavar="FILE.html")
    p.add_argument("--signals", nargs="+", metavar="SIGNAL",
                   help="signals to plot, names or globs (default all)")
    p.add_argument("--title", help="page title (default: the model's name)")
    p.set_defaults(func=_command("report", "cmd_report"))

    p = sub.add_parser("blocks", parents=[common], help="list the block types",
                       description="List the block types model files can use: ports, "
                                   "parameters, feedthrough and sample time.")
    p.add_argument("types", nargs="*", metavar="TYPE", help="only these types")
    p.add_argument("--markdown", action="store_true",
                   help="print the reference as Markdown (docs/blocks.md is made this way)")
    p.set_defaults(func=_command("blocks", "cmd_blocks"))
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
        print(f"cosim: error: choose a command (run, plan, view, check, export-unit, report, "
              f"blocks, {', '.join(added)})", file=sys.stderr)
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
    except Usage as err:
        return fail(str(err), EXIT_USAGE)
    except ModelError as err:   # CompileError included: every problem, located
        return fail(str(err), EXIT_USAGE)
    except RunFailed as err:
        cause = err.args[0] if err.args else err.__cause__
        return fail(f"simulation failed: {type(cause).__name__}: {cause}", EXIT_FAILED)
    except KeyboardInterrupt:
        return fail("interrupted", 130)
    except Exception as err:   # a bug: say so, and how to see where
        hint = "" if args.debug else " (run with --debug for the traceback)"
        return fail(f"internal error: {type(err).__name__}: {err}{hint}", EXIT_FAILED)


if __name__ == "__main__":
    sys.exit(main())
