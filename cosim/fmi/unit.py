"""FMUs as units: an FMI 2.0 or 3.0 co-simulation FMU driven through the unit protocol (fmpy).

Ports are the FMU's real (FMI 3.0: Float64) inputs and outputs (shape ``(1,)`` each); which
outputs depend on which inputs comes from the model description's ``<ModelStructure>`` (when it
lists none, every output is assumed to depend on every input: the safe choice). Rollback and
checkpoints use the FMU's own state functions (``fmi2GetFMUstate`` + ``fmi2SerializeFMUstate``,
or FMI 3.0's); an FMU that cannot save its state refuses ``get_state`` with an error saying so,
which makes the master refuse iteration, adaptive steps and checkpoints for it. Every fmpy call
goes through one wrapper that names the unit, the call and the time.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import numpy as np

from cosim.master import protocol as P
from cosim.errors import ModelError, SimulationError, UnsupportedError
from cosim.master.units import Unit

__all__ = ["FmuUnit", "REAL_TYPES", "read_fmu"]

#: Variable types of real scalars: FMI 2.0 ``Real``, FMI 3.0 ``Float64``.
REAL_TYPES = ("Real", "Float64")


def read_fmu(path) -> object:
    """The model description of an FMU file; a clear error names a bad file."""
    from fmpy import read_model_description
    p = Path(path)
    if not p.is_file():
        raise ModelError(f"FMU {p} does not exist")
    try:
        md = read_model_description(str(p))
    except Exception as err:  # noqa: BLE001 - zip, XML and schema errors alike
        raise ModelError(f"{p} is not a valid FMU: {type(err).__name__}: {err}") from None
    if md.coSimulation is None:
        raise ModelError(f"{p} is not a co-simulation FMU (FMI {md.fmiVersion}); use it as a "
                         "model-exchange block instead")
    if md.fmiVersion not in ("2.0", "3.0"):
        raise ModelError(f"{p}: FMI {md.fmiVersion} is not supported (FMI 2.0 and 3.0 are)")
    return md


class FmuUnit(Unit):
    """A co-simulation FMU as a unit.

    Parameters
    ----------
    path : str or Path
        The ``.fmu`` file.
    name : str
        Unit name.
    start_values : dict of str to float, optional
        Values set before initialization (parameters and start values alike).
    """

    def __init__(self, path, name: str, start_values: dict | None = None):
        from fmpy import extract
        self.name = name
        self.path = Path(path)
        self.md = read_fmu(self.path)
        self.start_values = dict(start_values or {})
        vars_ = {v.name: v for v in self.md.modelVariables}
        unknown = sorted(set(self.start_values) - set(vars_))
        if unknown:
            raise ModelError(f"FMU unit {name!r}: {', '.join(unknown)} not variables of "
                             f"{self.path.name} (variables: {', '.join(vars_)})")
        self.inputs = [v for v in self.md.modelVariables
                       if v.causality == "input" and v.type in REAL_TYPES]
        self.outputs = [v for v in self.md.modelVariables
                        if v.causality == "output" and v.type in REAL_TYPES]
        self._vars = vars_
        cs = self.md.coSimulation
        self.can_state = bool(cs.canGetAndSetFMUstate and cs.canSerializeFMUstate)
        self.fmi3 = self.md.fmiVersion == "3.0"
        # FMI 3.0 co-simulation has no input derivatives (intermediate updates instead).
        self.can_interpolate = bool(cs.canInterpolateInputs) and not self.fmi3
        self._dir = tempfile.mkdtemp(prefix="cosim-fmu-")
        extract(str(self.path), self._dir)
        if self.fmi3:
            from fmpy.fmi3 import FMU3Slave
            self.fmu = FMU3Slave(guid=self.md.guid, unzipDirectory=self._dir,
                                 modelIdentifier=cs.modelIdentifier, instanceName=name)
        else:
            from fmpy.fmi2 import FMU2Slave
            self.fmu = FMU2Slave(guid=self.md.guid, unzipDirectory=self._dir,
                                 modelIdentifier=cs.modelIdentifier, instanceName=name)
        # fmpy names the calls after the standard: FMI 3.0 renamed a few.
        f = self.fmu
        self._set = f.setFloat64 if self.fmi3 else f.setReal
        self._get = f.getFloat64 if self.fmi3 else f.getReal
        self._state_calls = ((f.getFMUState, f.setFMUState, f.freeFMUState,
                              f.serializeFMUState, f.deserializeFMUState) if self.fmi3 else
                             (f.getFMUstate, f.setFMUstate, f.freeFMUstate,
                              f.serializeFMUstate, f.deSerializeFMUstate))
        self.t = 0.0
        self._instantiated = False
        self._log_t: list[float] = []
        self._log_y: list[np.ndarray] = []

    def _call(self, call: str, fn, *args):
        """The one choke point for fmpy calls: a bad status becomes a named error."""
        try:
            return fn(*args)
        except Exception as err:  # noqa: BLE001 - fmpy raises its own exception types
            raise SimulationError(f"FMU unit {self.name!r} ({self.path.name}): {call} failed: "
                                  f"{err}", t=self.t) from err

    # -- protocol -------------------------------------------------------------------------

    def describe(self) -> P.UnitDescription:
        deps = {}
        for out in self.md.outputs:
            if out.dependencies is None:       # not declared: assume every input
                deps[out.variable.name] = tuple(v.name for v in self.inputs)
            else:
                deps[out.variable.name] = tuple(d.name for d in out.dependencies
                                                if d.causality == "input")
        return P.UnitDescription(
            name=self.name,
            inputs=tuple(P.PortInfo(v.name, (1,)) for v in self.inputs),
            outputs=tuple(P.PortInfo(v.name, (1,)) for v in self.outputs),
            feedthrough=tuple((v.name, deps.get(v.name, ())) for v in self.outputs),
            dt=float(self.md.defaultExperiment.stepSize) if self.md.defaultExperiment and
            self.md.defaultExperiment.stepSize else 1e-3,
            can_get_set_state=self.can_state,
            capabilities=("rollback",) if self.can_state else ())

    def initialize(self, t0: float) -> None:
        fmu = self.fmu
        if self._instantiated:
            self._call("reset", fmu.reset)
        else:
            self._call("instantiate", fmu.instantiate)
            self._instantiated = True
        self.t = t0
        if not self.fmi3:
            self._call("setupExperiment", fmu.setupExperiment, None, t0)
        for name, value in self.start_values.items():
            self._call("set", self._set, [self._vars[name].valueReference], [value])
        if self.fmi3:
            self._call("enterInitializationMode", fmu.enterInitializationMode, None, t0)
        else:
            self._call("enterInitializationMode", fmu.enterInitializationMode)
        self._call("exitInitializationMode", fmu.exitInitializationMode)
        self._log_t, self._log_y = [], []
        self._record()

    def set_inputs(self, values: dict, derivatives: dict | None = None) -> None:
        names = {v.name: v for v in self.inputs}
        refs, vals = [], []
        for p, v in values.items():
            if p not in names:
                raise ModelError(f"FMU unit {self.name!r} has no input {p!r} (inputs: "
                                 f"{', '.join(names)})")
            refs.append(names[p].valueReference)
            vals.append(float(np.asarray(v).reshape(-1)[0]))
        if refs:
            self._call("set", self._set, refs, vals)
        if derivatives and self.can_interpolate:
            for p, ders in derivatives.items():
                if ders:
                    self._call("setRealInputDerivatives", self.fmu.setRealInputDerivatives,
                               [names[p].valueReference], [1], [float(ders[0][0])])

    def refresh_outputs(self) -> P.StepDone:
        """Log the outputs for the inputs just set as this time's sample (FMI computes
        outputs on demand, so nothing else is due)."""
        self._record(replace=True)
        return P.StepDone(self.t, False)

    def do_step(self, t: float, h: float) -> P.StepDone:
        if h > 0.0:
            self._call("doStep", self.fmu.doStep, t, h)
            self.t = t + h
        self._record(replace=h == 0.0)
        return P.StepDone(self.t, False)

    def get_outputs(self) -> dict:
        refs = [v.valueReference for v in self.outputs]
        vals = self._call("get", self._get, refs) if refs else []
        return {v.name: np.array([float(x)]) for v, x in zip(self.outputs, vals)}

    def get_state(self) -> P.UnitState:
        if not self.can_state:
            raise UnsupportedError(
                f"FMU unit {self.name!r} ({self.path.name}) cannot save its state "
                "(canGetAndSetFMUstate/canSerializeFMUstate is false), so it cannot be rolled "
                "back: iterated couplings, adaptive macro steps and checkpoints are refused "
                "for it; use a fixed macro step without iteration")
        get, _, free, serialize, _ = self._state_calls
        st = self._call("getFMUstate", get)
        data = self._call("serializeFMUstate", serialize, st)
        self._call("freeFMUstate", free, st)
        return P.UnitState(self.t, {"fmu": bytes(data), "t": self.t,
                                    "logs": len(self._log_t)})

    def set_state(self, state: P.UnitState) -> None:
        if not self.can_state:
            self.get_state()                # raises the explanation
        _, set_, free, _, deserialize = self._state_calls
        st = self._call("deSerializeFMUstate", deserialize, state.data["fmu"])
        self._call("setFMUstate", set_, st)
        self._call("freeFMUstate", free, st)
        self.t = state.data["t"]
        del self._log_t[state.data["logs"]:], self._log_y[state.data["logs"]:]

    def _record(self, replace: bool = False) -> None:
        y = np.array([float(v[0]) for v in self.get_outputs().values()])
        if replace and self._log_t and self._log_t[-1] == self.t:
            self._log_y[-1] = y
            return
        self._log_t.append(self.t)
        self._log_y.append(y)

    def collect_logs(self) -> P.LogBatch:
        t = np.array(self._log_t)
        y = np.array(self._log_y).reshape(len(t), -1)
        out = {f"fmu.{v.name}": (t, y[:, i:i + 1]) for i, v in enumerate(self.outputs)}
        self._log_t, self._log_y = [], []
        return P.LogBatch(out)

    def terminate(self) -> None:
        if self._instantiated:
            self._call("terminate", self.fmu.terminate)
            self._call("freeInstance", self.fmu.freeInstance)
            self._instantiated = False
        shutil.rmtree(self._dir, ignore_errors=True)
