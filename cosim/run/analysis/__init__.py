"""Analysis of a simulated model about an operating point: linearization, equilibria and
periodic steady states.

The functions work on a :class:`~cosim.run.simulator.Simulator` through its continuous-state
interface (``derivatives``, ``get_state_vector`` / ``set_state_vector``, ``evaluate_outputs``,
``step``) and leave the run in a stated place:

- :func:`linearize` restores the operating point exactly: continuing the run afterwards is bit
  for bit the same as never having called it.
- :func:`steady_state` and :func:`periodic_steady_state` move the simulator to the state they
  find (at its current tick), so that continuing the run continues from there.

Throughout, the state vector is the simulator's *continuous* state. Discrete blocks (and atomic
subsystems, whose state is their own) hold their outputs and state, as in
``Simulator.derivatives``: their sensitivities are zero and they are not solved for.

Modules: :mod:`.point` (the operating point, shared), :mod:`.linearization`, :mod:`.steady`.
"""

from cosim.run.analysis.linearization import linearize
from cosim.run.analysis.steady import periodic_steady_state, steady_state

__all__ = ["linearize", "periodic_steady_state", "steady_state"]
