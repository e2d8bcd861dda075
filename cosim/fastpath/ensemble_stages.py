"""The Runge-Kutta side of the ensemble translation: a stage's combination of every
continuous-state component as one statement over the stacked ``(n_c, N)`` arrays, signals
computed straight into the stage derivative that copies them, the outputs stage 0 would
recompute unchanged left out, and products by ``1.0`` dropped. Part of
:class:`cosim.fastpath.ensemble._Translator`.
"""

from __future__ import annotations

import ast
import re

__all__ = ["StageTranslation", "times_one", "without_repeated_outputs"]

_STACKED = re.compile(r"\b(c|z)(\d+)\b|\bk(\d+)_(\d+)\b")


class StageTranslation:
    """The stage part of the ensemble translator (a mixin: it emits into the translator's
    lines with its ``expr`` and reads which values are member arrays)."""

    # -- Runge-Kutta combinations of every component at once ----------------------------------

    def _stacked_run(self, body, i: int) -> int:
        """Number of statements from ``body[i]`` that are one combination per component
        (``z<g> = c<g> + ...`` or ``c<g> = ...`` for g = 0 .. n_c-1), else 0."""
        if self.n_c < 2 or i + self.n_c > len(body):
            return 0
        texts = []
        for g, st in enumerate(body[i:i + self.n_c]):
            if not (isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Name)):
                return 0
            name = st.targets[0].id
            if not re.fullmatch(rf"[cz]{g}", name):
                return 0
            ok = True

            def sub(m, g=g):
                nonlocal ok
                if m.group(1):
                    ok &= int(m.group(2)) == g
                    return f"{m.group(1)}G"
                ok &= int(m.group(4)) == g
                return f"k{m.group(3)}_G"
            texts.append(_STACKED.sub(sub, ast.unparse(st)))
            if not ok:
                return 0
        return self.n_c if all(t == texts[0] for t in texts) else 0

    def _stacked(self, st, indent: int) -> None:
        """One statement over the ``(n_c, N)`` arrays ``C``, ``Z``, ``K<j>``."""
        text = _STACKED.sub(lambda m: ({"c": "C", "z": "Z"}[m.group(1)] if m.group(1)
                                       else f"K{m.group(3)}"), ast.unparse(st))
        tree = ast.parse(text).body[0]
        for shape in self.temps:
            self.temps[shape] = 0
        self.free = {"N": [], "C": []}
        saved = self.member
        self.member = saved | {"C", "Z"} | {f"K{j}" for j in range(8)}
        start = len(self.lines)
        self.expr(tree.value, tree.targets[0].id, stacked=True)
        self.member = saved
        self.lines[start:] = [" " * indent + ln for ln in self.lines[start:]]

    # -- signals computed into the stage derivatives ---------------------------------------

    def _retargets(self, body) -> None:
        """Signals computed straight into the stage derivative that is a copy of them
        (``s6 = ...; k0_0 = s6``: the copy is dropped, ``s6`` bound to ``k0_0``'s row), and
        so the signals they are copies of in turn (``s5 = ...; s6 = s5``, a gain of one:
        ``s5`` computed into the row, ``s6`` bound to it).

        Only an unguarded assignment of the signal (the latest before the copy) is moved;
        ``K<i>``'s rows are written nowhere else within a step.
        """
        latest: dict = {}
        self.retarget, self.dropped, self.bound = {}, set(), set()

        def walk(stmts, guarded: bool) -> None:
            for st in stmts:
                if isinstance(st, ast.If):
                    inner = guarded or ast.unparse(st.test) != "k < k_full"
                    walk(st.body, inner)
                    walk(st.orelse, inner)
                    continue
                if not (isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Name)):
                    continue
                tg, v = st.targets[0].id, st.value
                if re.fullmatch(r"k\d+_\d+", tg) and isinstance(v, ast.Name):
                    src = latest.pop(v.id, None)
                    if src is not None and not guarded:
                        self.retarget[id(src)] = tg
                        self.dropped.add(id(st))
                        value = times_one(src.value, self.ones)
                        while isinstance(value, ast.Name) and latest.get(value.id):
                            inner = latest.pop(value.id)
                            self.retarget[id(inner)] = tg
                            self.bound.add(id(src))
                            src, value = inner, times_one(inner.value, self.ones)
                elif tg in self.member and tg[0] == "s" and tg not in self.alias:
                    latest[tg] = None if guarded else st
        walk(body, False)
        targets = {id(st): st.targets[0].id for st in self._assigns(body)
                   if isinstance(st.targets[0], ast.Name)}
        self.moved = {targets[i] for i in self.retarget}


def times_one(node, ones=frozenset()):
    """A value of arithmetic without a product by ``1.0`` (``h * (1.0 * k2)``, a
    Runge-Kutta coefficient; a gain of 1.0, a constant in ``ones``): ``1.0 * x`` is ``x``
    for every float, a signalling NaN aside, which the arithmetic reading it quiets either
    way. One call fewer."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        for one, other in ((node.left, node.right), (node.right, node.left)):
            if (isinstance(one, ast.Constant) and type(one.value) is float and
                    one.value == 1.0) or (isinstance(one, ast.Name) and one.id in ones):
                return other
    return node


def _identity(st) -> bool:
    """True for a state update that keeps the state (``x0 = x0``; ``x0, x1 = x0, x1``)."""
    if not isinstance(st, ast.Assign):
        return False
    tg, v = st.targets[0], st.value
    if isinstance(tg, ast.Tuple):
        return isinstance(v, ast.Tuple) and all(_identity(ast.Assign([a], b))
                                                for a, b in zip(tg.elts, v.elts))
    return isinstance(tg, ast.Name) and isinstance(v, ast.Name) and tg.id == v.id


def without_repeated_outputs(body: list) -> list:
    """The loop body without the outputs Runge–Kutta stage 0 recomputes when nothing changed
    since the tick's own outputs (no state update before it): the same statements on the
    same values give the same results."""
    full = next((st for st in body if isinstance(st, ast.If) and
                 ast.unparse(st.test) == "k < k_full"), None)
    if full is None:
        return body
    first = {ast.unparse(st) for st in body if st is not full}
    kept, before, at_stage0 = [], True, False
    for st in full.body:
        text = ast.unparse(st)
        if before and text.startswith("h = "):
            before, at_stage0 = False, True
        elif before and not _identity(st):
            return body              # a state changes: stage 0 sees new values
        elif at_stage0 and re.match(r"k0_\d+ = ", text):
            at_stage0 = False
        elif at_stage0 and text in first:
            continue
        kept.append(st)
    new = ast.If(test=full.test, body=kept, orelse=full.orelse)
    return [new if st is full else st for st in body]
