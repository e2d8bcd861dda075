"""The expression evaluator's two exceptions: the public error and the internal stop signal."""

from __future__ import annotations

from collections.abc import Sequence

from cosim.errors import ModelError

__all__ = ["ExpressionError", "Refused"]


class ExpressionError(ModelError):
    """An expression, or a context of expressions, could not be evaluated.

    Parameters
    ----------
    reason : str
        What is wrong, with a remedy where there is one.
    expression : str, optional
        The expression text as written, or None when the error concerns a whole context.
    path : str, optional
        Where the expression lives, e.g. ``"plant/spring.k"`` or ``"plant"`` for a context.
    problems : sequence of str, optional
        For a context: one line per problem (each naming its variable and expression).
    """

    def __init__(self, reason: str, *, expression: str | None = None, path: str | None = None,
                 problems: Sequence[str] = ()):
        self.reason = reason
        self.expression = expression
        self.path = path
        self.problems = list(problems)
        where = path or ("<expression>" if expression is not None else "<context>")
        if expression is not None:   # the field keeps it whole; the message stays readable
            shown = expression if len(expression) <= 200 else expression[:200] + "..."
            head = f"{where} = {shown!r}"
        else:
            head = where
        lines = "".join(f"\n  {i + 1}. {p}" for i, p in enumerate(self.problems))
        super().__init__(f"{head}: {reason}{lines}")


class Refused(Exception):
    """Checking or evaluating stops; the entry points of :mod:`cosim.model.expr` turn it into
    an :class:`ExpressionError` that adds the expression and its path."""
