"""The macro-step program: what one macro step of a co-simulation does, compiled once from the
unit graph, for every model shape.

A macro step ``[T, T+H]`` is a set of *actions*: every unit steps (its inputs from the macro
point ``T``, Gauss–Seidel: interpolated to outputs already computed for ``T+H``), algebraic
couplings iterate to a fixed point, and feedthrough units are *refreshed* at ``T+H`` (their
outputs recomputed for their inputs at ``T+H``, level by level). Which value each action reads
is fixed by the scheme, not by when the action runs (see :class:`Send`), so the actions can be
scheduled for the fewest round trips and still give the protocol path's numbers bit for bit:

- units in this process cost no round trip: they run as soon as what they read is known;
- every other unit gets one message per *round*, holding all of its actions whose inputs are
  known when the round is sent (a step and its refresh at ``T+H`` in one message when the
  values the refresh reads are already in);
- an iterated coupling is a stage of its own, one round per iteration, the units rolled back on
  their own side between iterations (``Step`` modes ``STEP_KEEP`` / ``STEP_ROLLBACK``);
  couplings that can start at the same point (none reads another's outputs) iterate in the
  same rounds, each to its own fixed point (a round per iteration of the slowest);
- a coupling that reads outputs from outside it is solved again at ``T+H`` (its outside
  inputs' values there) as a stage of its own: refreshes iterated, a round per iteration.

The program is the list of :class:`Stage` objects the engine (:mod:`cosim.master.engine`) runs
in order; :meth:`Program.table` prints it and :attr:`Program.round_trips` counts its round
trips per macro step (``cosim plan``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cosim.config import Scheme

__all__ = ["Program", "Send", "Stage", "compile_program"]


@dataclass(frozen=True)
class Send:
    """One unit's actions in one message of a stage.

    Attributes
    ----------
    unit : str
    step : bool
        The unit steps over ``[T, T+H]`` in this message.
    reset : bool
        The unit is refreshed at ``T+H`` in this message (after its step when ``step``).
    fresh : tuple of (str, str)
        The outputs (``(unit, output)``) computed for ``T+H`` that the step's inputs are
        interpolated to (Gauss–Seidel: those of units before it in the order); the others are
        extrapolated from past macro points.
    sources : tuple of (str, (str, str), bool)
        Per input of the refresh: its name, the output driving it, and whether the value read
        is that output *after* its own refresh at ``T+H`` (True) or as its unit's step
        computed it (False) — what the protocol path's level-by-level refresh reads.
    k : int
        The macro step of a window this belongs to (0: the first; see
        :func:`compile_program`'s ``steps``).
    """

    unit: str
    step: bool
    reset: bool
    fresh: tuple = ()
    sources: tuple = ()
    k: int = 0


@dataclass(frozen=True)
class Stage:
    """What runs at one point of the macro step: a round of messages (``sends``), or an
    algebraic coupling iterated to a fixed point (``coupling``, its steps reading the
    outputs ``fresh`` computed for T+H), or a coupling solved again at T+H by refreshes
    iterated to a fixed point (``coupling`` with ``resolve``: per unit, ``(unit, sources)``
    as :attr:`Send.sources`, an input inside the coupling reading its candidate: None),
    each over units all in this process (``local``: no round trip) or not. A coupling
    ``joined`` to the round before it sends its first iteration with that round (both only
    read what was known before it); one ``along`` the
    coupling stage before it iterates in the same rounds (neither reads the other's
    outputs). ``k``: a coupling's macro step in a window; ``finals``: the ``(k, unit)``
    whose outputs at the end of macro step ``k`` are final once this stage ran (their
    unit's last action there)."""

    sends: tuple = ()
    coupling: tuple = ()
    fresh: tuple = ()
    resolve: tuple = ()
    local: bool = False
    joined: bool = False
    along: bool = False
    k: int = 0
    finals: tuple = ()


@dataclass
class Program:
    """The stages of ``steps`` macro steps (a window), in order (see the module notes)."""

    stages: list = field(default_factory=list)
    steps: int = 1

    @property
    def round_trips(self) -> int:
        """Round trips per window when every coupling converges at its first iteration
        (each further iteration of a coupling of units in other processes adds one)."""
        return sum(1 for s in self.stages if not s.local and not s.joined and not s.along)

    def table(self) -> str:
        """One line per stage: what it sends to whom."""
        what = "macro step" if self.steps == 1 else f"window of {self.steps} macro steps"
        lines = [f"{what}: {len(self.stages)} stage(s), {self.round_trips} round trip(s)"
                 " (+1 per further coupling iteration)"]
        for i, s in enumerate(self.stages):
            where = "in process" if s.local else "round trip"
            if s.resolve:
                what = "solve " + " <-> ".join(s.coupling) + " again at T+H (refreshes)"
            elif s.coupling:
                what = "iterate " + " <-> ".join(s.coupling)
                if s.joined:
                    what += " (first iteration with the round before)"
                if s.along:
                    what += " (in the same rounds as the coupling before)"
            else:
                what = ", ".join(f"{x.unit}:" + "+".join(
                    (["step"] if x.step else []) + (["refresh"] if x.reset else []))
                    + (f"@{x.k}" if self.steps > 1 else "") for x in s.sends)
            lines.append(f"  {i + 1}. [{where}] {what}")
        return "\n".join(lines)


def compile_program(graph, scheme: Scheme, order: list, delayed: bool, local: set,
                    fusable: set, levels: list | None = None, steps: int = 1) -> Program:
    """The program of a macro step, or of a window of ``steps`` macro steps.

    In a window every action of macro step ``k`` also waits for what it reads at the macro
    point it starts from (the last action of ``k - 1`` of each unit it reads, and of its own
    unit) and for every step of ``k - 1`` (so that a unit stopping the run at an event is
    known before any unit goes further). So an action of the next macro step that reads
    nothing still pending travels with a round of this one (a unit without inputs, the head
    of a Gauss–Seidel chain, with the refreshes of the last), and the values read stay those
    of the macro steps taken one after the other.

    Parameters
    ----------
    graph : UnitGraph
    scheme : Scheme
        Jacobi: every step reads the macro point ``T``; Gauss–Seidel: each unit (coupling)
        reads the outputs at ``T+H`` of the units before it in ``order``.
    order : list of str
        The Gauss–Seidel order (every unit once).
    delayed : bool
        Delayed feedthrough: nothing is algebraic and nothing is refreshed at ``T+H``.
    local : set of str
        Units in this process (their actions cost no round trip).
    fusable : set of str
        Units that take a step and a refresh in one message (``FUSED_STEP``).
    levels : list of list of (str or tuple of str), optional
        The refresh levels, in order (default: the graph's; the master's add a last level
        refreshing some units once more for their logs, :attr:`UnitGraph.relog`): a unit's
        name (its refresh) or a coupling's units (solved again, :attr:`UnitGraph.
        refresh_levels`). A unit may be refreshed at several levels.
    steps : int, optional
        Macro steps in the window (default 1).

    Returns
    -------
    Program
    """
    couplings = [] if delayed else graph.groups
    coupling_of = {u: tuple(g) for g in couplings for u in g}
    if delayed:
        levels = []
    elif levels is None:
        levels = graph.refresh_levels
    at = {}                             # unit -> the levels it is refreshed at, in order
    action = {}                         # (unit, level) -> its refresh there, or coupling's
    for i, lv in enumerate(levels):
        for x in lv:
            for u in ((x,) if type(x) is str else x):
                at.setdefault(u, []).append(i)
                action[(u, i)] = ("refresh", u, i) if type(x) is str else ("resolve", x, i)
    rank = {u: i for i, u in enumerate(order)}
    # (a coupling steps, iterated, at its first unit's place in the order: all its units'
    # outputs at T+H are known to the units after that place)
    place = {u: min(rank[v] for v in coupling_of.get(u, (u,))) for u in order}
    gs = scheme is Scheme.GAUSS_SEIDEL

    def node(u):                        # the action that computes u's outputs at T+H
        g = coupling_of.get(u)
        return ("iterate", g) if g is not None else ("step", u)

    def latest(d, i):                   # d's last refresh before level i, or None
        before = [j for j in at.get(d, ()) if j < i]
        return action[(d, before[-1])] if before else None

    # What each action reads (the protocol path's values, fixed here once).
    needs: dict = {}
    fresh_of: dict = {}
    for u in order:
        n = node(u)
        if n in needs:
            continue
        members = n[1] if n[0] == "iterate" else (u,)
        first = min(rank[v] for v in members)
        fresh = set()
        if gs:
            for v in members:
                fresh |= {key for _, key in graph.inputs[v]
                          if key[0] not in members and place[key[0]] < first}
        fresh_of[n] = tuple(sorted(fresh))
        needs[n] = {node(key[0]) for key in fresh}
    sources = {}
    reads = {}                          # refresh -> the actions whose outputs are its inputs
    for u, indices in at.items():
        for i in indices:
            a = action[(u, i)]
            if a[0] == "resolve":
                # a coupling solved again: its outputs inside it are candidates (None)
                g = a[1]
                src = tuple((name, key, None if key[0] in g else latest(key[0], i) is not None)
                            for name, key in graph.inputs[u])
                sources[a] = sources.get(a, ()) + ((u, src),)
                reads[a] = reads.get(a, set()) | {latest(key[0], i) or node(key[0])
                                                  for _, key in graph.inputs[u]
                                                  if key[0] not in g}
                needs[a] = reads[a] | {node(u)}
                continue
            src = tuple((name, key, latest(key[0], i) is not None)
                        for name, key in graph.inputs[u])
            sources[a] = src
            reads[a] = {latest(key[0], i) or node(key[0]) for _, key in graph.inputs[u]}
            needs[a] = reads[a] | {latest(u, i) or node(u)}
    # A unit refreshed at several levels holds one refreshed value at a time: a refresh that
    # replaces the one an action reads goes no earlier than that action (in the same round
    # only when both are refreshes of that round, which read what was known before it).
    anti: dict = {}                     # refresh -> the actions reading the one it replaces
    for a, src in sources.items():
        i = a[2]
        rows = src if a[0] == "refresh" else [x for _, unit_src in src for x in unit_src]
        for _, key, post in rows:
            if post:
                j = latest(key[0], i)[2]
                nxt = [x for x in at[key[0]] if x > j]
                if nxt and action[(key[0], nxt[0])] != a:
                    anti.setdefault(action[(key[0], nxt[0])], set()).add(a)
    # The action after which a unit's outputs at T+H are final (its last refresh, or the
    # action that computes them), and the window's actions: (k, action).
    last = {u: action[(u, at[u][-1])] if u in at else node(u) for u in order}
    # Every step of k - 1 is done before anything of k runs: a unit that stops the run at an
    # event in k - 1 is known before any unit goes further (the run ends there).
    stepping = [n for n in needs if n[0] in ("step", "iterate")]
    tagged = {}
    for k in range(steps):
        for n, ns in needs.items():
            deps = {(k, d) for d in ns}
            if k:
                deps.update((k - 1, d) for d in stepping)
                if n[0] in ("step", "iterate"):
                    for v in (n[1] if n[0] == "iterate" else (n[1],)):
                        deps.add((k - 1, last[v]))
                        deps.update((k - 1, last[key[0]]) for _, key in graph.inputs[v])
            tagged[(k, n)] = deps
    finals = {(k, n): tuple((k, u) for u in _units(n) if last[u] == n) for k, n in tagged}
    # List scheduling: actions of units in this process run as soon as what they read is
    # known; every other ready action goes into the next round, a unit's step and refresh in
    # one message when both are ready (one message per unit and round: of one macro step).
    done: set = set()
    pending = sorted(tagged, key=lambda a: (a[0], _position(a[1], rank)))
    stages = []
    while pending:
        progress = True
        while progress:                 # in-process actions: free, repeat until none is ready
            progress = False
            ready = _unblocked([a for a in pending if tagged[a] <= done
                                and _units(a[1]) <= local], anti, done)
            if ready:
                stages += _stages(ready, True, fresh_of, sources, finals)
                done.update(ready)
                pending = [a for a in pending if a not in done]
                progress = True
        ready = [a for a in pending if tagged[a] <= done]
        if not ready:
            if pending:
                raise RuntimeError(f"macro-step program: no action can run among {pending}")
            break
        # A remote unit's refresh joins its step when all it reads is known already (not
        # when it reads, through an input of the unit's own, what that step computes).
        batch = set(ready)
        for k, n in ready:
            r = (k, action[(n[1], at[n[1]][0])]) if n[0] == "step" and n[1] in at else None
            if (r is not None and r in pending and n[1] in fusable
                    and tagged[r] - {(k, n)} <= done and n not in reads[r[1]]):
                batch.add(r)
        ready = sorted(_unblocked(batch, anti, done), key=lambda a: (a[0], _position(a[1], rank)))
        if not ready:
            raise RuntimeError(f"macro-step program: no action can run among {pending}")
        stages += _stages(ready, False, fresh_of, sources, finals)
        done.update(ready)
        pending = [a for a in pending if a not in done]
    return Program(stages, steps)


def _unblocked(ready, anti: dict, done: set) -> list:
    """The actions of ``ready`` (``(k, action)``) that may run now: not a refresh replacing
    a value an action still to run reads, unless that action is a refresh of the same round
    (:func:`compile_program`'s ``anti``)."""
    ok = set(ready)
    changed = True
    while changed:
        changed = False
        for w in list(ok):
            for r in anti.get(w[1], ()):
                kr = (w[0], r)
                if kr not in done and not (kr in ok and r[0] == "refresh"):
                    ok.discard(w)
                    changed = True
                    break
    return [a for a in ready if a in ok]


def _position(n, rank) -> tuple:
    units = (n[1],) if n[0] in ("step", "refresh") else n[1]
    again = n[0] in ("refresh", "resolve")
    return (min(rank[u] for u in units), again, n[2] if again else 0)


def _units(n) -> set:
    return {n[1]} if n[0] in ("step", "refresh") else set(n[1])


def _stages(ready, local, fresh_of, sources, finals) -> list:
    """The stages that run the ``ready`` actions (``(k, action)``): one round for the steps
    and refreshes (a unit's two actions of one macro step in one message), then one stage
    per coupling (those after the first iterating along with it)."""
    sends = {}
    for k, n in ready:
        if n[0] in ("iterate", "resolve"):
            continue
        u = n[1]
        _, step, reset = sends.get(u, (k, False, None))
        if n[0] == "step":
            step = True
        else:
            reset = n                   # (one refresh of a unit per stage)
        sends[u] = (k, step, reset)
    out = []
    if sends:
        out.append(Stage(sends=tuple(
            Send(u, step, reset is not None, fresh_of.get(("step", u), ()) if step else (),
                 sources[reset] if reset is not None else (), k)
            for u, (k, step, reset) in sends.items()), local=local,
            finals=tuple(f for a in ready if a[1][0] in ("step", "refresh")
                         for f in finals[a])))
    couplings = [a for a in ready if a[1][0] == "iterate"]
    out += [Stage(coupling=n[1], fresh=fresh_of[n], local=local,
                  joined=bool(sends) and i == 0 and not local, along=i > 0,
                  k=k, finals=finals[(k, n)])
            for i, (k, n) in enumerate(couplings)]
    out += [Stage(coupling=n[1], resolve=sources[n], local=local, k=k, finals=finals[(k, n)])
            for k, n in ready if n[0] == "resolve"]
    return out
