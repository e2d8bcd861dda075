"""Iterating algebraic couplings to a fixed point: the update rules (relaxation, Aitken,
Anderson, Newton with a finite-difference Jacobian), the two iteration loops the master runs
(co-initialization at t0, and a macro step with rollback), and the non-convergence error.

The loops see a coupling only as a function ``G(c)``: the coupling outputs the units produce
for candidate values ``c`` (a flat vector) of those outputs; the master runs the units.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from cosim.config import Acceleration, OnNonConvergence
from cosim.errors import ConvergenceError
from cosim.master import protocol as P
from cosim.master.records import StepRecord, StepStatus
from cosim.numerics.fixedpoint import (Aitken, Anderson, Relaxation, converged, magnitude,
                                      ran_away)
from cosim.numerics.jacobian import FORWARD_REL_STEP, forward_points

__all__ = ["Solve", "accelerator", "candidates", "coinitialize_units", "iterate", "iterate_step",
           "iteration", "links", "not_converged", "resolved"]


#: How a coupling solved again at a macro point (:func:`resolved`) is named when it does not
#: converge.
AGAIN = "refresh at the macro point: the"

#: Each acceleration's update rule, made from the configuration; None: Newton.
_RULES = {Acceleration.NONE: lambda cfg: Relaxation(cfg.relaxation),
          Acceleration.AITKEN: lambda cfg: Aitken(cfg.relaxation),
          Acceleration.ANDERSON: lambda cfg: Anderson(4),
          Acceleration.NEWTON: lambda cfg: None}


def accelerator(cfg):
    """A fresh update rule for ``cfg.acceleration``; None for Newton."""
    # (one rule made per coupling and macro step: not all four)
    return _RULES[cfg.acceleration](cfg)


def _newton(c: np.ndarray, G: np.ndarray):
    """One Newton step on ``F(c) = G(c) - c`` with a forward-difference Jacobian, as a
    generator: yields each Jacobian column's ``(candidate, True)``, is sent its ``G``;
    returns the new candidate. The columns are :func:`~cosim.numerics.jacobian.fd_jacobian`'s
    (``rel=FORWARD_REL_STEP``, divided by the nominal step), taken one at a time so that
    several couplings take theirs in the same rounds (:func:`iteration`)."""
    F = G - c
    J = np.empty((F.size, c.size))
    for j, (x, d, _) in enumerate(forward_points(c, rel=FORWARD_REL_STEP,
                                                 represented_step=False)):
        Gx = yield x, True
        J[:, j] = ((Gx - x) - F) / d
    return c - np.linalg.solve(J, F)


def _drive(gen, run: Callable):
    """Run generator ``gen`` (yielding ``(candidate, rollback)``) on ``run``; its result."""
    try:
        ask = next(gen)
        while True:
            ask = gen.send(run(*ask))
    except StopIteration as done:
        return done.value


@dataclass(frozen=True)
class Solve:
    """How one iteration of a coupling ended.

    Attributes
    ----------
    iterations : int
        Unit evaluations (a Newton step counts one per Jacobian column).
    residual : float
        Max norm of ``G(c) - c`` at the last candidate.
    size : float
        Max norm of the last candidate.
    converged : bool
        The residual met the tolerance relative to the candidate's size
        (:func:`~cosim.numerics.fixedpoint.converged`) before the candidate ran away.
    ran_away : bool
        The candidate (or its image) grew past
        :data:`~cosim.numerics.fixedpoint.RUNAWAY_GROWTH` times where it started: divergence,
        or no solution near the start.
    """

    iterations: int
    residual: float
    size: float
    converged: bool
    ran_away: bool = False


def iterate(c: np.ndarray, run: Callable, cfg) -> Solve:
    """Fixed-point (or Newton) iteration of a coupling, to ``cfg.tolerance`` relative to the
    candidate's size, stopped early when the candidate runs away.

    Parameters
    ----------
    c : ndarray, shape (n,)
        First candidate (the extrapolated coupling outputs).
    run : callable
        ``run(c, rollback) -> G(c)``, shape (n,): the units step with inputs ramping to
        ``c``; with ``rollback`` they are first restored to the start of the step (at t0,
        where no time passes, both are a refresh).
    cfg : CosimConfig

    Returns
    -------
    Solve
    """
    return _drive(iteration(c, cfg), run)


def iteration(c: np.ndarray, cfg):
    """:func:`iterate` as a generator: yields every evaluation it needs as ``(candidate,
    rollback)``, is sent ``G(candidate)``, and returns the :class:`Solve`. Independent
    couplings iterate in the same rounds this way (the macro-step engine), each one's
    values those of :func:`iterate`."""
    accel = accelerator(cfg)
    G = yield c, False
    scale = max(magnitude(c), magnitude(G))
    it = 1
    while True:
        res = magnitude(G - c)
        away = ran_away(c, scale) or ran_away(G, scale)
        if not away and converged(res, c, cfg.tolerance):
            return Solve(it, res, magnitude(c), True)
        if away or it >= cfg.max_iterations:
            return Solve(it, res, magnitude(c), False, away)
        if accel is None:
            try:
                c = yield from _newton(c, G)
            except np.linalg.LinAlgError:       # a singular coupling Jacobian
                return Solve(it, res, magnitude(c), False)
            it += c.size
        else:
            c = accel.update(c, G)
        G = yield c, True
        it += 1


def candidates(c: np.ndarray, shapes: list) -> dict:
    """Candidate vector ``c`` split into the coupling outputs: ``shapes`` lists ``(key,
    size, shape)`` in the order of ``c``; views of ``c``."""
    cand, i = {}, 0
    for k, n, s in shapes:
        cand[k] = c[i:i + n].reshape(s)
        i += n
    return cand


def iterate_step(g: list[str], keys: list, start: dict, T: float, H: float,
                 inputs: Callable, call: Callable, outputs: dict, stats: dict,
                 cfg, at_end: Callable = lambda v, cand: None) -> tuple[int, float]:
    """Iterate coupling ``g`` over the macro step ``[T, T+H]``, rolling its units back to
    the start of the step (GetState / SetState) between iterations.

    Parameters
    ----------
    g : list of str
        The coupled units.
    keys : list of (str, str)
        The coupling outputs (``UnitGraph.coupling_keys(g)``).
    start : dict of (str, str) to ndarray
        First candidates at T+H (the extrapolated coupling outputs).
    inputs : callable
        ``inputs(unit, candidates) -> SetInputs`` over the step, ramping to the candidates.
    call : callable
        ``call(batch, t) -> replies``, the master's :meth:`UnitCalls.call`.
    outputs : dict
        Every output computed for T+H so far; the coupled units' outputs are stored here.
    stats : dict
        ``stats["iterations"]`` counts unit evaluations.
    cfg : CosimConfig
    at_end : callable, optional
        ``at_end(unit, candidates) -> SetInputs or None``: inputs that take their value at
        T+H only at T+H (held outputs, constant over the step: ``PortHistory.held_at_end``);
        the unit then refreshes its outputs at T+H for them, so that ``G(c)`` is the
        coupling solved at the sample hit, as in the monolithic run.

    Returns
    -------
    Solve
    """
    reps = call({v: [P.GetState()] for v in g}, T)
    snaps = {v: reps[v][0] for v in g}
    shapes = [(k, start[k].size, start[k].shape) for k in keys]

    def run(c, rollback):
        cand = candidates(c, shapes)
        batch = {}
        for v in g:
            end = at_end(v, cand)
            batch[v] = (([P.SetState(snaps[v])] if rollback else []) +
                        [inputs(v, cand), P.DoStep(T, H)] +
                        ([] if end is None else [end, P.RefreshOutputs()]) + [P.GetOutputs()])
        reps = call(batch, T)
        for v, rs in reps.items():
            for p, y in rs[-1].values.items():
                outputs[(v, p)] = y
        stats["iterations"] += 1
        return np.concatenate([outputs[k].ravel() for k in keys])

    return iterate(np.concatenate([start[k].ravel() for k in keys]), run, cfg)


def coinitialize_units(graph, values: dict, refresh: Callable, cfg, t0: float) -> list:
    """Make every unit's outputs at t0 consistent with the inputs they imply: units in the
    order of the unit graph, algebraic couplings iterated with the configured acceleration.

    Parameters
    ----------
    graph : UnitGraph
    values : dict of (str, str) to ndarray
        Every output's value; updated in place.
    refresh : callable
        ``refresh(units)``: those units refresh their outputs for inputs from ``values``
        and store them in ``values``.
    cfg : CosimConfig
    t0 : float

    Returns
    -------
    list of StepRecord
        One ``CONTINUED`` record per coupling that did not converge (on request).
    """
    records = []
    done = set()
    for u in graph.order:
        if u in done:
            continue
        g = graph.group_of.get(u, [u])
        done.update(g)
        if u not in graph.group_of:
            refresh(g)
            continue
        keys = graph.coupling_keys(g)

        def evaluate(c):
            i = 0
            for k in keys:
                n = values[k].size
                values[k] = c[i:i + n].reshape(values[k].shape)
                i += n
            refresh(g)
            return np.concatenate([values[k].ravel() for k in keys])

        # No time passes at t0: a rollback is nothing, every acceleration (Newton too)
        # iterates the refresh.
        c = np.concatenate([values[k].ravel() for k in keys])
        solve = iterate(c, lambda v, rollback: evaluate(v), cfg)
        if not solve.converged:
            not_converged(cfg, "co-initialization of", graph, g, solve, t0)
            records.append(StepRecord(t0, 0.0, solve.iterations, solve.residual,
                                      StepStatus.CONTINUED))
    if graph.relog_t0:
        refresh(graph.relog_t0)     # their logs: inputs refreshed after them (UnitGraph)
    return records


def resolved(cfg, graph, g, solve: Solve, t: float, record: StepRecord) -> StepRecord:
    """``record`` of a macro step ending at ``t`` once coupling ``g`` was solved again
    there (``solve``): its iterations and residual the larger of the step's and these; a
    coupling that did not converge raises (:func:`not_converged`) or marks it
    ``CONTINUED``."""
    status = record.status
    if not solve.converged:
        not_converged(cfg, AGAIN, graph, list(g), solve, t)
        status = StepStatus.CONTINUED
    return StepRecord(record.t, record.H, max(record.iterations, solve.iterations),
                      max(record.residual, solve.residual), status, record.coupling_error,
                      record.message)


def links(graph, g: list[str]) -> list[str]:
    """The links inside coupling ``g``, as ``"unit.output -> unit.input"``."""
    return sorted(f"{key[0]}.{key[1]} -> {v}.{name}" for v in g
                  for name, key in graph.inputs[v] if key[0] in g)


def not_converged(cfg, what: str, graph, g: list[str], solve: Solve, t: float) -> None:
    """A coupling did not converge: raise ConvergenceError naming it, its links, the
    residual and the candidate's size, unless ``on_nonconvergence="continue"`` (then
    return; the caller records it)."""
    if cfg.on_nonconvergence is OnNonConvergence.RAISE:
        head = (f"{what} algebraic coupling {' <-> '.join(g)} (links "
                f"{', '.join(links(graph, g))})")
        if solve.ran_away:
            head += (" ran away from where it started (divergence, or no solution of the "
                     "coupling there) and")
        raise ConvergenceError(
            head, solve.iterations, solve.residual, t=t, size=solve.size,
            remedy="reduce H, use acceleration='newton', raise max_iterations, or set "
                   "on_nonconvergence='continue' to accept (recorded in step_log)"
            + ("; check that the coupling has a solution (a loop gain of 1 has none)"
               if solve.ran_away else ""))
