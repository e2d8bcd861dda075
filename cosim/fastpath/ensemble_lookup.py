"""The translation of conditional chains that are lookup tables (a Lookup1D's segments, a
Lookup2D's cells) for an ensemble: each member's cell found and its constants gathered
(:class:`~cosim.fastpath.ensemble_ops.Cells`), each branch template evaluated once on the
gathered constants. Part of :class:`cosim.fastpath.ensemble._Translator`.
"""

from __future__ import annotations

import ast

from cosim.fastpath import ensemble_ast as exprs

__all__ = ["LookupTranslation"]


class LookupTranslation:
    """The lookup part of the ensemble translator (a mixin: it emits into the translator's
    lines and buffers with its ``operand``, ``expr`` and temporaries)."""

    def _piecewise(self, chain, dst, mask) -> str | None:
        """A chain ``v0 if L op0 R0 else v1 if L op1 R1 else ... else vm`` (a lookup table's
        segments) in a fixed number of calls, or None when it has not that form.

        Every test compares one left side ``L`` with a constant; the branches fall into a
        few templates that differ only in constants (``a * (L - b) + c``). Branches that are
        themselves such chains, with the same tests in every branch (a 2-D table's cells,
        :func:`~cosim.fastpath.ensemble_ast.axes`), make a product of chains: a cell per
        combination. Each member's branch is the first whose test holds on each axis; its
        cell and the cell's constants are kept between evaluations by the lookup's
        :class:`~cosim.fastpath.ensemble_ops.Cells` and found again only when some member's
        input has left its cell. Each template is evaluated once, on its constants gathered
        per member (per-member tables are data), so each member
        computes its own branch's operations on its own branch's values. A constant the
        same in every branch is used as it is, not gathered; one repeated in a template is
        gathered once.

        Branches must be safe to compute for every member (no division, power, math), except
        divisions by a constant when every branch has one template: each member then divides
        by its own branch's divisor, as its own run does.
        """
        axes, values = exprs.axes(chain)
        if axes is None:
            return None
        groups: dict[str, list[int]] = {}
        slots: dict[str, list[list[str]]] = {}
        for j, v in enumerate(values):
            shape, consts = exprs.template(v)
            groups.setdefault(shape, []).append(j)
            slots.setdefault(shape, []).append(consts)
        if len(groups) > 3 or not all(
                exprs.safe(v) or (len(groups) == 1 and exprs.divides_by_constant(v))
                for v in values):
            return None
        tid = f"_pw{len(self.out.tables)}"
        lefts, chains = [], []
        for a, tests in enumerate(axes):
            lefts.append(self.operand(tests[0].left, False, mask))
            name = self._table(f"{tid}_c" + (str(a) if a else ""),
                               [[ast.unparse(t.comparators[0]) for t in tests]], kind="chain")
            self.out.tables[name]["ops"] = [exprs.COMPARISONS[type(t.ops[0])] for t in tests]
            chains.append(name)
        whole = ast.Tuple([*(t for tests in axes for t in tests), *values], ast.Load())
        out = dst if dst is not None and not exprs.reads(whole, self._sharing(dst)) \
            else self._temp("N")
        # The group of the most branches first, computed into the result; the others are
        # copied over it where members take them.
        order = sorted(groups, key=lambda g: (-len(groups[g]), groups[g][0]))
        # Every group's constants in one table, gathered in one call: a group's rows are
        # its slots, each entry its branch's constant (another group's branches take the
        # group's first: computed, never selected).
        texts, first_row = [], []
        for shape in order:
            inside = groups[shape]
            first_row.append(len(texts))
            texts += [[slots[shape][inside.index(b) if b in inside else 0][s]
                       for b in range(len(values))] for s in range(len(slots[shape][0]))]
        # A row of one constant throughout is that constant; equal rows are gathered once.
        gathered: dict[tuple, int] = {}
        for row in texts:
            if len(set(row)) > 1:
                gathered.setdefault(tuple(row), len(gathered))
        # Each member's cell and its constants (gathered values, the masks of the further
        # groups), one object for every evaluation of this lookup (see Cells).
        cells = self._table(tid, [list(r) for r in gathered], kind="cells")
        self.out.tables[cells].update(
            chains=chains, masks=[["1" if b in groups[shape] else "0"
                                   for b in range(len(values))] for shape in order[1:]])
        # Found again only when some member's input has left its cell (see Cells).
        less = self._owned(f"{tid}_lt", cells, "less")
        inside = self._owned(f"{tid}_in", cells, "inside")
        tests = []
        for a, left in enumerate(lefts):
            for b, side in enumerate(("lo", "hi")):
                bound = self._owned(f"{tid}_{side}{a}", cells, "bounds", (a, b))
                pair = self._owned(f"{tid}_p{a}{side}", cells, "pairs", (a, b))
                self.lines.append(f"{less}({left}, {bound}, {pair})")
            tests.append(f"{self._owned(f'{tid}_pb{a}', cells, 'pair_bytes', a)}() != {inside}")
        self.lines.append(f"if {' or '.join(tests)}:")
        self.lines.append(f"    {cells}({', '.join(lefts)})")
        views = [self._owned(f"{tid}_v{r}", cells, "vals", r) for r in range(len(gathered))]
        rows = [row[0] if len(set(row)) == 1 else views[gathered[tuple(row)]] for row in texts]
        for g, shape in enumerate(order):
            names = rows[first_row[g]:first_row[g] + len(slots[shape][0])]

            def group(g=g, shape=shape, names=names) -> None:
                if g == 0:
                    target = out
                elif shape == "_P0":
                    target = names[0]       # a constant branch: the gathered value itself
                else:
                    target = self._temp("N")
                if shape != "_P0" or target != names[0]:
                    saved = self.member
                    self.member = saved | (set(names) & set(views))
                    self.expr(exprs.fill(ast.parse(shape, mode="eval").body, names), target,
                              False, mask)
                    self.member = saved
                if g:
                    sel = self._owned(f"{tid}_b{g}", cells, "masks", g - 1)
                    self.lines.append(f"_copyto({out}, {target}, where={sel})")
            if g:
                # A further group is computed only while some member's cell takes it.
                self.lines.append(f"if {cells}.taken[{g - 1}]:")
                self._indented(group)
            else:
                group()
        if dst is not None and out != dst:
            self.lines.append(f"_copyto({dst}, {out})")
            return dst
        return out

    def _table(self, name: str, texts: list[list[str]], kind: str) -> str:
        """A lookup's constants made once per run from constants' sources (see
        :attr:`Translation.tables`)."""
        self.out.tables[name] = {"texts": texts, "kind": kind}
        self._buffer(name, ("table",))
        return name

    def _owned(self, name: str, table: str, attr: str, item=None) -> str:
        """A name bound to an array a table object keeps (see :attr:`Translation.owned`)."""
        self.out.owned[name] = (table, attr, item)
        return name
