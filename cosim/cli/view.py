"""``cosim view``: a model file's diagram in the browser without running it: its blocks and
wires laid out, subsystems to open and close, and per unit its step, solver, feedthrough,
where it would run, the algebraic couplings marked (:mod:`cosim.dashboard`)."""

from __future__ import annotations

import sys

from cosim.cli.common import EXIT_OK, load_model, write_text
from cosim.cli.options import run_config

__all__ = ["cmd_view"]


def cmd_view(args) -> int:
    model = load_model(args.model)
    cfg = run_config(model, args.model, args)
    from cosim.dashboard.page import render
    from cosim.dashboard.static import view_state
    state = view_state(model, cfg)
    if args.out:
        write_text(args.out, render(model.name, state))
        print(f"wrote {args.out}")
        return EXIT_OK
    import threading

    from cosim.dashboard import Dashboard
    from cosim.dashboard.board import Board
    board = Dashboard(args.serve if args.serve is not True else None, title=model.name)
    try:
        board.board.publish(Board.delta_of(state))
        print(f"cosim view: {board.url}", flush=True)
        print("serving the page until interrupted (Ctrl-C)", file=sys.stderr, flush=True)
        threading.Event().wait(args.seconds) if args.seconds else threading.Event().wait()
    finally:
        board.close()
    return EXIT_OK
