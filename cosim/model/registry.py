"""The block types a model file may name: a registry of known block classes.

A model file says ``type: Gain``; the loader looks the name up here and nowhere else. The
registry holds cosim's own :class:`~cosim.model.diagram.Inport`,
:class:`~cosim.model.diagram.Outport`, :class:`~cosim.model.diagram.Goto` and
:class:`~cosim.model.diagram.From`, the classes of the installed *block libraries*, and the
classes a program adds with :func:`register_block_type`. A model file can never name an
importable module path: loading another team's file runs no code it chooses.

Block libraries are found through package entry points in the group
:data:`ENTRY_POINT_GROUP` (``cosim.block_libraries``), when the registry is first used, so
cosim never imports them by name and blocks added to a library need no registration. An
entry point's value names a package or a module: the public classes (Block subclasses whose
name does not start with ``_``) defined in each public module of the package, or in the
module itself, become block types. cosim's own ``pyproject.toml`` declares the
:mod:`blocks` package::

    [project.entry-points."cosim.block_libraries"]
    blocks = "blocks"

Libraries are scanned in the order of their entry-point names, a package's modules in the
order of their names; when two modules define the same name the first one wins and
:func:`conflicts` says so.

This module also describes a type from its class's own declarations, without instantiating
it (:func:`parameters`, :func:`describe`): the loader checks parameter names against it and
``cosim blocks`` prints it.
"""

from __future__ import annotations

import ast
import difflib
import functools
import importlib
import inspect
import pkgutil
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata
from types import ModuleType

from cosim.model.block import NAME_RE, Block
from cosim.errors import ModelError

__all__ = ["BlockType", "Declared", "ENTRY_POINT_GROUP", "Param", "RESERVED", "conflicts",
           "declared", "describe", "known", "library", "lookup", "name_of", "parameters",
           "register_block_type", "unknown_message", "unregister_block_type"]

#: The entry-point group in which packages declare their block libraries.
ENTRY_POINT_GROUP = "cosim.block_libraries"

#: Type names with a meaning of their own in model files (not block classes).
RESERVED = frozenset({"Subsystem"})

#: Parameters of ``Block.__init__`` that a user passes to any block (through ``**kw``).
#: ``inputs`` / ``outputs`` are for block implementers, not for model files.
_BASE_PARAMS = ("sample_time",)

_builtin: dict[str, type] | None = None
_user: dict[str, type] = {}
_conflicts: list[str] = []


def _library_modules() -> Iterator[ModuleType]:
    """The modules of the installed block libraries, in scanning order (see the module doc)."""
    for entry in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        library = entry.load()
        if not hasattr(library, "__path__"):   # a module, not a package
            yield library
            continue
        for info in sorted(pkgutil.iter_modules(library.__path__), key=lambda m: m.name):
            if not info.name.startswith("_"):
                yield importlib.import_module(f"{library.__name__}.{info.name}")


def _discover() -> dict[str, type]:
    """The classes of the block libraries' modules and cosim's port/tag blocks, by name."""
    global _builtin
    if _builtin is not None:
        return _builtin
    from cosim.model.diagram import From, Goto, Inport, Outport

    found: dict[str, type] = {c.__name__: c for c in (Inport, Outport, Goto, From)}
    for module in _library_modules():
        for attr, cls in sorted(vars(module).items()):
            if (attr.startswith("_") or not isinstance(cls, type) or not issubclass(cls, Block)
                    or cls.__module__ != module.__name__):
                continue
            other = found.get(attr)
            if other is not None and other is not cls:
                # Two library modules define the same name: keep the first (sorted by module)
                # and say so in `cosim blocks`, rather than make every model file unloadable.
                _conflicts.append(f"{attr}: {other.__module__} and {cls.__module__} both "
                                  f"define it; model files get {other.__module__}.{attr}")
                continue
            found[attr] = cls
    _builtin = found
    return found


def library() -> dict[str, type]:
    """The built-in block types only (the library, without program-registered ones)."""
    return dict(sorted(_discover().items()))


def known() -> dict[str, type]:
    """Every block type a model file may name: type name -> class, sorted by name."""
    merged = {**_discover(), **_user}
    return dict(sorted(merged.items()))


def conflicts() -> list[str]:
    """Library type names defined by more than one library module (the first one wins)."""
    _discover()
    return list(_conflicts)


def register_block_type(cls: type | None = None, *, name: str | None = None):
    """Make a user block class available to model files as ``type: <name>``.

    Parameters
    ----------
    cls : type
        A subclass of :class:`~cosim.model.block.Block`.
    name : str, optional
        Type name in model files; defaults to the class name.

    Returns
    -------
    type
        ``cls``, so this works as a decorator (``@register_block_type`` or
        ``@register_block_type(name="Motor")``).

    Raises
    ------
    ModelError
        If ``cls`` is not a Block class, the name is invalid or reserved, or another class
        already has the name.
    """
    def add(c):
        if not (isinstance(c, type) and issubclass(c, Block)):
            raise ModelError(f"register_block_type: {c!r} is not a Block class")
        type_name = c.__name__ if name is None else name
        if not isinstance(type_name, str) or not NAME_RE.match(type_name):
            raise ModelError(f"register_block_type: type name {type_name!r} is invalid; use "
                             "letters, digits and '_'")
        if type_name in RESERVED:
            raise ModelError(f"register_block_type: {type_name!r} is reserved in model files; "
                             "register the class under another name (name=...)")
        other = known().get(type_name)
        if other is not None and other is not c:
            raise ModelError(f"register_block_type: type {type_name!r} is already "
                             f"{other.__module__}.{other.__qualname__}; register "
                             f"{c.__qualname__} under another name (name=...)")
        _user[type_name] = c
        return c
    return add(cls) if cls is not None else add


def unregister_block_type(name: str) -> None:
    """Remove a type added with :func:`register_block_type` (library types cannot be removed)."""
    if name not in _user:
        raise ModelError(f"unregister_block_type: {name!r} was not added with "
                         "register_block_type()")
    del _user[name]


def lookup(name: str) -> type:
    """The class registered as ``name``.

    Raises
    ------
    ModelError
        Naming the closest registered types (``did you mean``) when ``name`` is unknown.
    """
    types = known()
    cls = types.get(name)
    if cls is None:
        raise ModelError(unknown_message(name, types))
    return cls


def unknown_message(name: object, types: dict[str, type] | None = None) -> str:
    """``unknown block type ...; did you mean ...`` for a name that is not registered."""
    types = known() if types is None else types
    close = difflib.get_close_matches(str(name), list(types) + sorted(RESERVED), n=3, cutoff=0.6)
    if not close:   # case slips (``gain``) are the commonest typo; difflib ranks them low
        close = [t for t in types if t.lower() == str(name).lower()]
    hint = f"did you mean {', '.join(close)}? " if close else ""
    if not metadata.entry_points(group=ENTRY_POINT_GROUP):
        # Entry points are package metadata: a checkout installed before they were declared
        # has none until it is reinstalled.
        hint += (f"no block library is installed (entry-point group {ENTRY_POINT_GROUP!r}; "
                 "reinstall the package: pip install -e .) ")
    return (f"unknown block type {name!r}; {hint}(`cosim blocks` lists the {len(types)} "
            "types; user classes need cosim.model.registry.register_block_type(cls))")


def name_of(cls: type) -> str | None:
    """The type name under which ``cls`` is registered, or None."""
    for type_name, c in known().items():
        if c is cls:
            return type_name
    return None


# --- describing a class from its declarations ------------------------------------------------

@dataclass(frozen=True)
class Param:
    """One constructor parameter of a block type.

    Attributes
    ----------
    name : str
    required : bool
        No default: a model file must give it.
    default : object
        The default value (None when required).
    """

    name: str
    required: bool
    default: object = None

    def __str__(self) -> str:
        return self.name if self.required else f"{self.name}={self.default!r}"


def _inits(cls: type):
    """``(class, unwrapped __init__)`` for each constructor in ``cls``'s MRO below Block."""
    for klass in cls.__mro__:
        if klass is Block or klass is object:
            return
        fn = klass.__dict__.get("__init__")
        if fn is not None:
            yield klass, inspect.unwrap(fn)


def _tree(fn) -> ast.AST | None:
    try:
        return ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return None


def _forwarding(cls: type, owner: type, fn) -> tuple[type, int, set[str]]:
    """Where ``fn`` (``owner.__init__``) forwards its ``**kw``: the class whose constructor
    receives them, how many positional arguments (``name`` included, ``self`` not) the call
    gives, and which keywords it sets itself. Without source: the next class of the MRO."""
    mro = cls.__mro__
    nxt = mro[mro.index(owner) + 1]
    tree = _tree(fn)
    for node in ast.walk(tree) if tree is not None else ():
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "__init__" and any(k.arg is None for k in node.keywords)):
            continue
        target, args = nxt, list(node.args)
        base = node.func.value
        if isinstance(base, ast.Name):   # Base.__init__(self, ...)
            found = fn.__globals__.get(base.id)
            if isinstance(found, type) and found in mro:
                target, args = found, args[1:]
        return target, len(args), {k.arg for k in node.keywords if k.arg is not None}
    return nxt, 0, set()


def parameters(cls: type) -> list[Param]:
    """The parameters a model file may give a block of class ``cls`` (without ``name``).

    They are the class's own constructor parameters and, when it forwards ``**kw`` to a base
    constructor, the base's parameters that the forwarding call leaves open (read from the
    call's source), down to ``sample_time`` of :class:`~cosim.model.block.Block`.
    """
    out: dict[str, Param] = {}
    klass, skip_pos, skip_kw = cls, 0, set()
    while True:
        found = next(_inits(klass), None)
        if found is None:   # the keywords reach Block.__init__
            for base in _BASE_PARAMS:
                out.setdefault(base, Param(base, False, None))
            return list(out.values())
        owner, fn = found
        forwards = False
        for i, p in enumerate(list(inspect.signature(fn).parameters.values())[1:]):
            if p.kind is p.VAR_KEYWORD:
                forwards = True
            elif (p.kind is not p.VAR_POSITIONAL and p.name != "name" and i >= skip_pos
                    and p.name not in skip_kw and p.name not in out):
                required = p.default is p.empty
                out[p.name] = Param(p.name, required, None if required else p.default)
        if not forwards:
            return list(out.values())
        klass, skip_pos, skip_kw = _forwarding(cls, owner, fn)


def _class_sources(cls: type) -> list[ast.AST]:
    """Syntax trees of the classes in ``cls``'s MRO below Block (those with source), most
    derived first."""
    trees = []
    for klass in cls.__mro__:
        if klass is Block or klass is object:
            break
        try:
            trees.append(ast.parse(textwrap.dedent(inspect.getsource(klass))))
        except (OSError, TypeError, SyntaxError):
            continue
    return trees


@dataclass(frozen=True)
class Declared:
    """What a block class fixes for all its instances, read from its source (:func:`declared`).

    Attributes
    ----------
    inputs, outputs : tuple of str or None
        The ports every instance has; None when the constructor chooses them from the
        parameters.
    feedthrough_varies : bool
        The constructor sets ``direct_feedthrough`` from the parameters.
    """

    inputs: tuple[str, ...] | None
    outputs: tuple[str, ...] | None
    feedthrough_varies: bool


@functools.lru_cache(maxsize=None)
def declared(cls: type) -> Declared:
    """The ports and feedthrough of ``cls`` as its declarations and constructors fix them.

    Ports are the class attributes ``input_ports`` / ``output_ports`` unless the class passes
    ``inputs=`` / ``outputs=`` to a base ``__init__`` (a literal tuple fixes them, any other
    value makes them depend on the parameters) or assigns ``self.input_names`` /
    ``self.output_names``. Feedthrough varies when a method assigns
    ``self.direct_feedthrough``. Read from the source of the classes below Block; nothing is
    instantiated; without source, only the class attributes are seen.
    """
    ports = {"inputs": tuple(cls.input_ports), "outputs": tuple(cls.output_ports)}
    fixed: set[str] = set()   # set by a more derived class already
    feedthrough = False
    for tree in _class_sources(cls):   # most derived first
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr == "__init__":
                for k in node.keywords:
                    if k.arg in ports and k.arg not in fixed:
                        fixed.add(k.arg)
                        try:
                            value = ast.literal_eval(k.value)
                            ports[k.arg] = tuple(value) if isinstance(value, (tuple, list)) \
                                and all(isinstance(v, str) for v in value) else None
                        except ValueError:
                            ports[k.arg] = None
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
            for t in targets:
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) \
                        and t.value.id == "self":
                    if t.attr in ("input_names", "output_names"):
                        ports[t.attr.replace("_names", "s")] = None
                        fixed.add(t.attr.replace("_names", "s"))
                    feedthrough |= t.attr == "direct_feedthrough"
    return Declared(ports["inputs"], ports["outputs"], feedthrough)


@dataclass(frozen=True)
class BlockType:
    """What a block type declares, for ``cosim blocks``.

    Attributes
    ----------
    name : str
        Type name in model files.
    cls : type
    summary : str
        First paragraph of the class docstring.
    inputs, outputs : tuple of str or None
        The ports every instance has (see :func:`declared`); None when the parameters
        choose them.
    default_inputs, default_outputs : tuple of str or None
        Ports of an instance made with the default parameters, for ports the parameters
        choose, when every parameter has a default (None otherwise).
    params : list of Param
    feedthrough : bool
        Declared ``direct_feedthrough``.
    feedthrough_varies : bool
        The constructor sets the feedthrough from the parameters.
    sample_time : None, float or tuple
        Declared sample time (None: inherited from the base step).
    continuous : bool
        The class has continuous state (implements ``derivative``).
    """

    name: str
    cls: type
    summary: str
    inputs: tuple[str, ...] | None
    outputs: tuple[str, ...] | None
    default_inputs: tuple[str, ...] | None
    default_outputs: tuple[str, ...] | None
    params: list[Param]
    feedthrough: bool
    feedthrough_varies: bool
    sample_time: object
    continuous: bool


def describe(name: str, cls: type | None = None) -> BlockType:
    """Describe block type ``name`` from its class's declarations.

    Nothing is instantiated except, for a type whose ports the parameters choose and whose
    parameters all have defaults, one instance with the defaults (to show its default ports).
    """
    cls = lookup(name) if cls is None else cls
    params = parameters(cls)
    decl = declared(cls)
    d_in = d_out = None
    if (decl.inputs is None or decl.outputs is None) and not any(p.required for p in params):
        try:
            inst = cls("probe")
            d_in, d_out = tuple(inst.input_names), tuple(inst.output_names)
        except Exception:   # a description must not fail on a constructor's own checks
            pass
    doc = (inspect.getdoc(cls) or "").strip()
    summary = " ".join(doc.split("\n\n")[0].split())   # the first paragraph, on one line
    return BlockType(
        name=name, cls=cls, summary=summary,
        inputs=decl.inputs, outputs=decl.outputs,
        default_inputs=d_in if decl.inputs is None else None,
        default_outputs=d_out if decl.outputs is None else None, params=params,
        feedthrough=cls.direct_feedthrough, feedthrough_varies=decl.feedthrough_varies,
        sample_time=cls.sample_time, continuous=cls.derivative is not Block.derivative)
