"""``cosim export-unit``: an atomic subsystem of a model file as a unit file to serve."""

from __future__ import annotations

from cosim.cli.common import EXIT_OK, Usage, load_model

__all__ = ["cmd_export_unit"]


def cmd_export_unit(args) -> int:
    from cosim.modelfile.unitfile import export_unit
    model = load_model(args.model)
    try:
        path = export_unit(model, args.subsystem, args.out)
    except OSError as err:
        raise Usage(f"cannot write {args.out}: {err.strerror or err}") from err
    sub = model[args.subsystem]
    print(f"wrote {path}: unit {args.subsystem!r} (inputs: "
          f"{', '.join(sub.input_names) or 'none'}; outputs: "
          f"{', '.join(sub.output_names) or 'none'}); serve it with: cosim serve {path} "
          "--bind tcp://HOST:PORT")
    return EXIT_OK
