"""Analysis of a simulated model about an operating point: linearization, equilibria and
periodic steady states.

The three functions work on a :class:`~cosim.run.simulator.Simulator` through its continuous-state
interface (``derivatives``, ``get_state_vector`` / ``set_state_vector``, ``evaluate_outputs``,
``step``) and leave the run in a stated place:

- :func:`linearize` restores the operating point exactly: continuing the run afterwards is bit
  for bit the same as never having called it.
- :func:`steady_state` and :func:`periodic_steady_state` move the simulator to the state they
  find (at its current tick), so that continuing the run continues from there.

Throughout, the state vector is the simulator's *continuous* state. Discrete blocks (and atomic
subsystems, whose state is their own) hold their outputs and state, as in
``Simulator.derivatives``: their sensitivities are zero and they are not solved for.

A signal named ``"block.port"`` is an output port of a block of the compiled plan (paths
``"sub/inner.port"`` inside virtual subsystems).
"""

from __future__ import annotations

import math
from collections.abc import MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from cosim.run.checkpoint import restore_snapshot, snapshot
from cosim.errors import ConvergenceError, ModelError, SimulationError
from cosim.numerics.fixedpoint import Anderson
from cosim.compile.flatten import split_ref

__all__ = ["linearize", "periodic_steady_state", "steady_state"]

#: Default relative step of the central differences: ``eps**(1/3)`` balances the truncation
#: error ``O(h**2)`` against the rounding error ``O(eps/h)``.
_REL_STEP = np.finfo(np.float64).eps ** (1.0 / 3.0)

#: Relative tolerance when checking that a duration is a whole number of base steps (as the
#: compiler checks sample times).
_TICK_RTOL = 1e-9


# -- operating point ---------------------------------------------------------------------------


def _ready(sim, what: str) -> None:
    """Check ``sim`` is a monolithic simulator; initialize it if it has not been yet."""
    from cosim.run.simulator import Simulator

    if not isinstance(sim, Simulator):
        raise ModelError(f"{what} needs a cosim.Simulator, got {type(sim).__name__}; a "
                         "co-simulation has no single state vector: analyse the model with a "
                         "SimulationConfig without cosim=")
    if not sim.initialized:
        sim.initialize()


def _state_arg(sim, x, name: str) -> np.ndarray:
    """``x`` as a float64 state vector of the model's length, or a ModelError naming it."""
    try:
        v = np.array(x, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError) as err:
        raise ModelError(f"{name} must be an array of {sim.n_states} numbers: {err}") from None
    if v.size != sim.n_states:
        raise ModelError(f"{name} has {v.size} entries but model {sim.plan.name!r} has "
                         f"{sim.n_states} continuous states ({_slices_text(sim)})")
    if not np.all(np.isfinite(v)):
        raise ModelError(f"{name} must be finite, got {v.tolist()}")
    return v


def _slices_text(sim) -> str:
    parts = [f"{name}: [{sl.start}:{sl.stop}]" for name, sl in sim.state_slices().items()]
    return ", ".join(parts) or "none"


def _state_labels(sim) -> list[str]:
    """``"state j (plant[0])"`` for every component: which block owns it."""
    return [f"state {sl.start + i} ({name}[{i}])" for name, sl in sim.state_slices().items()
            for i in range(sl.stop - sl.start)]


class _OperatingPoint:
    """What evaluating the model at other points disturbs, captured so it can be put back.

    ``Simulator.derivatives`` overwrites the state vector and the stage-evaluated blocks'
    outputs and inputs (and counts loop iterations); the solver, the clock, the discrete
    state and the logs are untouched. Restoring the state vector through ``evaluate_outputs``
    (not ``set_state_vector``) keeps the solver's caches and step-size controller, and putting
    back every port dict's *contents* (the dicts themselves are referenced by the wires and
    logs) undoes the evaluation exactly, whatever the last solver stage had left in them.
    """

    def __init__(self, sim):
        self.t = sim.t
        self.x = sim.get_state_vector()
        self.ports = [(b.outputs, dict(b.outputs), b.inputs, dict(b.inputs))
                      for b in sim.plan.blocks]
        self.stats = dict(sim.stats)

    def restore(self, sim) -> None:
        sim.evaluate_outputs(self.t, self.x)
        for outs, outs0, ins, ins0 in self.ports:
            outs.clear()
            outs.update(outs0)
            ins.clear()
            ins.update(ins0)
        sim.stats.clear()
        sim.stats.update(self.stats)


def _move_to(sim, x: np.ndarray) -> None:
    """Put the simulator at continuous state ``x`` at its current tick, outputs consistent.

    The sample of the current tick in the logs is replaced by the outputs at ``x`` (as an event
    that resets the state at a tick is logged), so a continued run logs no stale sample.
    """
    sim.set_state_vector(x)
    sim.output_phase(log=True)


# -- signals and their injection ---------------------------------------------------------------


@dataclass(frozen=True)
class _Port:
    """A resolved ``"block.port"`` output of the plan."""

    ref: str
    index: int
    port: str


def _resolve(sim, refs, role: str) -> list[_Port]:
    """Resolve ``refs`` (list of ``"block.port"``), collecting every problem into one error."""
    if isinstance(refs, str):
        raise ModelError(f"linearize: {role} must be a list of 'block.port' strings, got the "
                         f"string {refs!r}; write [{refs!r}] for one signal")
    if not isinstance(refs, (list, tuple)):
        raise ModelError(f"linearize: {role} must be a list of 'block.port' strings, got "
                         f"{type(refs).__name__}")
    plan = sim.plan
    ports, problems, seen = [], [], set()
    for ref in refs:
        parts = split_ref(ref)
        if parts is None:
            problems.append(f"{ref!r} is not 'block.port'")
            continue
        bname, port = parts
        i = plan.index.get(bname)
        if i is None:
            problems.append(f"{ref!r}: no block {bname!r} in the plan (blocks: "
                            f"{', '.join(plan.names)})")
            continue
        names = plan.blocks[i].output_names
        if port not in names:
            problems.append(f"{ref!r}: block {bname!r} has no output {port!r} (outputs: "
                            f"{', '.join(names) or 'none'})")
            continue
        if ref in seen:
            problems.append(f"{ref!r} is listed twice")
            continue
        seen.add(ref)
        ports.append(_Port(ref, i, port))
    if problems:
        raise ModelError(f"linearize {role}: " + "; ".join(problems))
    return ports


def _read(sim, ports: list[_Port]) -> np.ndarray:
    blocks = sim.plan.blocks
    vals = [np.asarray(blocks[p.index].outputs[p.port], dtype=np.float64).ravel() for p in ports]
    return np.concatenate(vals) if vals else np.zeros(0)


class _InjectedOutputs(MutableMapping):
    """Stands in for a source block's ``outputs`` while values are injected into its ports.

    The block's own writes to an injected port are dropped; writes to its other ports and
    every read go to the real dict. The wires (and an algebraic loop's tear reads) hold the
    real dict, which holds the injected value, so every reader sees it.
    """

    def __init__(self, real: dict, injected: frozenset[str]):
        self._real = real
        self._injected = injected

    def __getitem__(self, port):
        return self._real[port]

    def __setitem__(self, port, value):
        if port not in self._injected:
            self._real[port] = value

    def __delitem__(self, port):
        del self._real[port]

    def __iter__(self):
        return iter(self._real)

    def __len__(self):
        return len(self._real)


@contextmanager
def _injection(sim, ports: list[_Port]):
    """Override the values of output ports as seen by their readers; yields ``set_u(u)``.

    How: a stage-evaluated source (evaluated at every solver stage, e.g. a Constant in a model
    with continuous state) recomputes its output inside ``sim.derivatives``, so its writes to
    the injected ports are redirected away (its ``outputs`` attribute is an
    :class:`_InjectedOutputs` meanwhile; the bound ``output_update`` the simulator holds looks
    the attribute up at every call). ``set_u`` writes the injected value into the real dict
    and into every reader's input (through the plan's wires), which is all a held (discrete)
    source needs. The blocks' ``outputs`` attributes are put back on exit; their contents are
    restored by :class:`_OperatingPoint`.
    """
    plan = sim.plan
    blocks = plan.blocks
    by_block: dict[int, set[str]] = {}
    for p in ports:
        by_block.setdefault(p.index, set()).add(p.port)
    real = {i: blocks[i].outputs for i in by_block}
    targets = []
    for p in ports:
        shape = np.shape(real[p.index][p.port])
        readers = [(blocks[w.dst].inputs, w.dst_port) for w in plan.wires
                   if w.src == p.index and w.src_port == p.port]
        targets.append((real[p.index], p.port, shape, int(np.prod(shape)), readers))

    def set_u(u: np.ndarray) -> None:
        k = 0
        for outs, port, shape, size, readers in targets:
            v = u[k:k + size].reshape(shape).copy()
            k += size
            outs[port] = v
            for ins, dport in readers:
                ins[dport] = v

    try:
        for i, names in by_block.items():
            blocks[i].outputs = _InjectedOutputs(real[i], frozenset(names))
        yield set_u
    finally:
        for i in by_block:
            blocks[i].outputs = real[i]


# -- linearize ---------------------------------------------------------------------------------


def linearize(sim, inputs, outputs, *, t=None, x=None, eps=None):
    """Linear model ``dx = A dx + B du``, ``dy = C dx + D du`` about an operating point.

    The Jacobians are central finite differences of ``Simulator.derivatives`` with the
    ``inputs`` ports overridden (as seen by their readers) and the ``outputs`` ports observed.
    The operating point is restored afterwards: state vector, port values, solver and
    statistics are as before, so continuing the run is bit for bit unchanged.

    Parameters
    ----------
    sim : Simulator
        Initialized (it is initialized if it was not).
    inputs : list of str
        Output ports ``"block.port"`` whose values are perturbed: the signals injected into the
        model (e.g. the ``out`` of a Constant standing for the input ``u``). Their nominal
        value is what the port takes at ``(t, x)``.
    outputs : list of str
        Output ports ``"block.port"`` observed (an input port may be listed too).
    t : float, optional
        Time (s) at which time-dependent blocks are evaluated; default ``sim.t``.
    x : array_like, shape (n,), optional
        State vector of the operating point; default the current one.
    eps : float, optional
        Relative step: component ``v`` is perturbed by ``±eps*max(1, |v|)``; default
        ``machine_eps**(1/3)`` (about 6e-6).

    Returns
    -------
    A : ndarray, shape (n, n)
        ``d(dx/dt)/dx``, ``n = sim.n_states``.
    B : ndarray, shape (n, m)
        ``d(dx/dt)/du``, ``m`` the total number of scalar components of ``inputs``
        (concatenated in order, each port flattened in C order).
    C : ndarray, shape (p, n)
        ``dy/dx``, ``p`` the total number of scalar components of ``outputs``.
    D : ndarray, shape (p, m)
        ``dy/du``.

    Raises
    ------
    ModelError
        For a malformed or unknown port (every problem listed), a bad ``x`` or ``eps``.
    SimulationError
        When the model is not finite at a perturbed point (names the component and the step).

    Notes
    -----
    Discrete blocks hold their outputs: a signal computed only by a discrete block has zero
    sensitivity to ``x`` and ``u``. Ports inside an algebraic loop are solved by the loop
    solver at every evaluation, so ``D`` includes the loop's feedthrough.
    """
    _ready(sim, "linearize")
    rel = _REL_STEP if eps is None else float(eps)
    if not (math.isfinite(rel) and rel > 0):
        raise ModelError(f"linearize: eps must be a finite number > 0, got {eps!r}")
    t = sim.t if t is None else float(t)
    ins = _resolve(sim, inputs, "inputs")
    outs = _resolve(sim, outputs, "outputs")
    point = _OperatingPoint(sim)
    x0 = point.x if x is None else _state_arg(sim, x, "linearize: x")
    n = x0.size
    try:
        sim.derivatives(t, x0)          # the nominal input values are the ports' at (t, x0)
        u0 = _read(sim, ins)
        in_labels = [f"{p.ref}[{k}]" for p in ins
                     for k in range(np.size(sim.plan.blocks[p.index].outputs[p.port]))]
        with _injection(sim, ins) as set_u:
            def model(xv, uv):
                set_u(uv)
                return np.concatenate([sim.derivatives(t, xv), _read(sim, outs)])

            jx = _central(lambda v: model(v, u0), x0, rel, t,
                          _state_labels(sim))
            ju = _central(lambda v: model(x0, v), u0, rel, t, in_labels)
    finally:
        point.restore(sim)
    return jx[:n], ju[:n], jx[n:], ju[n:]


def _central(fun, v0: np.ndarray, rel: float, t: float, labels: list[str]) -> np.ndarray:
    """Central-difference Jacobian of ``fun`` at ``v0``; shape ``(len(fun(v0)), v0.size)``."""
    cols = []
    for j in range(v0.size):
        h = rel * max(1.0, abs(v0[j]))
        vp, vm = v0.copy(), v0.copy()
        vp[j] += h
        vm[j] -= h
        hh = vp[j] - vm[j]           # the step actually represented in floating point
        col = (fun(vp) - fun(vm)) / hh
        if not np.all(np.isfinite(col)):
            raise SimulationError(f"linearize: the model is not finite at {labels[j]} = "
                                  f"{float(v0[j])!r} ± {h:.3g} (derivatives or outputs are "
                                  "inf/NaN there); linearize about a point inside the blocks' "
                                  "domains or pass a smaller eps", t=t)
        cols.append(col)
    if not cols:
        return np.zeros((fun(v0).size, 0))
    return np.column_stack(cols)


# -- steady state ------------------------------------------------------------------------------


def steady_state(sim, *, t=None, x0=None, tol=1e-10) -> np.ndarray:
    """The continuous state with zero derivatives, inputs held at time ``t``; move there.

    Solves ``sim.derivatives(t, x) = 0`` with :func:`scipy.optimize.root` (Powell's hybrid
    method, then Levenberg–Marquardt if that fails). Feedback loops are part of the
    right-hand side, so an equilibrium set by a loop (an integrator driven by ``r - k*y``) is
    found like any other.

    Parameters
    ----------
    sim : Simulator
        Initialized (it is initialized if it was not).
    t : float, optional
        Time (s) at which time-dependent sources are evaluated; default ``sim.t``.
    x0 : array_like, shape (n,), optional
        Initial guess; default the current state.
    tol : float
        Accept ``x`` when ``max|dx/dt| <= tol`` (state units per second).

    Returns
    -------
    ndarray, shape (n,)
        The equilibrium. The simulator is left at it, at its current tick: state vector set,
        outputs evaluated at it, the current tick's logged sample replaced by them.

    Raises
    ------
    ConvergenceError
        When neither method reaches ``tol``; the simulator is then left as it was.

    Notes
    -----
    Discrete blocks hold their outputs: the equilibrium is that of the continuous part with
    the discrete signals frozen at their current values.
    """
    from scipy.optimize import root

    _ready(sim, "steady_state")
    if not (math.isfinite(tol) and tol > 0):
        raise ModelError(f"steady_state: tol must be a finite number > 0, got {tol!r}")
    t = sim.t if t is None else float(t)
    point = _OperatingPoint(sim)
    guess = point.x if x0 is None else _state_arg(sim, x0, "steady_state: x0")
    best_x, best_res, nfev = guess, math.inf, 0
    try:
        def rhs(x):
            return sim.derivatives(t, x)

        for method, options in (("hybr", {"xtol": 1e-14}), ("lm", {"xtol": 1e-14,
                                                                   "ftol": 1e-14})):
            sol = root(rhs, best_x, method=method, options=options)
            nfev += int(getattr(sol, "nfev", 0))
            res = float(np.max(np.abs(rhs(sol.x)))) if sol.x.size else 0.0
            if res < best_res:
                best_x, best_res = np.array(sol.x, dtype=np.float64), res
            if best_res <= tol:
                break
    except BaseException:
        point.restore(sim)
        raise
    if not best_res <= tol:
        point.restore(sim)
        raise ConvergenceError(
            f"steady_state of model {sim.plan.name!r} (hybr, then lm; {nfev} evaluations)",
            nfev, best_res, t=t,
            remedy="start from an x0 nearer the equilibrium, check one exists (an integrator "
                   "with a nonzero constant input has none), or loosen tol")
    point.restore(sim)
    _move_to(sim, best_x)
    return best_x.copy()


# -- periodic steady state ---------------------------------------------------------------------


def _ticks(sim, duration, name: str, positive: bool) -> int:
    """``duration`` as a whole number of base steps, or a ModelError saying how to fix it."""
    dt = sim.config.dt
    try:
        d = float(duration)
    except (TypeError, ValueError):
        raise ModelError(f"periodic_steady_state: {name} must be a number of seconds, got "
                         f"{duration!r}") from None
    if not math.isfinite(d) or d < 0 or (positive and d == 0):
        raise ModelError(f"periodic_steady_state: {name} must be a finite number "
                         f"{'> 0' if positive else '>= 0'} (s), got {duration!r}")
    steps = d / dt
    k = int(round(steps))
    if abs(steps - k) > _TICK_RTOL * max(1.0, steps):
        raise ModelError(f"periodic_steady_state: {name} {d!r} s is not a whole number of "
                         f"base steps dt={dt!r} s ({steps:.6g} steps); use {name} = n*dt "
                         f"(e.g. {max(k, 1) * dt!r}) or a dt that divides it")
    return k


def periodic_steady_state(sim, period, *, transient=0.0, tol=1e-9, max_iterations=100,
                          m=5) -> np.ndarray:
    """Initial state of the periodic steady state of period ``period``, by shooting; move there.

    Runs ``transient`` seconds first (a real part of the run, logged), then solves
    ``Phi(x0) = x0`` where ``Phi(x0)`` is the continuous state after one period simulated from
    ``x0`` at the current tick, by Anderson-accelerated fixed-point iteration. Every shot starts
    from a snapshot of the simulator (tick, discrete state, held outputs, solver, event
    detector) with the state vector replaced by ``x0`` and is rolled back afterwards: the
    shots leave no trace in the logs, statistics or event log.

    Parameters
    ----------
    sim : Simulator
        Initialized (it is initialized if it was not).
    period : float
        Period (s): a whole number of base steps ``sim.config.dt``. For a driven system, the
        forcing's period (or a multiple of it).
    transient : float
        Seconds run before shooting (a whole number of base steps); a transient brings the
        first guess near the cycle.
    tol : float
        Accept ``x0`` when ``max|Phi(x0) - x0| <= tol * max(1, max|x0|)``.
    max_iterations : int
        Shots before giving up.
    m : int
        Anderson depth (0: plain iteration ``x0 <- Phi(x0)``).

    Returns
    -------
    ndarray, shape (n,)
        The state at the cycle start, ``sim.t`` after the transient. The simulator is left
        there (state set, outputs evaluated, the tick's logged sample replaced by them), so
        continuing the run follows the cycle.

    Raises
    ------
    ModelError
        For a period or transient that is not a whole number of base steps, or bad options.
    SimulationError
        When an event stops the run during a shot.
    ConvergenceError
        When ``max_iterations`` shots do not reach ``tol``; the simulator is left at the cycle
        start guess (after the transient).

    Notes
    -----
    The unknown is the continuous state only: every shot starts from the discrete state
    (blocks' ``state``, held outputs) of the cycle start. For a hybrid model the result is a
    periodic steady state when the discrete part is periodic with it too, which needs the
    period to be a multiple of every discrete sample period. An autonomous oscillator (a
    limit cycle of unknown period and phase) is out of scope: the period is given, the phase
    is fixed by the start time.
    """
    _ready(sim, "periodic_steady_state")
    n_period = _ticks(sim, period, "period", positive=True)
    _ticks(sim, transient, "transient", positive=False)
    if not (math.isfinite(tol) and tol > 0):
        raise ModelError(f"periodic_steady_state: tol must be a finite number > 0, got {tol!r}")
    if not (isinstance(max_iterations, int) and max_iterations >= 1):
        raise ModelError(f"periodic_steady_state: max_iterations must be an int >= 1, got "
                         f"{max_iterations!r}")
    if not (isinstance(m, int) and m >= 0):
        raise ModelError(f"periodic_steady_state: m must be an int >= 0, got {m!r}")
    if float(transient) > 0:
        sim.run(duration=float(transient))
    start = snapshot(sim)
    k0, t0 = sim.k, sim.t
    x = sim.get_state_vector()
    if x.size == 0:
        return x

    def shoot(x0: np.ndarray) -> np.ndarray:
        restore_snapshot(sim, start)
        _move_to(sim, x0)
        # Steps, not run(): run() would finalize every block and build the logs each shot.
        for _ in range(n_period):
            sim.step()
        if sim.k != k0 + n_period or sim.t != sim.config.t0 + sim.k * sim.config.dt:
            t_stop = sim.t
            restore_snapshot(sim, start)
            raise SimulationError(f"periodic_steady_state: an event stopped the run at "
                                  f"t={t_stop!r} during a shot from t={t0!r}; remove the stop "
                                  "event or shoot a period without it")
        return sim.get_state_vector()

    accel = Anderson(m)
    res = math.inf
    try:
        for it in range(1, max_iterations + 1):
            g = shoot(x)
            if not np.all(np.isfinite(g)):
                break
            res = float(np.max(np.abs(g - x)))
            if res <= tol * max(1.0, float(np.max(np.abs(x)))):
                # g = Phi(x) is the better estimate of a contraction's fixed point.
                restore_snapshot(sim, start)
                _move_to(sim, g)
                return g
            x = accel.update(x, g)
            if not np.all(np.isfinite(x)):
                break
    except BaseException:
        restore_snapshot(sim, start)
        raise
    restore_snapshot(sim, start)
    raise ConvergenceError(
        f"periodic_steady_state of model {sim.plan.name!r} (period {float(period)!r} s from "
        f"t={t0!r})", it, res, t=t0,
        remedy="raise transient so the shots start nearer the cycle, raise max_iterations, "
               "or check the system has a stable periodic solution of this period (an "
               "unstable or undamped mode has none that shooting can reach)")
