"""The unit graph: links checked against the units' ports, who drives which input, the
algebraic couplings (strongly connected groups of feedthrough units) and the orders the
master steps and refreshes units in."""

from __future__ import annotations

from cosim.errors import CompileError, ModelError
from cosim.master import protocol as P
from cosim.numerics.graph import (condensation_levels, is_cycle,
                                  strongly_connected_components)

__all__ = ["UnitGraph"]


class UnitGraph:
    """How the units of a co-simulation are wired.

    Parameters
    ----------
    names : list of str
        Unit names, in the master's order.
    links : list of Link
    desc : dict of str to UnitDescription
    resolve : bool, optional
        Couplings are solved again at each macro point (default; ``CosimConfig(iterate=
        False)``: not, their outputs are those of their steps).

    Attributes
    ----------
    driver : dict of (str, str) to (str, str)
        ``(unit, input)`` -> the ``(unit, output)`` that drives it.
    inputs : dict of str to list of (str, (str, str))
        Unit -> ``(input name, driving output)`` for each of its inputs, in port order.
    groups : list of list of str
        Algebraic couplings: units coupled through direct feedthrough in a cycle.
    group_of : dict of str to list of str
        Unit -> its coupling, for the units in one.
    order : list of str
        Units in the order of the unit graph (Gauss–Seidel): upstream first; inside a cycle
        (broken by a unit without feedthrough), in the order of direct feedthrough.
    refresh_levels : list of list of (str or tuple of str)
        What is refreshed at each macro point once its inputs are known, level by level of
        the direct-feedthrough graph (one level together): feedthrough units outside
        couplings (their names), and couplings that read an output from outside them (a
        tuple of their units, as in :attr:`groups`), solved again there by refreshes
        iterated to a fixed point for their outside inputs' values at the macro point.
    relog : list of str
        Units of :attr:`refresh_levels` refreshed once more after the last level, for their
        logs: an input of theirs that feeds none of their outputs is driven by a unit
        refreshed with them or later.
    relog_t0 : list of str
        The same for co-initialization, whose units go in :attr:`order`.

    Raises
    ------
    CompileError
        Listing every bad link: unknown unit or port, differing shapes, an input driven
        twice or not at all.
    """

    def __init__(self, names: list[str], links, desc: dict, resolve: bool = True):
        self.names = names
        self.driver = self._check(links, desc)
        self.inputs = {u: [(p.name, self.driver[(u, p.name)]) for p in desc[u].inputs
                           if (u, p.name) in self.driver]       # (unlinked: optional ones)
                       for u in names}
        succ = {u: set() for u in names}
        direct = {u: set() for u in names}
        feeds = {u: {q for _, deps in desc[u].feedthrough for q in deps} for u in names}
        fed = {u: {out for out, deps in desc[u].feedthrough if deps} for u in names}
        for (v, q), (u, out) in self.driver.items():
            succ[u].add(v)
            # v's value at a macro point waits for u's only when u's output itself follows
            # u's inputs: an output known from u's step alone (a constant, a state) never
            # closes an algebraic loop, even when u has feedthrough elsewhere.
            if q in feeds[v] and out in fed[u]:
                direct[u].add(v)
        dcomps = strongly_connected_components(names, direct)
        self.groups = [c for c in dcomps if is_cycle(c, direct)]
        self.group_of = {u: g for g in self.groups for u in g}
        # The direct-feedthrough graph is acyclic once couplings are collapsed: its
        # topological order says who must go before whom within a macro point.
        corder, _ = condensation_levels(names, dcomps, direct)
        rank = {u: i for i, u in enumerate(u for c in corder for u in dcomps[c])}
        # Gauss–Seidel: upstream first; inside a cycle of the unit graph (broken by a unit
        # without feedthrough), in feedthrough order, so each unit steps after the units
        # whose outputs at T+H it depends on directly.
        comps = strongly_connected_components(names, succ)
        sorder, _ = condensation_levels(names, comps, succ)
        self.order = [u for c in sorder for u in sorted(comps[c], key=rank.__getitem__)]
        # Refreshed at a macro point, level by level of the direct-feedthrough graph: the
        # feedthrough units outside couplings, and the couplings that read an output from
        # outside them (solved again there for their outside inputs' values at T+H; a
        # coupling reading only its own outputs is solved by its step's iteration).
        level = {}
        for c in corder:
            comp = dcomps[c]
            g = self.group_of.get(comp[0])
            if g is None and not feeds[comp[0]]:
                continue
            if g is not None and (not resolve or all(key[0] in g for v in g
                                                     for _, key in self.inputs[v])):
                continue
            if g is None:
                before = {s for s in names if not direct[s].isdisjoint(comp)}
            else:
                # (a coupling is solved again after every driver refreshed before it, not
                # only its direct ones: its units then log those drivers' values at T+H,
                # with no refresh of theirs once more at the end for it)
                before = {d for v in g for _, (d, _) in self.inputs[v]}
            n = 1 + max((level[s] for s in before if s in level and s not in comp),
                        default=0)
            level.update(dict.fromkeys(comp, n))
        self.refresh_levels = []
        for n in range(1, max(level.values(), default=0) + 1):
            lv = []
            for u in self.order:
                g = self.group_of.get(u)
                if level.get(u) != n:
                    continue
                if g is None:
                    lv.append(u)
                elif tuple(g) not in lv:
                    lv.append(tuple(g))
            self.refresh_levels.append(lv)
        # A unit logs the inputs it is refreshed with. An input that feeds none of its
        # outputs does not order it after its driver, so a driver refreshed with it or later
        # leaves it logging the driver's value before that refresh (one macro step late):
        # such units are refreshed once more at the end, for their log (their outputs,
        # following only inputs from earlier units, stay the same).
        self._fed = fed
        self.relog = self._late(level, [[u for x in lv for u in ((x,) if type(x) is str else x)]
                                        for lv in self.refresh_levels])
        at = {}
        for i, u in enumerate(self.order):
            if u not in at:
                at.update((v, i) for v in self.group_of.get(u, [u]))
        self.relog_t0 = self._late(at, [self.order])

    def _late(self, position: dict, refreshed: list[list[str]]) -> list[str]:
        """Units of ``refreshed`` (lists, in order) with an input driven by a unit refreshed
        at the same ``position`` or later, through an output a refresh can change (one that
        follows its unit's inputs), outside their own coupling (a coupling's last iteration
        is consistent to its tolerance)."""
        late = []
        for units in refreshed:
            for u in units:
                own = self.group_of.get(u, [u])
                if any(d in position and position[d] >= position[u] and out in self._fed[d]
                       and (d == u or d not in own) for _, (d, out) in self.inputs[u]):
                    late.append(u)
        return late

    def ordered(self, order) -> list[str]:
        """The Gauss–Seidel order: ``order`` (every unit once) if given, else :attr:`order`.

        Raises
        ------
        ModelError
            ``order`` names an unknown unit, misses one or repeats one.
        """
        if order is None:
            return list(self.order)
        problems = []
        unknown = [u for u in order if u not in self.names]
        if unknown:
            problems.append(f"unknown unit(s) {', '.join(map(repr, unknown))}")
        missing = [u for u in self.names if u not in order]
        if missing:
            problems.append(f"missing {', '.join(map(repr, missing))}")
        repeated = sorted({u for u in order if list(order).count(u) > 1})
        if repeated:
            problems.append(f"repeated {', '.join(map(repr, repeated))}")
        if problems:
            raise ModelError(f"CosimConfig.order: {'; '.join(problems)}; give every unit once "
                             f"(units: {', '.join(self.names)}; derived order: "
                             f"{', '.join(self.order)})")
        return list(order)

    @staticmethod
    def _check(links, desc: dict) -> dict:
        problems = []
        outs = {u: {p.name: p.shape for p in d.outputs} for u, d in desc.items()}
        ins = {u: {p.name: p.shape for p in d.inputs} for u, d in desc.items()}
        driver = {}
        for ln in links:
            if ln.src not in outs or ln.src_port not in outs[ln.src]:
                problems.append(f"link {ln}: unit {ln.src!r} has no output {ln.src_port!r}")
                continue
            if ln.dst not in ins or ln.dst_port not in ins[ln.dst]:
                problems.append(f"link {ln}: unit {ln.dst!r} has no input {ln.dst_port!r}")
                continue
            if outs[ln.src][ln.src_port] != ins[ln.dst][ln.dst_port]:
                problems.append(f"link {ln}: shapes differ ({outs[ln.src][ln.src_port]} vs "
                                f"{ins[ln.dst][ln.dst_port]})")
            if (ln.dst, ln.dst_port) in driver:
                problems.append(f"input {ln.dst}.{ln.dst_port} is driven twice")
            driver[(ln.dst, ln.dst_port)] = (ln.src, ln.src_port)
        for u, ports in ins.items():
            if P.OPTIONAL_INPUTS in desc[u].capabilities:
                continue            # an unlinked input keeps the unit's own value
            for p in ports:
                if (u, p) not in driver:
                    problems.append(f"input {u}.{p} is not linked to any unit output")
        if problems:
            raise CompileError(problems, "co-simulation")
        return driver

    def coupling_keys(self, g: list[str]) -> list[tuple[str, str]]:
        """The outputs inside coupling ``g`` that feed inputs inside it, in a stable order."""
        return sorted({key for v in g for _, key in self.inputs[v] if key[0] in g})
