"""The operating point of an analysis: checking the simulator and its state-vector arguments,
capturing what evaluating the model elsewhere disturbs, and moving the run to a new state.

Shared by :mod:`~cosim.run.analysis.linearization` (which puts the point back exactly) and
:mod:`~cosim.run.analysis.steady` (which moves the run to the point it finds).
"""

from __future__ import annotations

import numpy as np

from cosim.errors import ModelError

__all__ = ["OperatingPoint", "move_to", "require_simulator", "state_labels", "state_vector_arg"]


def require_simulator(sim, what: str) -> None:
    """Check ``sim`` is a monolithic simulator; initialize it if it has not been yet."""
    from cosim.run.simulator import Simulator

    if not isinstance(sim, Simulator):
        raise ModelError(f"{what} needs a cosim.Simulator, got {type(sim).__name__}; a "
                         "co-simulation has no single state vector: analyse the model with a "
                         "SimulationConfig without cosim=")
    if not sim.initialized:
        sim.initialize()


def state_vector_arg(sim, x, name: str) -> np.ndarray:
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


def state_labels(sim) -> list[str]:
    """``"state j (plant[0])"`` for every component: which block owns it."""
    return [f"state {sl.start + i} ({name}[{i}])" for name, sl in sim.state_slices().items()
            for i in range(sl.stop - sl.start)]


class OperatingPoint:
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


def move_to(sim, x: np.ndarray) -> None:
    """Put the simulator at continuous state ``x`` at its current tick, outputs consistent.

    The sample of the current tick in the logs is replaced by the outputs at ``x`` (as an event
    that resets the state at a tick is logged), so a continued run logs no stale sample.
    """
    sim.set_state_vector(x)
    sim.output_phase(log=True)
