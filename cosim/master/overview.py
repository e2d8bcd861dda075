"""What a co-simulation will do, without running it: its units (step, solver, where they
run), the coupling graph between them, its algebraic couplings and the order the master
steps them in — as a table (``cosim plan``) and as Graphviz DOT (``cosim plan --dot``).

The co-simulation is built with every unit in this process (the local backend) and
initialized, so what is shown is the master's own view; no other backend is started, no
server is reached and no macro step is taken.
"""

from __future__ import annotations

from dataclasses import dataclass

from cosim.config import Scheme
from cosim.master import protocol as P
from cosim.master.partition import Link
from cosim.master.engine import WINDOW
from cosim.master.program import Program, compile_program

__all__ = ["CosimOverview", "UnitRow", "overview", "unit_solver"]


@dataclass(frozen=True)
class UnitRow:
    """One unit as ``cosim plan`` shows it (``solver``: ``"discrete"`` for a unit without
    continuous state)."""

    name: str
    dt: float
    solver: str
    blocks: int
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    runs_on: str


@dataclass(frozen=True)
class CosimOverview:
    """A co-simulation's units, links, couplings and stepping order.

    Attributes
    ----------
    model : str
    H : float
        Macro step (s).
    scheme : Scheme
    units : tuple of UnitRow
        In the master's order of units.
    links : tuple of Link
    couplings : tuple of tuple of str
        Algebraic couplings (units coupled through direct feedthrough in a cycle), iterated
        each macro step unless ``iterate`` is off or feedthrough is delayed.
    order : tuple of str
        Gauss–Seidel: the order units step in; Jacobi: the units (all step together).
    program : Program
        The macro-step program (:mod:`cosim.master.program`) for the configured placement:
        its stages and round trips per macro step.
    window : Program
        The program of a window of :data:`~cosim.master.engine.WINDOW` macro steps (what
        the engine runs when the macro step is not adaptive): an action of a later macro
        step that reads nothing pending goes with a round of an earlier one.
    """

    model: str
    H: float
    scheme: Scheme
    units: tuple[UnitRow, ...]
    links: tuple[Link, ...]
    couplings: tuple[tuple[str, ...], ...]
    order: tuple[str, ...]
    program: Program
    window: Program

    def table(self) -> str:
        """Units, links, couplings and order as plain text."""
        rows = [("#", "unit", "step", "solver", "blocks", "inputs", "outputs", "runs on")]
        position = {u: i + 1 for i, u in enumerate(self.order)}
        for u in self.units:
            step = "any" if u.dt == 0 else f"{u.dt:g} s"
            rows.append((str(position[u.name]) if self.scheme is Scheme.GAUSS_SEIDEL else "-",
                         u.name, step, u.solver, str(u.blocks), ", ".join(u.inputs) or "-",
                         ", ".join(u.outputs) or "-", u.runs_on))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines = [f"co-simulation of {self.model!r}: {len(self.units)} units, macro step H = "
                 f"{self.H:g} s, {self.scheme.value}"]
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        lines.append("coupling graph (output -> input):")
        lines += [f"  {ln}" for ln in self.links] or ["  (no links)"]
        if self.couplings:
            lines.append("algebraic couplings (iterated to a fixed point each macro step):")
            lines += [f"  {' <-> '.join(g)}" for g in self.couplings]
        if self.scheme is Scheme.GAUSS_SEIDEL:
            lines.append("order (Gauss-Seidel): " + " -> ".join(self.order))
        else:
            lines.append("order (Jacobi): all units step together from the inputs at the "
                         "start of the macro step")
        lines.append(self.program.table())
        w = self.window
        lines.append(f"over a window of {w.steps} macro steps: {w.round_trips} round trip(s), "
                     f"{w.round_trips / w.steps:.2f} per macro step")
        return "\n".join(lines)

    def to_dot(self) -> str:
        """The coupling graph as Graphviz DOT: a node per unit (step, solver, position in the
        order), an edge per link; the links inside a coupling are drawn bold red."""
        coupled = {u for g in self.couplings for u in g}
        position = {u: i + 1 for i, u in enumerate(self.order)}
        gs = self.scheme is Scheme.GAUSS_SEIDEL
        out = [f'digraph "{self.model}" {{', "  rankdir=LR;",
               f'  label="{self.model}: H = {self.H:g} s, {self.scheme.value}";',
               "  node [shape=box, style=rounded];"]
        for u in self.units:
            step = "any step" if u.dt == 0 else f"dt {u.dt:g} s"
            head = f"{position[u.name]}. {u.name}" if gs else u.name
            out.append(f'  "{u.name}" [label="{head}\\n{step}, {u.solver}\\n{u.runs_on}"];')
        for ln in self.links:
            bold = ln.src in coupled and ln.dst in coupled and any(
                ln.src in g and ln.dst in g for g in self.couplings)
            style = ", color=red, penwidth=2" if bold else ""
            out.append(f'  "{ln.src}" -> "{ln.dst}" [label="{ln.src_port} -> {ln.dst_port}"'
                       f"{style}];")
        out.append("}")
        return "\n".join(out) + "\n"


def overview(model, config) -> CosimOverview:
    """The overview of co-simulating ``model`` with ``config`` (``cosim`` set).

    The co-simulation is built and initialized with every unit in this process (the
    configured placement is only reported), so units, links, couplings and order are the
    master's own — an automatic split (``partition``) included.

    Raises
    ------
    CompileError
        The partition's or the unit graph's problems (bad links, undriven unit inputs).
    """
    from dataclasses import replace

    from cosim.master.cosimulation import CoSimulation
    cfg = config.cosim
    here = replace(config, cosim=replace(cfg, backend="local", units={},
                                         checkpoint_every=None, trace=False))
    sim = CoSimulation(model, here)
    try:
        sim.initialize()
        master = sim.master
        rows = []
        for spec in sim.partition.units:
            d = master.desc[spec.name]
            opts = cfg.options(spec.name)
            where = cfg.backend_of(spec.name) + (f" {opts.address}" if opts.address else "")
            n_blocks = len(spec.subsystem.blocks) if spec.subsystem is not None else 1
            rows.append(UnitRow(spec.name, d.dt, unit_solver(spec, master.proxies[spec.name]),
                                n_blocks, tuple(p.name for p in d.inputs),
                                tuple(p.name for p in d.outputs), where))
        order = master.order if cfg.scheme is Scheme.GAUSS_SEIDEL else \
            [s.name for s in sim.partition.units]
        local = {r.name for r in rows if cfg.backend_of(r.name) == "local"}
        fusable = {u for u, d in master.desc.items() if P.FUSED_STEP in d.capabilities}
        program, window = (compile_program(master.graph, cfg.scheme, master.order,
                                           master.delayed, local, fusable,
                                           master.refresh_levels, steps)
                           for steps in (1, WINDOW))
        return CosimOverview(model.name, cfg.H, cfg.scheme, tuple(rows),
                             tuple(sim.partition.links),
                             tuple(tuple(g) for g in master.couplings), tuple(order), program,
                             window)
    finally:
        sim.close()


def unit_solver(spec, proxy) -> str:
    """The solver a unit integrates with, or ``"discrete"`` when its plan has no continuous
    state (its configured solver is never used)."""
    solver = getattr(spec.config, "solver", "-")
    sim = getattr(proxy.in_process(), "sim", None)
    if sim is not None and not any(b.has_derivative for b in sim.plan.blocks):
        return "discrete"
    return solver
