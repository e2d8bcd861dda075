"""The loading entry points: read a file, check it against the schema, build what it holds."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from cosim.errors import CompileError, ModelError

from cosim.model.diagram import Model, Subsystem
from cosim.modelfile.build import Builder
from cosim.modelfile.reader import Doc, compose, read_text
from cosim.modelfile.schema import check_schema

__all__ = ["Reading", "load", "load_model", "load_subsystem", "read_model_file"]


def _parse(source, what: str, own_paths: bool = False) -> tuple[Doc, set]:
    """The read document of ``source`` and the paths that violate the schema."""
    text, filename, base_dir = read_text(source, what)
    doc = Doc(filename, base_dir, from_file=filename != "<string>", own_paths=own_paths)
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
    model, _ = _build_model(doc, bad)
    if doc.problems:
        raise doc.error(doc.filename)
    return model


def _build_model(doc: Doc, bad: set) -> tuple[Model | None, Builder | None]:
    """The model as far as it could be built, and its builder (problems are in ``doc``)."""
    data = doc.data
    if isinstance(data, dict) and "subsystem" in data:
        doc.add(("subsystem",), "this is a library (subsystem) file; reference it from a "
                                "model ('reference: file.yaml') or use load_subsystem()",
                key=True)
        data = None
    if data is None:
        return None, None
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
    return model, b


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


def load(source, *, own_paths: bool = False) -> Model | Subsystem:
    """Read a model file or a library file, whichever ``source`` is (see :func:`load_model`).

    A file whose top level has ``subsystem:`` is a library file (returns a Subsystem);
    otherwise a model file (returns a Model). ``own_paths``: the file is the caller's own
    (a unit file a master wrote for its server), and its blocks may write anywhere; other
    files write only inside the run's folder.
    """
    doc, bad = _parse(source, "load", own_paths)
    if isinstance(doc.data, dict) and "subsystem" in doc.data:
        return _subsystem(doc, bad, None)
    return _model(doc, bad)


@dataclass
class Reading:
    """A model file read as far as it goes, for a check that reports everything at once.

    Attributes
    ----------
    model : Model or None
        What could be built (blocks with problems left out), None if nothing could.
    problems : list of str
        The file's own problems, each ``file.yaml:LINE:COL: message``.
    """

    model: Model | None
    problems: list[str]
    filename: str
    origins: dict = field(default_factory=dict)   # block path -> (line, col)
    faulty: set = field(default_factory=set)      # block paths with problems of their own
    loose: set = field(default_factory=set)       # (block path, input) of unmade connections
    timing: object = None   # the section's dt and t_end alone (for a file with problems)

    def locate(self, problems) -> list[str]:
        """Compile-phase ``problems`` as ``file:LINE:COL: message`` where they name a block
        of this file (else as they are).

        When the file had problems of its own, only problems that cannot be their
        consequences are kept: those naming a block, and then either an input of it whose
        connections were all made (a block that compiled has its ports, whatever else is
        wrong with it) or a block without problems of its own.
        """
        out = []
        for p in problems:
            block, port = getattr(p, "block", None), getattr(p, "port", None)
            if self.problems:
                if block is None or (block, port) in self.loose:
                    continue
                if port is None and any(block == f or block.startswith(f + "/")
                                        for f in self.faulty):
                    continue
            out.append(p if block is None else f"{self.filename}:{self._where(block)}: {p}")
        return out

    def _where(self, block: str) -> str:
        # A block inside a referenced library file points at the reference.
        path = block
        while path not in self.origins and "/" in path:
            path = path.rsplit("/", 1)[0]
        line, col = self.origins.get(path, (1, 1))
        return f"{line}:{col}"


def read_model_file(source) -> Reading:
    """Read a model file without raising on its problems (see :class:`Reading`).

    A library (subsystem) file gives ``model=None`` when it has problems, else its
    Subsystem as ``model``.
    """
    doc, bad = _parse(source, "read_model_file")
    if isinstance(doc.data, dict) and "subsystem" in doc.data:
        try:
            sub = _subsystem(doc, bad, None)
        except CompileError as err:
            return Reading(None, err.problems, doc.filename)
        return Reading(sub, [], doc.filename)
    model, b = _build_model(doc, bad)
    problems = doc.error(doc.filename).problems if doc.problems else []
    if b is None:
        return Reading(None, problems, doc.filename)
    return Reading(model, problems, doc.filename, b.origins, b.faulty, b.loose,
                   _timing(doc.data))


def _timing(data: dict):
    """A SimulationConfig of the section's ``dt`` and ``t_end`` alone, or None: enough to
    check sample times when another field of the section is wrong."""
    from cosim.config import SimulationConfig
    spec = data.get("simulation")
    if not isinstance(spec, dict):
        return None
    try:
        return SimulationConfig(dt=spec.get("dt"), t_end=spec.get("t_end"))
    except (ModelError, ValueError, TypeError):
        return None
