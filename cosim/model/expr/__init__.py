"""Safe evaluation of block-parameter expressions such as ``"=2*zeta*wn"``.

Model files come from other teams, so parameter expressions are evaluated by walking Python's
``ast`` (``mode="eval"``) against an explicit whitelist; user text never reaches ``eval`` or
``exec``, attribute access does not exist, and only allow-listed functions can be called.

Expression convention
---------------------
In a model file a string that starts with ``=`` is an expression; every other value is taken
literally::

    k: 4.0                          # a number
    signs: "+-"                     # a literal string (a Sum block's signs)
    c: =2*zeta*wn*m                 # an expression (YAML keeps ``=...`` as a plain string)
    A: =[[0, 1], [-k/m, -c/m]]

The prefix makes the meaning of a value visible in the file itself: the loader, a linter and a
reviewer can tell an expression from a literal string without knowing the block class (or
remote unit) that will receive it. A literal string that starts with ``=`` is written as an
expression with a string constant: ``='=x'``. In YAML, quote an expression containing ``: `` or
`` #``. `is_expression` applies the convention; `evaluate_expression` accepts the text with or without
the ``=``.

Scopes
------
Variables come from a sequence of mappings, outermost first: the model's parameters, then each
enclosing diagram's context; later (inner) mappings shadow earlier ones. `evaluate_context`
evaluates one context whose entries may refer to outer variables and to each other, and
`Workspace` chains contexts.

Language
--------
Numbers (``int``, ``float``, ``True``/``False``), string constants, list and tuple literals
(which become float arrays), ``+ - * / // % ** @``, comparisons, ``and or not``,
``a if cond else b``, variables, the constants ``pi e inf nan``, calls of the functions in
`FUNCTIONS` (positional arguments only) and subscripts with integers and slices (``A[0, 1]``,
``v[1:]``). Everything else is refused. ``[0]*n`` and ``[1] + [2]`` are refused as well: Python
would repeat/concatenate and numpy would scale/add, so the text is ambiguous; write ``zeros(n)``
or ``array([1, 2])*k``.

Result types
------------
``int`` (exact up to `Limits.max_int_bits`), ``float``, ``bool``, ``str``, or a fresh
``numpy.ndarray`` of ``float64``.
Every array an expression makes is float64; element-wise comparisons of arrays give 0.0/1.0.
Floating-point errors (``sqrt(-1)``, ``log(0)``, overflow) are errors, not ``nan``/``inf``.

Resource bounds (`Limits`): text length, AST size and depth, integer size (checked before
``**`` is computed), elements per array and per evaluation (checked before allocating) and
floating-point work of ``@``, ``inv`` and ``det``.

Modules
-------
`syntax` parses and whitelist-checks the text (limits, constants, the ``=`` convention),
`evaluator` walks a checked tree, `functions` holds the callable functions, `scopes` evaluates
expressions, contexts and workspaces (the entry points), and `errors` its two exceptions.
"""

from cosim.model.expr.errors import ExpressionError
from cosim.model.expr.functions import FUNCTIONS
from cosim.model.expr.scopes import (Workspace, check_expression, evaluate_context,
                                      evaluate_expression)
from cosim.model.expr.syntax import CONSTANTS, LIMITS, Limits, has_expression, is_expression

__all__ = ["CONSTANTS", "FUNCTIONS", "LIMITS", "ExpressionError", "Limits", "Workspace",
           "check_expression", "evaluate_expression", "evaluate_context", "has_expression",
           "is_expression"]
