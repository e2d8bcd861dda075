"""``cosim report``: one self-contained HTML page about a results file."""

from __future__ import annotations

from cosim.cli.common import EXIT_OK, Usage, existing

__all__ = ["cmd_report"]


def cmd_report(args) -> int:
    from cosim.run.report import write_report
    results = existing(args.results)
    try:
        out = write_report(results, args.out, signals=args.signals, title=args.title)
    except OSError as err:
        raise Usage(f"cannot write {args.out}: {err.strerror or err}") from err
    except ValueError as err:        # not a results file Logs.load reads
        raise Usage(f"{args.results}: {err}") from err
    print(f"wrote {out}")
    return EXIT_OK
