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

What a type's class declares (its parameters, ports and feedthrough) is read by
:mod:`cosim.model.declarations`.
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
from collections.abc import Iterator
from importlib import metadata
from types import ModuleType

from cosim.errors import ModelError
from cosim.model.block import NAME_RE, Block

__all__ = ["ENTRY_POINT_GROUP", "RESERVED", "conflicts", "known", "library", "lookup",
           "name_of", "register_block_type", "unknown_message", "unregister_block_type"]

#: The entry-point group in which packages declare their block libraries.
ENTRY_POINT_GROUP = "cosim.block_libraries"

#: Type names with a meaning of their own in model files (not block classes).
RESERVED = frozenset({"Subsystem"})

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
