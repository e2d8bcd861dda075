"""The scalar fast-path strategy: one statement per block, every value a local float.

Every block is its own group. The step function loads the flat signals ``S``, discrete states
``D`` and continuous state ``C`` into local variables (``s3``, ``x1``, ``c0``) once per call,
runs many ticks on them and stores them back: per block and tick this costs a few bytecodes
instead of a method call and numpy dispatch (~0.03 µs vs ~1 µs). A block's state updates are
one tuple assignment (all right-hand sides evaluated first); each Runge–Kutta stage has one
variable per component and stage (``z0``, ``k1_0``).
"""

from __future__ import annotations

from cosim.fastpath.emitter import Strategy

__all__ = ["Scalar"]

#: Continuous states up to this many are stored back item by item (see ``Scalar``).
_ITEMWISE = 8

#: Local-variable prefix of each array the emitter names.
_PREFIX = {"S": "s", "D": "x", "C": "c", "Z": "z"}


class Scalar(Strategy):
    """Local floats, one per value (see :class:`~cosim.fastpath.emitter.Strategy`).

    Parameters
    ----------
    plan : Plan
    layout : Layout
        Flat slots of the plan's values.
    n_c : int
        Number of continuous-state components.
    """

    def __init__(self, plan, layout, n_c: int):
        super().__init__([[i] for i in range(len(plan.blocks))], f"<cosim plan {plan.name}>")
        self.n_c = n_c
        loaded = [(v, src) for v, src in (
            ([f"s{j}" for j in range(len(layout.signal_slots))], "S"),
            ([f"x{j}" for j in range(len(layout.state_slots))], "D"),
            # The continuous state is the run state's numpy vector: unpacked to Python floats.
            ([f"c{j}" for j in range(n_c)], "C.tolist()")) if v]
        self.prologue = [f"    {', '.join(v)}, = {src}" for v, src in loaded]
        self.epilogue = [f"        {src[:1]}[:] = [{', '.join(v)}]" for v, src in loaded
                         if src != "C.tolist()" or n_c > _ITEMWISE]
        if 0 < n_c <= _ITEMWISE:
            # A few numpy items are stored 3-4x faster one by one than as a slice from a list
            # (a unit's macro step of one tick pays this store every call).
            self.epilogue.append("        " + "; ".join(f"C[{j}] = c{j}" for j in range(n_c)))

    def ref(self, array: str, slots: list[int]) -> str:
        (j,) = slots
        if array in _PREFIX:
            return f"{_PREFIX[array]}{j}"
        return f"k{array[1:]}_{j}"          # K<i>: stage i's derivative of component j

    def assign(self, targets: list[str], exprs: list[str]) -> list[str]:
        return [f"{', '.join(targets)} = {', '.join(exprs)}"]

    def row(self, task: int, slots: list[int]) -> str:
        return f"rows[{task}].append(({', '.join(f's{j}' for j in slots)},))"

    def stage_sum(self, target: str, terms) -> list[str]:
        var = _PREFIX[target]
        if not terms:
            return [f"{var}{g} = c{g}" for g in range(self.n_c)]
        return [f"{var}{g} = c{g} + h * ({' + '.join(f'{a!r} * k{j}_{g}' for a, j in terms)})"
                for g in range(self.n_c)]
