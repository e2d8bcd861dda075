"""Reusable subsystem definitions, referenced by name or file and inlined at evaluation.

A definition is a factory ``f(name) -> Subsystem`` registered under a library name, or a YAML
subsystem file. Model files can only name registered definitions and files (never an
importable module path): loading another team's model must not run code it chooses.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from cosim.errors import ModelError

__all__ = ["register", "registered", "resolve"]

_LIBRARY: dict[str, Callable] = {}


def register(name: str, factory: Callable | None = None):
    """Register ``factory(name) -> Subsystem`` as library definition ``name``.

    Usable as a decorator: ``@register("motor")``.
    """
    def add(f):
        if not callable(f):
            raise ModelError(f"library {name!r}: the definition must be callable(name)")
        _LIBRARY[name] = f
        return f
    return add(factory) if factory is not None else add


def registered() -> list[str]:
    """Names of the registered definitions."""
    return sorted(_LIBRARY)


def resolve(ref, base_dir: Path | None = None):
    """Build the :class:`~cosim.model.diagram.Subsystem` a :class:`~cosim.model.diagram.Reference` names.

    The reference's ``overrides`` shadow the definition's own context values.
    """
    from cosim.model.diagram import Subsystem

    src = ref.source
    if callable(src):
        sub = src(ref.name)
    elif isinstance(src, str) and src in _LIBRARY:
        sub = _LIBRARY[src](ref.name)
    elif isinstance(src, str) and src.endswith((".yaml", ".yml")):
        path = Path(src)
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        from cosim.modelfile import load_subsystem
        sub = load_subsystem(path, ref.name)
    else:
        raise ModelError(f"reference {ref.name!r}: {src!r} is neither a registered library "
                         f"definition ({', '.join(registered()) or 'none registered'}) nor a "
                         "YAML file")
    if not isinstance(sub, Subsystem):
        raise ModelError(f"reference {ref.name!r}: definition {src!r} returned "
                         f"{type(sub).__name__}, not a Subsystem")
    sub.name = ref.name
    sub.context.update(ref.overrides)
    return sub
