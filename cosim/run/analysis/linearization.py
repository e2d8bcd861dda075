"""Linearization of a simulated model about an operating point: ``(A, B, C, D)`` by central
finite differences, with chosen output ports overridden as inputs and others observed.

The operating point is restored exactly: continuing the run afterwards is bit for bit the same
as never having linearized. A signal named ``"block.port"`` is an output port of a block of the
compiled plan (paths ``"sub/inner.port"`` inside virtual subsystems).
"""

from __future__ import annotations

import math
from collections.abc import MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from cosim.compile.flatten import split_ref
from cosim.errors import ModelError, SimulationError
from cosim.numerics.jacobian import CENTRAL_REL_STEP, NonFiniteJacobian, fd_jacobian
from cosim.run.analysis.point import (OperatingPoint, require_simulator, state_labels,
                                      state_vector_arg)

__all__ = ["linearize"]


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
    restored by :class:`~cosim.run.analysis.point.OperatingPoint`.
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
    require_simulator(sim, "linearize")
    rel = CENTRAL_REL_STEP if eps is None else float(eps)
    if not (math.isfinite(rel) and rel > 0):
        raise ModelError(f"linearize: eps must be a finite number > 0, got {eps!r}")
    t = sim.t if t is None else float(t)
    ins = _resolve(sim, inputs, "inputs")
    outs = _resolve(sim, outputs, "outputs")
    point = OperatingPoint(sim)
    x0 = point.x if x is None else state_vector_arg(sim, x, "linearize: x")
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

            jx = _central(lambda v: model(v, u0), x0, rel, t, state_labels(sim))
            ju = _central(lambda v: model(x0, v), u0, rel, t, in_labels)
    finally:
        point.restore(sim)
    return jx[:n], ju[:n], jx[n:], ju[n:]


def _central(fun, v0: np.ndarray, rel: float, t: float, labels: list[str]) -> np.ndarray:
    """Central-difference Jacobian of ``fun`` at ``v0``, shape ``(len(fun(v0)), v0.size)``;
    a SimulationError naming the component (``labels[j]``) where the model is not finite."""
    try:
        return fd_jacobian(fun, v0, rel=rel, central=True, check_finite=True)
    except NonFiniteJacobian as err:
        j, h = err.column, err.step
        raise SimulationError(f"linearize: the model is not finite at {labels[j]} = "
                              f"{float(v0[j])!r} ± {h:.3g} (derivatives or outputs are "
                              "inf/NaN there); linearize about a point inside the blocks' "
                              "domains or pass a smaller eps", t=t) from None
