"""ODE solvers for the continuous states of a block diagram, one step at a time.

The hybrid simulator drives a `Solver` step by step, never letting a step cross a sample hit
or an event, and resets it after every discontinuity::

    from cosim.solvers import get_solver, SolverOptions
    solver = get_solver("RK45")(fun, n, SolverOptions(rtol=1e-6, atol=1e-9))
    solver.reset(t, x)
    r = solver.step(t, x, h_max)      # r.h <= h_max, r.x, r.error, r.dense(tq)

`SOLVERS` maps registry names to classes; `get_solver` also accepts a `Solver` subclass of
your own (see the `Solver` docstring for how to write one).

=================  =====  ========  ========  ==============================================
name               order  adaptive  implicit  method
=================  =====  ========  ========  ==============================================
Euler              1      no        no        forward Euler
SSPRK22            2      no        no        Heun / SSP RK(2,2), the project default
SSPRK33            3      no        no        Shu-Osher SSP RK(3,3)
RK4                4      no        no        classical Runge-Kutta
RK23               3      yes       no        Bogacki-Shampine 3(2), FSAL
RK45               5      yes       no        Dormand-Prince 5(4), FSAL, quartic dense output
BackwardEuler      1      no        yes       implicit Euler, Newton
ESDIRK32           3      yes       yes       Kennedy-Carpenter ESDIRK3(2)4L[2]SA, L-stable
ESDIRK32Fixed      3      no        yes       the same tableau with fixed steps
BDF                <=5    yes       yes       scipy BDF through `ScipyAdapter`
Radau              5      yes       yes       scipy Radau IIA through `ScipyAdapter`
LSODA              <=12   yes       yes       scipy LSODA through `ScipyAdapter`
=================  =====  ========  ========  ==============================================
"""

from __future__ import annotations

from cosim.solvers.adaptive import RK23, RK45, EmbeddedRK
from cosim.solvers.base import Solver, StepResult
from cosim.solvers.explicit import RK4, SSPRK22, SSPRK33, Euler, ExplicitRK
from cosim.solvers.implicit import DIRK, ESDIRK32, BackwardEuler, ESDIRK32Fixed
from cosim.solvers.options import SolverOptions
from cosim.solvers.scipy_adapter import BDF, LSODA, Radau, ScipyAdapter

#: Registry name -> solver class.
SOLVERS: dict[str, type[Solver]] = {cls.name: cls for cls in (
    Euler, SSPRK22, SSPRK33, RK4, RK23, RK45,
    BackwardEuler, ESDIRK32, ESDIRK32Fixed,
    BDF, Radau, LSODA,
)}

#: The solver used when a model does not name one.
DEFAULT_SOLVER = "SSPRK22"


def get_solver(method: str | type[Solver]) -> type[Solver]:
    """The solver class for a registry name, or the class itself.

    Parameters
    ----------
    method : str or type
        A key of `SOLVERS` (case-sensitive) or a `Solver` subclass.

    Returns
    -------
    type
        A `Solver` subclass.

    Raises
    ------
    ValueError
        Unknown name, or a class that is not a `Solver`; the message lists the valid names.
    """
    if isinstance(method, type):
        if issubclass(method, Solver) and "name" in vars(method):
            return method
        raise ValueError(f"solver class {method.__qualname__} is not a concrete "
                         f"cosim.solvers.Solver subclass (with a name); or use one of: "
                         f"{', '.join(SOLVERS)}")
    try:
        return SOLVERS[method]
    except (KeyError, TypeError):
        raise ValueError(f"unknown solver {method!r}; valid names: {', '.join(SOLVERS)}, "
                         f"or pass a Solver subclass") from None


__all__ = [
    "BDF", "DEFAULT_SOLVER", "DIRK", "ESDIRK32", "ESDIRK32Fixed", "LSODA", "RK23", "RK4",
    "RK45", "SOLVERS", "SSPRK22", "SSPRK33", "BackwardEuler", "EmbeddedRK", "Euler",
    "ExplicitRK", "Radau", "ScipyAdapter", "Solver", "SolverOptions", "StepResult",
    "get_solver",
]
