"""What every ``cosim`` command shares: its errors, exit statuses and reading a model file."""

from __future__ import annotations

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "RunFailed", "Usage", "existing",
           "load_model", "write_text"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class Usage(Exception):
    """Bad input from the user: printed as it is, exit status 2."""


class RunFailed(Exception):
    """The simulation itself failed (the cause is chained): exit status 1."""


def existing(path: str):
    """``path`` as a Path to an existing file, or a Usage error saying what is there."""
    from pathlib import Path
    p = Path(path)
    if not p.is_file():
        raise Usage(f"no such model file: {path}" if not p.exists() else
                    f"{path} is not a file")
    return p


def load_model(path: str):
    """The Model of a model file (a ModelError lists its problems), or of a file of another
    format a package registered for its suffix (entry point group ``cosim.model_formats``:
    suffix -> function of the path returning a Model, e.g. ``ssp`` ->
    :func:`blocks.ssp.load_ssp`)."""
    from cosim.model.diagram import Model
    p = existing(path)
    suffix = p.suffix.lower().lstrip(".")
    if suffix not in ("yaml", "yml", ""):
        from importlib.metadata import entry_points
        for ep in entry_points(group="cosim.model_formats"):
            if ep.name == suffix:
                return ep.load()(p)
    return Model.from_yaml(p)


def write_text(path: str, text: str) -> None:
    """Write ``text`` to ``path`` ('-': stdout), a Usage error when it cannot be written."""
    import sys
    text = text + ("" if text.endswith("\n") else "\n")
    if path == "-":
        sys.stdout.write(text)
        return
    try:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as err:
        raise Usage(f"cannot write {path}: {err.strerror or err}") from err
