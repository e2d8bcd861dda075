"""Random co-simulation models and configurations for property-based tests.

A model is drawn as a :class:`ModelSpec` (plain data: its repr is the model, so a failing
draw that hypothesis shrank can be pasted into a regression test) and built by
:func:`build`. It has 2–6 atomic units, each with its own step (``H``, ``H/2``, ``H/3``,
``H/4``) and solver (RK4, Euler, or none: a discrete-only unit), made of blocks from
:mod:`blocks` (Gain, Sum, Saturation, ZeroOrderHold and UnitDelay at multiples of the unit's
step, Integrator, Constant, Sine), with outputs that do or do not follow the unit's inputs
directly; scalar or vector signals; top-level blocks between the units (sources, gains, sums,
holds, states) fed by and feeding units; the units wired as chains, rings, fans or at random,
so that algebraic loops through feedthrough units (held discrete outputs among them) occur;
in some draws a scheduled event of the top-level blocks off the macro grid, which may stop
the run.

Every output of a unit that follows its inputs is scaled so that its Lipschitz constant in
the max norm of the unit's inputs is at most 0.75, and no top-level path from the units'
outputs to a unit input amplifies: every algebraic coupling contracts (loop gain < 0.8), so
its iteration converges. Units coupled algebraically share one step (the co-simulation
refuses a coupling of units at different steps: its monolithic run does not exist).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from hypothesis import strategies as st

from blocks import Constant, Gain, Mux, Saturation, Sine, Sum, UnitDelay, ZeroOrderHold
from blocks.continuous import Integrator
from cosim import CosimConfig, Inport, Model, Outport, SimulationConfig, Subsystem
from cosim.model.events import Scheduled

#: Macro step (s) of every drawn model.
H = 0.01
#: Base ticks per macro step: every unit step H/1, H/2, H/3, H/4 is a whole number of them.
TICKS = 12

#: Blocks without an input that follows anything (a state or a source).
STATES = ("delay", "integrator")
SOURCES = ("const", "sine")
#: Blocks whose output follows their inputs directly.
DIRECT = ("gain", "sum", "sat", "zoh")


@dataclass(frozen=True)
class BlockSpec:
    """One block: ``kind`` (see :data:`STATES`, :data:`SOURCES`, :data:`DIRECT`), its
    ``inputs`` (signal references: inside a unit ``("in", j)`` its input ``j``, ``("b", i)``
    its block ``i``; at the top level ``("u", k, j)`` output ``j`` of unit ``k``, ``("t", i)``
    top-level block ``i``), its parameter ``p`` (gain, initial value, constant, amplitude,
    limit), and ``m``: the sum's signs, or the sample time in multiples of the step it runs
    at (0: none)."""

    kind: str
    inputs: tuple = ()
    p: float = 1.0
    m: object = 0


@dataclass(frozen=True)
class UnitSpec:
    """An atomic unit: step ``H / div``, ``solver`` (None: a discrete-only unit), ``n_in``
    inputs, its ``blocks`` and its ``outputs`` (per output: the signal it shows and the gain
    it is scaled by)."""

    div: int
    solver: str | None
    n_in: int
    blocks: tuple
    outputs: tuple


@dataclass(frozen=True)
class ModelSpec:
    """A model: signals of ``width`` elements, its ``units``, its ``top``-level blocks,
    per unit the driver of each input (a top-level signal reference), and the times of a
    scheduled event of the top-level blocks (``stop``: it stops the run)."""

    width: int
    units: tuple
    top: tuple
    drivers: tuple
    events: tuple = ()
    stop: bool = False


# -- what follows what --------------------------------------------------------------------

def _unit_signals(unit: UnitSpec) -> tuple[dict, dict]:
    """Per signal of ``unit``: the set of its inputs it follows directly, and its Lipschitz
    constant in the max norm of the unit's inputs (0 for a state or a source)."""
    dep = {("in", j): {j} for j in range(unit.n_in)}
    lip = {("in", j): 1.0 for j in range(unit.n_in)}
    for i, b in enumerate(unit.blocks):
        if b.kind in DIRECT:
            dep[("b", i)] = set().union(*(dep[r] for r in b.inputs))
            gain = abs(b.p) if b.kind == "gain" else 1.0
            lip[("b", i)] = gain * sum(lip[r] for r in b.inputs)
        else:
            dep[("b", i)], lip[("b", i)] = set(), 0.0
    return dep, lip


def _top_signals(spec: ModelSpec) -> dict:
    """Per top-level block: the unit outputs ``(k, j)`` it follows directly."""
    dep: dict = {}
    for i, b in enumerate(spec.top):
        if b.kind in DIRECT:
            dep[i] = set().union(*({(r[1], r[2])} if r[0] == "u" else dep[r[1]]
                                   for r in b.inputs))
        else:
            dep[i] = set()
    return dep


def _follows(spec: ModelSpec, ref) -> set:
    return {(ref[1], ref[2])} if ref[0] == "u" else _top_signals(spec)[ref[1]]


def coupled_groups(spec: ModelSpec, ports: bool = True) -> list[tuple[set, bool]]:
    """Sets of units in one algebraic loop, each with whether the loop passes through
    top-level blocks (then the top-level blocks' unit is in it). ``ports``: strongly
    connected through outputs that follow their units' inputs directly (the master's
    couplings); else through units with any such output, whichever input and output (the
    monolithic compile's view of an atomic subsystem, which refuses such a loop of units
    at different steps)."""
    n = len(spec.units)
    edges = {k: set() for k in range(n)}        # unit -> units its direct outputs feed
    via_top = set()                             # (k, v) through top-level blocks
    for v, unit in enumerate(spec.units):
        dep, _ = _unit_signals(unit)
        direct = [i for i in range(unit.n_in) if not ports and _direct_outputs(spec, v)]
        for j, (ref, _) in enumerate(unit.outputs):
            for i in (dep[ref] if ports else direct):
                for (k, _o) in _follows(spec, spec.drivers[v][i]):
                    # output o of unit k drives input i of v, which output j of v follows
                    if not ports or _o in _direct_outputs(spec, k):
                        edges[k].add(v)
                        if spec.drivers[v][i][0] == "t":
                            via_top.add((k, v))
    reach = {k: _reach(edges, k) for k in range(n)}
    groups = []
    for k in range(n):
        g = {v for v in range(n) if v in reach[k] and k in reach[v]}
        if g and g not in [h for h, _ in groups]:
            groups.append((g, any(a in g and b in g for a, b in via_top)))
    return groups


def _direct_outputs(spec: ModelSpec, k: int) -> set:
    unit = spec.units[k]
    dep, _ = _unit_signals(unit)
    return {j for j, (ref, _) in enumerate(unit.outputs) if dep[ref]}


def _reach(edges: dict, k: int) -> set:
    seen, todo = set(), [k]
    while todo:
        for v in edges[todo.pop()]:
            if v not in seen:
                seen.add(v)
                todo.append(v)
    return seen


# -- drawing ----------------------------------------------------------------------------------

_values = st.sampled_from([-1.5, -0.7, -0.3, 0.2, 0.5, 1.0, 1.3])
_gains = st.sampled_from([-0.9, -0.5, -0.2, 0.3, 0.6, 0.8])
_scales = st.sampled_from([-0.75, -0.4, 0.25, 0.5, 0.75])


@st.composite
def units(draw, width: int, divs=(1, 2, 3, 4), solvers=("RK4", "Euler", None)):
    """One unit's spec: at a step ``H / div``, ``div`` one of ``divs``, with one of
    ``solvers`` (None: discrete only)."""
    solver = draw(st.sampled_from(solvers))
    div = draw(st.sampled_from(divs))
    n_in = draw(st.integers(0, 2))
    pool = [("in", j) for j in range(n_in)]
    blocks: list = []
    states = draw(st.lists(st.sampled_from(STATES if solver else ("delay",)), max_size=2))
    for kind in states:
        m = draw(st.sampled_from([0, 0, 1, 2])) if kind == "delay" else 0
        blocks.append(BlockSpec(kind, (), draw(_values), m))     # input connected below
    for kind in draw(st.lists(st.sampled_from(SOURCES), max_size=1)):
        blocks.append(BlockSpec(kind, (), draw(_values)))
    pool += [("b", i) for i in range(len(blocks))]
    if not pool:
        blocks.append(BlockSpec("const", (), draw(_values)))
        pool.append(("b", 0))
    for kind in draw(st.lists(st.sampled_from(DIRECT), max_size=4)):
        if kind == "sum":
            ins = (draw(st.sampled_from(pool)), draw(st.sampled_from(pool)))
            b = BlockSpec(kind, ins, 1.0, draw(st.sampled_from(["++", "+-", "-+"])))
        elif kind == "zoh":
            b = BlockSpec(kind, (draw(st.sampled_from(pool)),), 1.0,
                          draw(st.sampled_from([1, 2, 3])))
        else:
            b = BlockSpec(kind, (draw(st.sampled_from(pool)),),
                          draw(_gains) if kind == "gain" else abs(draw(_values)))
        pool.append(("b", len(blocks)))
        blocks.append(b)
    # states read any signal, later ones included (they break the loop)
    blocks = [replace(b, inputs=(draw(st.sampled_from(pool)),)) if b.kind in STATES else b
              for b in blocks]
    n_out = draw(st.integers(1, 2))
    own = [("b", i) for i, b in enumerate(blocks) if b.kind in STATES + SOURCES]
    refs = []
    for _ in range(n_out):
        ref = draw(st.sampled_from(pool))
        if own and draw(st.booleans()):
            # the output follows the inputs and the unit's own states or sources
            blocks.append(BlockSpec("sum", (ref, draw(st.sampled_from(own))), 1.0, "++"))
            ref = ("b", len(blocks) - 1)
        refs.append(ref)
    draft = UnitSpec(div, solver, n_in, tuple(blocks), ())
    _, lip = _unit_signals(draft)
    outputs = [(ref, draw(_scales) / max(1.0, lip[ref])) for ref in refs]
    return replace(draft, outputs=tuple(outputs))


@st.composite
def models(draw, max_units: int = 6, at_H: bool = False, discrete: bool = False):
    """A :class:`ModelSpec` (see the module docstring); ``at_H``: every unit steps at
    ``H``; ``discrete``: every unit discrete, and no continuous top-level block."""
    width = draw(st.sampled_from([1, 1, 2]))
    n = draw(st.integers(2, max_units))
    # (units all faster than H in some draws: a grid an adaptive H can shrink to)
    divs = (1,) if at_H else draw(st.sampled_from([(1, 2, 3, 4), (1, 2, 3, 4), (2, 4)]))
    us = [draw(units(width, divs, (None,)) if discrete else units(width, divs))
          for _ in range(n)]
    outs = [("u", k, j) for k, u in enumerate(us) for j in range(len(u.outputs))]
    # top-level blocks: sources, states and blocks between the units
    top: list = []
    n_src = draw(st.integers(0, 2))
    for _ in range(n_src):
        top.append(BlockSpec(draw(st.sampled_from(SOURCES)), (), draw(_values)))
    n_top = draw(st.integers(0, 3))
    for _ in range(n_top):
        signals = outs + [("t", i) for i in range(len(top))]
        kind = draw(st.sampled_from(("gain", "sum", "sat", "zoh", "delay")
                                    + (() if discrete else ("integrator",))))
        ref = draw(st.sampled_from(signals))
        if kind == "sum":
            # a setpoint minus a signal: no amplification of a loop through it
            fixed = [("t", i) for i, b in enumerate(top) if b.kind not in DIRECT]
            if not fixed:
                top.append(BlockSpec("sine", (), draw(_values)))
                fixed = [("t", len(top) - 1)]
            b = BlockSpec(kind, (draw(st.sampled_from(fixed)), ref), 1.0,
                          draw(st.sampled_from(["+-", "++"])))
        elif kind == "gain":
            b = BlockSpec(kind, (ref,), draw(_gains))
        elif kind == "zoh":
            b = BlockSpec(kind, (ref,), 1.0, draw(st.sampled_from([0, TICKS])))
        else:
            b = BlockSpec(kind, (ref,), abs(draw(_values)) if kind == "sat" else draw(_values))
        top.append(b)
    signals = outs + [("t", i) for i in range(len(top))]
    shape = draw(st.sampled_from(["random", "chain", "ring", "fan"]))
    drivers = []
    for k, u in enumerate(us):
        ins = [draw(st.sampled_from(signals)) for _ in range(u.n_in)]
        if ins and shape in ("chain", "ring") and (k or shape == "ring"):
            ins[0] = ("u", (k - 1) % n, 0)
        elif ins and shape == "fan" and top:
            ins[0] = ("t", 0)
        drivers.append(tuple(ins))
    events, stop = (), False
    if top and draw(st.integers(0, 3)) == 0:
        # (off the macro grid: an adaptive macro step ends there)
        events = tuple(draw(st.lists(st.sampled_from([0.0125, 0.04, 0.1175]), min_size=1,
                                     max_size=2, unique=True)))
        stop = draw(st.booleans())
    spec = ModelSpec(width, tuple(us), tuple(top), tuple(drivers), events, stop)
    return same_steps_in_couplings(spec)


def same_steps_in_couplings(spec: ModelSpec) -> ModelSpec:
    """``spec`` with the units of each algebraic loop at its first unit's step; a loop
    through top-level blocks (which run at the base step) makes its units' step the base
    step: every other unit's step becomes a multiple of it."""
    us = list(spec.units)
    groups = coupled_groups(spec, ports=False)
    for g, _ in groups:
        div = us[min(g)].div
        for k in g:
            us[k] = replace(us[k], div=div)
    top = [g for g, through in groups if through]
    if top:
        base = us[min(top[0])].div
        us = [replace(u, div=base if any(k in g for g in top) else math.gcd(u.div, base))
              for k, u in enumerate(us)]
    return replace(spec, units=tuple(us))


# -- building -------------------------------------------------------------------------------

def _block(name: str, b: BlockSpec, width: int, dt: float) -> list:
    """The blocks of ``b`` (a vector sine is a sum of a constant vector and a sine), the
    last one showing its signal at ``.out``."""
    vec = np.full(width, float(b.p))
    st_kw = {"sample_time": b.m * dt} if isinstance(b.m, int) and b.m else {}
    if b.kind == "gain":
        return [Gain(name, b.p)]
    if b.kind == "sum":
        return [Sum(name, b.m)]
    if b.kind == "sat":
        return [Saturation(name, lower=-b.p, upper=b.p)]
    if b.kind == "zoh":
        return [ZeroOrderHold(name, **st_kw)]
    if b.kind == "delay":
        return [UnitDelay(name, initial=vec, **st_kw)]
    if b.kind == "integrator":
        return [Integrator(name, initial=vec)]
    if b.kind == "const":
        return [Constant(name, vec + 0.1 * np.arange(width))]
    if b.kind == "sine":
        if width == 1:
            return [Sine(name, amplitude=b.p, frequency=2.3, phase=0.4)]
        return [Sine(f"{name}_s{i}", amplitude=b.p, frequency=1.7 + i, phase=0.3 * i)
                for i in range(width)] + [Mux(name, n_inputs=width)]
    raise ValueError(b.kind)


def _add(diagram, name: str, b: BlockSpec, width: int, dt: float, ref_name) -> None:
    parts = _block(name, b, width, dt)
    diagram.add(*parts)
    for i, part in enumerate(parts[:-1]):           # a vector sine's sines into its mux
        diagram.connect(f"{part.name}.out", f"{name}.in{i + 1}")
    for i, r in enumerate(b.inputs):
        port = f"in{i + 1}" if b.kind == "sum" else "in"
        diagram.connect(ref_name(r), f"{name}.{port}")


def build(spec: ModelSpec) -> Model:
    """The model of ``spec``."""
    w = spec.width
    m = Model("random")
    for k, u in enumerate(spec.units):
        dt = H / u.div
        s = Subsystem(f"u{k}", atomic=True, dt=dt, solver=u.solver)
        for j in range(u.n_in):
            s.add(Inport(f"in{j}", shape=(w,)))

        def inner(r):
            return f"in{r[1]}.out" if r[0] == "in" else f"b{r[1]}.out"
        for i, b in enumerate(u.blocks):
            _add(s, f"b{i}", b, w, dt, inner)
        for j, (ref, k_out) in enumerate(u.outputs):
            s.add(Gain(f"o{j}", float(k_out)), Outport(f"y{j}"))
            s.connect(inner(ref), f"o{j}.in")
            s.connect(f"o{j}.out", f"y{j}.in")
        m.add(s)

    def outer(r):
        return f"u{r[1]}.y{r[2]}" if r[0] == "u" else f"t{r[1]}.out"
    for i, b in enumerate(spec.top):
        _add(m, f"t{i}", b, w, H / TICKS, outer)
    for k, ins in enumerate(spec.drivers):
        for j, r in enumerate(ins):
            m.connect(outer(r), f"u{k}.in{j}")
    if spec.events:
        m.add_event(Scheduled("ev", times=spec.events, stop=spec.stop))
    return m


def base_step(spec: ModelSpec) -> float:
    """The base step: the largest that every unit's step is a multiple of."""
    lcm = math.lcm(*(u.div for u in spec.units))
    return H / lcm


# -- configurations ---------------------------------------------------------------------------

@st.composite
def configs(draw, spec: ModelSpec, adaptive: bool = True) -> SimulationConfig:
    """A SimulationConfig co-simulating ``spec``: scheme, extrapolation, feedthrough mode,
    coupling iteration (acceleration, relaxation, tolerance, iterations allowed, what
    non-convergence does), adaptive H, log and checkpoint strides, Gauss–Seidel order,
    start and end times (a last macro step shorter than H where the units' common grid
    allows), the main solver, generated code or the interpreter, a log selection."""
    scheme = draw(st.sampled_from(["jacobi", "gauss-seidel"]))
    opts = dict(scheme=scheme, extrapolation=draw(st.integers(0, 2)),
                feedthrough=draw(st.sampled_from(["resolve", "resolve", "delay"])),
                acceleration=draw(st.sampled_from(["none", "aitken", "anderson", "newton"])),
                relaxation=draw(st.sampled_from([1.0, 1.0, 0.8])),
                tolerance=draw(st.sampled_from([1e-10, 1e-12])),
                on_nonconvergence=draw(st.sampled_from(["raise", "continue"])),
                max_iterations=draw(st.sampled_from([50, 50, 3])),
                iterate=draw(st.sampled_from([True, True, True, False])),
                log_every=draw(st.integers(1, 12)),
                checkpoint_every=draw(st.sampled_from([None, None, 3, 7])))
    if scheme == "gauss-seidel" and draw(st.booleans()):
        names = [f"u{k}" for k in range(len(spec.units))] + (["main"] if spec.top else [])
        opts["order"] = tuple(draw(st.permutations(names)))
    grid = math.lcm(*(TICKS // u.div for u in spec.units))     # units' common grid, ticks
    if adaptive and grid < TICKS and draw(st.booleans()):
        opts.update(adaptive=True, rtol=draw(st.sampled_from([1e-3, 1e-6])), atol=1e-8,
                    H_min=grid * H / TICKS, H_max=H)
    steps = draw(st.sampled_from([3, 7, 18, 33]))        # (windows hold up to 16 steps)
    extra = draw(st.integers(0, TICKS // grid - 1)) * grid
    t0 = draw(st.sampled_from([0.0, 0.0, 0.3]))
    dt = base_step(spec)
    return SimulationConfig(dt=dt, t0=t0, t_end=t0 + (steps * TICKS + extra) * H / TICKS,
                            solver=draw(st.sampled_from(["RK4", "Euler"])),
                            # (the interpreter in every unit: no generated code anywhere)
                            fast=draw(st.sampled_from([True, True, True, False])),
                            log=draw(st.sampled_from([None, None, ("u0.y0", "u1/o0.out")])),
                            cosim=CosimConfig(H=H, **opts))
