"""The evaluation phase: inline library references, evaluate parameter expressions.

Runs in place on a model before compilation. Expressions (``"=..."`` strings, see
:mod:`cosim.model.expr`) are evaluated in scoped workspaces: the model's parameters first, then each
diagram's context from the outermost to the innermost, so one variable can parameterise many
blocks and one definition can be reused at several sizes. A block given expressions is
(re)built with the values. Every problem is collected into one CompileError.
"""

from __future__ import annotations

from pathlib import Path

from cosim.model.block import Block, has_spec
from cosim.errors import CompileError, ModelError, Problem
from cosim.model.expr import ExpressionError, Workspace, has_expression, is_expression
from cosim.model.diagram import Diagram, Reference, Subsystem

__all__ = ["evaluate", "parameter_value"]


def parameter_value(v, ws: Workspace, path: str):
    """Evaluate expressions inside a parameter value (nested lists allowed)."""
    if is_expression(v):
        return ws.evaluate(v, path=path)
    if isinstance(v, (list, tuple)) and has_expression(v):
        return [parameter_value(e, ws, path) for e in v]
    if isinstance(v, dict) and has_expression(v):
        return {k: parameter_value(e, ws, f"{path}.{k}") for k, e in v.items()}
    return v


def evaluate(model: Diagram, overrides: dict | None = None,
             base_dir: Path | None = None) -> None:
    """Evaluate ``model`` in place.

    Parameters
    ----------
    model : Model
    overrides : dict, optional
        Values that replace model parameters (parameter studies, ``cosim run -p``).
    base_dir : Path, optional
        Directory that relative library file references are taken from.

    Raises
    ------
    CompileError
        Listing every problem (bad expressions with their parameter paths, unknown library
        definitions, blocks that cannot be built from the values).
    """
    from cosim.model import library

    problems: list[str] = []
    params = dict(getattr(model, "parameters", {}) or {})
    unknown = sorted(set(overrides or {}) - set(params))
    if unknown:
        problems.append(f"parameter override {', '.join(unknown)} is not a parameter of model "
                        f"{model.name!r} (parameters: {', '.join(sorted(params)) or 'none'})")
    params.update(overrides or {})
    try:
        root = Workspace({**params, **model.context}, path=model.name)
    except ExpressionError as err:
        raise CompileError([str(err)], model.name) from None

    def walk(d: Diagram, ws: Workspace, prefix: str) -> None:
        for n, b in enumerate(d.blocks):
            path = f"{prefix}{b.name}"
            if isinstance(b, Reference):
                try:
                    b = d.blocks[n] = library.resolve(b, base_dir)
                except ModelError as err:
                    problems.append(Problem(f"{path}: {err}", path))
                    continue
            if isinstance(b, Subsystem):
                try:
                    inner = ws.child(b.context, path=path)
                except ExpressionError as err:
                    problems.append(str(err))
                    continue
                walk(b, inner, path + "/")
            elif isinstance(b, Block) and has_spec(b) and b.spec_has_expression():
                values = {}
                for key, v in b.spec().items():
                    try:
                        values[key] = parameter_value(v, ws, f"{path}.{key}")
                    except ExpressionError as err:
                        problems.append(Problem(str(err), path))
                if len(values) == len(b.spec()):
                    try:
                        b.rebuild(values)
                    except (ModelError, TypeError, ValueError) as err:
                        problems.append(Problem(f"{path}: {type(b).__name__} cannot be built "
                                                f"from {values}: {err}", path))
    walk(model, root, "")
    if problems:
        raise CompileError(problems, model.name)
