"""FMU blocks: a co-simulation FMU as a block of a diagram (and as a unit when co-simulated).

In a monolithic run the FMU is a discrete block stepped at its sample hits (outputs that
depend directly on inputs are refreshed for the current inputs, as FMI 2.0 allows). In a
co-simulation a top-level FMU block becomes its own unit (:class:`cosim.fmi.unit.FmuUnit`).
fmpy is imported when the block is built, never by ``import blocks``.
"""

from __future__ import annotations

from cosim.model.block import NAME_RE, Block
from cosim.errors import ModelError

__all__ = ["FmuBlock", "ModelExchangeFmuBlock"]


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
        from cosim.fmi.unit import REAL_TYPES, read_fmu
        md = read_fmu(path)
        ins = tuple(v.name for v in md.modelVariables
                    if v.causality == "input" and v.type in REAL_TYPES)
        outs = tuple(v.name for v in md.modelVariables
                     if v.causality == "output" and v.type in REAL_TYPES)
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

    def __getstate__(self):
        # A running FMU instance (ctypes) never travels: units rebuild their own.
        return {k: v for k, v in self.__dict__.items() if k != "_unit"} | {"_unit": None}

    def as_unit(self, name: str, config):
        """This FMU as a co-simulation unit."""
        from cosim.fmi.unit import FmuUnit
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


def _ptr(a):
    """A float64 array as the ``double*`` fmpy's raw calls take."""
    import ctypes
    return a.ctypes.data_as(ctypes.POINTER(ctypes.c_double))


class ModelExchangeFmuBlock(Block):
    """An FMI 2.0 model-exchange FMU as a continuous block, integrated by cosim's solver.

    The block's continuous state is the FMU's (``cstate``); ``derivative(t)`` sets time,
    states and inputs and asks the FMU for its derivatives; outputs are read the same way.

    Parameters
    ----------
    name : str
    path : str
        The ``.fmu`` file (with a ModelExchange interface).
    start_values : dict of str to float, optional

    Ports
    -----
    One input / output per real input / output variable, shape ``(1,)``.

    Notes
    -----
    No FMU events (state or time events) are handled: the FMU must be smooth (it may report
    no event indicators). Feedthrough from the model description.
    """

    def __init__(self, name: str, path: str, start_values: dict | None = None):
        from fmpy import read_model_description
        try:
            md = read_model_description(str(path))
        except Exception as err:  # noqa: BLE001 - zip, XML and schema errors alike
            raise ModelError(f"{path} is not a valid FMU: {type(err).__name__}: {err}") \
                from None
        if md.modelExchange is None:
            raise ModelError(f"ModelExchangeFmuBlock {name!r}: {path} has no model-exchange "
                             "interface; use FmuBlock for co-simulation FMUs")
        if md.fmiVersion != "2.0":
            raise ModelError(f"ModelExchangeFmuBlock {name!r}: {path} is FMI "
                             f"{md.fmiVersion}; model exchange is supported for FMI 2.0 only "
                             "(FMI 3.0 FMUs can be used for co-simulation with FmuBlock)")
        if md.numberOfEventIndicators:
            raise ModelError(f"ModelExchangeFmuBlock {name!r}: {path} has event indicators, "
                             "which this block does not handle")
        self._in = [v for v in md.modelVariables if v.causality == "input" and v.type == "Real"]
        self._out = [v for v in md.modelVariables
                     if v.causality == "output" and v.type == "Real"]
        super().__init__(name, inputs=tuple(v.name for v in self._in),
                         outputs=tuple(v.name for v in self._out))
        self.path = str(path)
        self.start_values = dict(start_values or {})
        self._md = md
        self._nx = len(md.derivatives)
        deps = [o.dependencies for o in md.outputs]
        self.direct_feedthrough = bool(self._in) and any(
            d is None or any(x.causality == "input" for x in d) for d in deps)
        self._fmu = None

    def _call(self, call, fn, *args):
        try:
            return fn(*args)
        except Exception as err:  # noqa: BLE001 - fmpy raises its own exception types
            from cosim.errors import SimulationError
            raise SimulationError(f"{call} failed in FMU {self.path}: {err}",
                                  block=self.name) from err

    def initialize(self, t0):
        import tempfile

        import numpy as np
        from fmpy import extract
        from fmpy.fmi2 import FMU2Model
        md = self._md
        if self._fmu is None:
            self._dir = tempfile.mkdtemp(prefix="cosim-me-")
            extract(self.path, self._dir)
            self._fmu = FMU2Model(guid=md.guid, unzipDirectory=self._dir,
                                  modelIdentifier=md.modelExchange.modelIdentifier,
                                  instanceName=self.name)
            self._call("instantiate", self._fmu.instantiate)
        else:
            self._call("reset", self._fmu.reset)
        fmu = self._fmu
        self._call("setupExperiment", fmu.setupExperiment, None, t0)
        vars_ = {v.name: v for v in md.modelVariables}
        for k, v in self.start_values.items():
            if k not in vars_:
                raise ModelError(f"ModelExchangeFmuBlock {self.name!r}: {k!r} is not a "
                                 f"variable of {self.path}")
            self._call("setReal", fmu.setReal, [vars_[k].valueReference], [float(v)])
        self._call("enterInitializationMode", fmu.enterInitializationMode)
        self._call("exitInitializationMode", fmu.exitInitializationMode)
        self._call("enterContinuousTimeMode", fmu.enterContinuousTimeMode)
        x = np.zeros(self._nx)
        self._call("getContinuousStates", fmu.getContinuousStates, _ptr(x), self._nx)
        self.cstate = x

    def _load(self, t) -> None:
        import numpy as np
        fmu = self._fmu
        self._call("setTime", fmu.setTime, t)
        x = np.ascontiguousarray(self.cstate, dtype=np.float64)
        self._call("setContinuousStates", fmu.setContinuousStates, _ptr(x), self._nx)
        if self._in and self.inputs:
            self._call("setReal", fmu.setReal, [v.valueReference for v in self._in],
                       [float(self.inputs[v.name][0]) for v in self._in if v.name in
                        self.inputs])

    def output_update(self, t, dt):
        import numpy as np
        self._load(t)
        vals = self._call("getReal", self._fmu.getReal, [v.valueReference for v in self._out])
        for v, y in zip(self._out, vals):
            self.outputs[v.name] = np.array([float(y)])

    def derivative(self, t):
        import numpy as np
        self._load(t)
        dx = np.zeros(self._nx)
        self._call("getDerivatives", self._fmu.getDerivatives, _ptr(dx), self._nx)
        return dx

    def finalize(self):
        pass
