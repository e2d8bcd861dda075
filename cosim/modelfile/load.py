"""The loading entry points: read a file, check it against the schema, build what it holds."""

from __future__ import annotations

from pathlib import Path

from cosim.model.diagram import Model, Subsystem
from cosim.modelfile.build import Builder
from cosim.modelfile.reader import Doc, compose, read_text
from cosim.modelfile.schema import check_schema

__all__ = ["load", "load_model", "load_subsystem"]


def _parse(source, what: str) -> tuple[Doc, set]:
    """The read document of ``source`` and the paths that violate the schema."""
    text, filename, base_dir = read_text(source, what)
    doc = Doc(filename, base_dir, from_file=filename != "<string>")
    compose(doc, text)
    if doc.data is None and not doc.problems:
        doc.add((), "the file is empty; a model file starts with 'model: <name>' and a "
                     "library file with 'subsystem: <name>'")
    if doc.data is None:
        return doc, set()
    if not isinstance(doc.data, dict):
        doc.add((), "the top level must be a mapping ('model: <name>', 'blocks:', ...), not a "
                    f"{type(doc.data).__name__}")
        doc.data = None
        return doc, set()
    return doc, check_schema(doc)


def load_model(source) -> Model:
    """Read a model file.

    Parameters
    ----------
    source : str or os.PathLike
        A path (a :class:`~pathlib.Path`, or a one-line string that names an existing
        file, ends in ``.yaml``/``.yml`` or has no ``:``), or the YAML text itself.

    Returns
    -------
    Model
        The model, as written (references not yet inlined, expressions not yet evaluated).
        Its ``simulation`` attribute is the file's :class:`~cosim.config.SimulationConfig`,
        or None when the file has no ``simulation:`` section.

    Raises
    ------
    CompileError
        Listing every problem of the file, each as ``file.yaml:LINE:COL: message``.
    ModelError
        When the file cannot be read at all.
    """
    return _model(*_parse(source, "load_model"))


def _model(doc: Doc, bad: set) -> Model:
    data = doc.data
    if isinstance(data, dict) and "subsystem" in data:
        doc.add(("subsystem",), "this is a library (subsystem) file; reference it from a "
                                "model ('reference: file.yaml') or use load_subsystem()",
                key=True)
        data = None
    if data is None:
        raise doc.error(doc.filename)
    b = Builder(doc, bad)
    default = Path(doc.filename).stem if doc.filename != "<string>" else "model"
    name = b.get(data, (), "model", str, default)
    model = Model(name)
    model.parameters = {k: v for k, v in b.get(data, (), "parameters", dict, {}).items()
                        if b.ok(("parameters", k))}
    model.context = {k: v for k, v in b.get(data, (), "context", dict, {}).items()
                     if b.ok(("context", k))}
    # Parameters and the top context form one workspace (see cosim.model.evaluate).
    scope = set(model.parameters) | set(model.context)
    for key, values in (("parameters", model.parameters), ("context", model.context)):
        for var, v in values.items():
            b.expressions(v, (key, var), scope, f"{key}.{var}")
    b.diagram(model, data, (), scope, "")
    b.events(model, data)
    model.simulation = b.simulation(data)
    if doc.problems:
        raise doc.error(doc.filename)
    return model


def load_subsystem(path, name: str | None = None) -> Subsystem:
    """Read a library file: a subsystem definition (``subsystem: <name>`` at top level).

    Parameters
    ----------
    path : str or os.PathLike
        The file (or YAML text, as for :func:`load_model`).
    name : str, optional
        Name of the returned subsystem; defaults to the file's ``subsystem:`` name.

    Returns
    -------
    Subsystem

    Raises
    ------
    CompileError
        Listing every problem of the file, each as ``file.yaml:LINE:COL: message``.
    """
    return _subsystem(*_parse(path, "load_subsystem"), name)


def _subsystem(doc: Doc, bad: set, name: str | None) -> Subsystem:
    data = doc.data
    if isinstance(data, dict) and "subsystem" not in data:
        doc.add((), "a library file starts with 'subsystem: <name>'" +
                (" (this is a model file)" if "model" in data else ""))
        data = None
    if data is None:
        raise doc.error(doc.filename)
    b = Builder(doc, bad)
    own = b.get(data, (), "subsystem", str, "subsystem")
    entry = dict(data, type="Subsystem")
    entry.pop("subsystem", None)
    entry.pop("version", None)
    sub, _ = b.subsystem(own if name is None else name, entry, (), None, "",
                         f"subsystem {own!r}")
    if doc.problems or sub is None:
        raise doc.error(doc.filename)
    return sub


def load(source) -> Model | Subsystem:
    """Read a model file or a library file, whichever ``source`` is (see :func:`load_model`).

    A file whose top level has ``subsystem:`` is a library file (returns a Subsystem);
    otherwise a model file (returns a Model).
    """
    doc, bad = _parse(source, "load")
    if isinstance(doc.data, dict) and "subsystem" in doc.data:
        return _subsystem(doc, bad, None)
    return _model(doc, bad)
