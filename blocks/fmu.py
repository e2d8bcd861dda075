"""FMU blocks: a co-simulation FMU as a block of a diagram (and as a unit when co-simulated).

In a monolithic run the FMU is a discrete block stepped at its sample hits (outputs that
depend directly on inputs are refreshed for the current inputs, as FMI 2.0 allows). In a
co-simulation a top-level FMU block becomes its own unit (:class:`cluster.fmu_unit.FmuUnit`).
fmpy is imported when the block is built, never by ``import blocks``.
"""

from __future__ import annotations

from cosim.block import NAME_RE, Block
from cosim.errors import ModelError

__all__ = ["FmuBlock"]


class FmuBlock(Block):
    """An FMI 2.0 co-simulation FMU.

    Parameters
    ----------
    name : str
    path : str
        The ``.fmu`` file.
    sample_time : float
        Communication step (s) of the FMU in the diagram.
    start_values : dict of str to float, optional
        Parameters and start values set before initialization.

    Ports
    -----
    One input / output per real input / output variable of the FMU, shape ``(1,)``.

    Notes
    -----
    Feedthrough from the model description. The FMU's state lives inside the FMU, so a
    monolithic checkpoint cannot capture it; co-simulated, the unit rolls back through the
    FMU's own state functions when the FMU has them.
    """

    def __init__(self, name: str, path: str, sample_time: float = 0.01,
                 start_values: dict | None = None):
        from cluster.fmu_unit import read_fmu
        md = read_fmu(path)
        ins = tuple(v.name for v in md.modelVariables
                    if v.causality == "input" and v.type == "Real")
        outs = tuple(v.name for v in md.modelVariables
                     if v.causality == "output" and v.type == "Real")
        bad = [n for n in ins + outs if not NAME_RE.match(n)]
        if bad:
            raise ModelError(f"FmuBlock {name!r}: variables {bad} of {path} are not valid port "
                             "names (letters, digits, '_')")
        super().__init__(name, sample_time=sample_time, inputs=ins, outputs=outs)
        self.path = str(path)
        self.start_values = dict(start_values or {})
        deps = [o.dependencies for o in md.outputs]
        self.direct_feedthrough = bool(ins) and any(d is None or d for d in deps)
        self._unit = None

    def as_unit(self, name: str, config):
        """This FMU as a co-simulation unit."""
        from cluster.fmu_unit import FmuUnit
        return FmuUnit(self.path, name, self.start_values)

    def initialize(self, t0):
        if self._unit is None:
            self._unit = self.as_unit(self.name, None)
        self._unit.initialize(t0)
        self.outputs.update(self._unit.get_outputs())

    def output_update(self, t, dt):
        if self.direct_feedthrough:
            self._unit.set_inputs({p: self.inputs[p] for p in self.input_names})
        self.outputs.update(self._unit.get_outputs())

    def state_update(self, t, dt):
        self._unit.set_inputs({p: self.inputs[p] for p in self.input_names})
        self._unit.do_step(t, dt)

    def finalize(self):
        if self._unit is not None:
            self._unit.terminate()
            self._unit = None
