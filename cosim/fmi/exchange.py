"""Model exchange: one FMI 2.0 or 3.0 model-exchange FMU driven for cosim's solvers.

The FMU's continuous state is integrated by cosim; its events are cosim's: the event
indicators (and ``t - nextEventTime``, for time events) are switching surfaces that cosim's
event monitor locates on the solver's dense output, and :meth:`ModelExchangeFmu.event`
runs the FMI event iteration there (enter event mode, set the discrete inputs, new discrete
states until stable, back to continuous-time mode). After every accepted solver step
``completedIntegratorStep`` may ask for a step event. Inputs are set according to their
variability: continuous ones at every evaluation, discrete ones only in event mode (a changed
discrete input is itself an event). Every call goes through :class:`FmuInstance`.
"""

from __future__ import annotations

import ctypes
import math

import numpy as np

from cosim.errors import SimulationError, StopSimulation
from cosim.fmi.instance import FmuInstance
from cosim.fmi.variables import text_value

__all__ = ["ModelExchangeFmu"]

#: Event iterations allowed at one time before the FMU is declared not to settle.
MAX_EVENT_ITERATIONS = 1000


def _ptr(a: np.ndarray):
    return a.ctypes.data_as(ctypes.POINTER(ctypes.c_double))


class ModelExchangeFmu:
    """A model-exchange FMU instance, in the modes cosim's solver and event monitor need.

    Parameters
    ----------
    path : Path
    md : fmpy ModelDescription
    name : str
    inputs : list of FmuVariable
    outputs : list of FmuVariable
    """

    def __init__(self, path, md, name: str, inputs, outputs):
        self.inst = FmuInstance(path, md, "me", name)
        self.md = md
        self.fmi3 = md.fmiVersion == "3.0"
        # FMI 2.0 declares the counts; FMI 3.0 states and indicators may be arrays sized by
        # structural parameters, so the instance tells them once configured (initialize).
        self.nx = len(md.derivatives)
        self.nz = int(md.numberOfEventIndicators or 0)
        self._all_cont = [v for v in inputs if not v.discrete]
        self._all_disc = [v for v in inputs if v.discrete]
        self.cont_in, self.disc_in = self._all_cont, self._all_disc
        self._acc_cont = self.inst.groups(self.cont_in)
        self._acc_disc = self.inst.groups(self.disc_in)
        self._acc_out = self.inst.groups(outputs)
        self.n_out = sum(v.size for v in outputs)
        self._buffers()
        f = self.inst.fmu
        self._get_dx = f.getContinuousStateDerivatives if self.fmi3 else f.getDerivatives
        self._update = f.updateDiscreteStates if self.fmi3 else f.newDiscreteStates
        self.next_event = math.inf
        self.disc_values: np.ndarray | None = None

    def use_inputs(self, names) -> None:
        """Set only the inputs in ``names`` from now on (the others keep their values)."""
        self.cont_in = [v for v in self._all_cont if v.name in names]
        self.disc_in = [v for v in self._all_disc if v.name in names]
        self._acc_cont = self.inst.groups(self.cont_in)
        self._acc_disc = self.inst.groups(self.disc_in)

    def _buffers(self) -> None:
        self._x = np.zeros(self.nx)
        self._dx = np.zeros(self.nx)
        self._z = np.zeros(self.nz)
        self._px, self._pdx, self._pz = _ptr(self._x), _ptr(self._dx), _ptr(self._z)

    # -- life cycle -------------------------------------------------------------------------

    def initialize(self, t0: float, apply_start) -> np.ndarray:
        """Initialize at ``t0`` (``apply_start(phase)`` sets start values), run the initial
        event iteration, enter continuous-time mode; returns the initial state, shape (nx,)."""
        inst, f = self.inst, self.inst.fmu
        inst.t = t0
        if self.fmi3:
            if any(v.causality == "structuralParameter" for v in self.md.modelVariables):
                inst.call("fmi3EnterConfigurationMode", f.enterConfigurationMode)
                apply_start("config")
                inst.call("fmi3ExitConfigurationMode", f.exitConfigurationMode)
            apply_start("init")
            inst.call("fmi3EnterInitializationMode", f.enterInitializationMode, None, t0)
        else:
            inst.call("fmi2SetupExperiment", f.setupExperiment, None, t0)
            apply_start("init")
            inst.call("fmi2EnterInitializationMode", f.enterInitializationMode)
        inst.terminated = False
        inst.call("exitInitializationMode", f.exitInitializationMode)
        if self.fmi3:
            nx = inst.call("fmi3GetNumberOfContinuousStates", f.getNumberOfContinuousStates)
            nz = inst.call("fmi3GetNumberOfEventIndicators", f.getNumberOfEventIndicators)
            if (nx, nz) != (self.nx, self.nz):
                self.nx, self.nz = nx, nz
                self._buffers()
        self._iterate(t0)                       # FMI: event mode after initialization
        inst.call("enterContinuousTimeMode", f.enterContinuousTimeMode)
        if self.nx:
            inst.call("getContinuousStates", f.getContinuousStates, self._px, self.nx)
        return self._x.copy()

    def reset(self) -> None:
        self.inst.call("reset", self.inst.fmu.reset)

    def free(self) -> None:
        self.inst.free()

    # -- continuous time ----------------------------------------------------------------------

    def load(self, t: float, x: np.ndarray, cont_inputs: np.ndarray | None) -> None:
        """Set time, continuous state (shape (nx,)) and the continuous inputs (flat)."""
        inst, f = self.inst, self.inst.fmu
        inst.t = t
        inst.call("setTime", f.setTime, t)
        if self.nx:
            self._x[:] = x
            inst.call("setContinuousStates", f.setContinuousStates, self._px, self.nx)
        if cont_inputs is not None and self.cont_in:
            inst.write(self._acc_cont, cont_inputs)

    def derivatives(self) -> np.ndarray:
        """State derivatives at the loaded point, shape (nx,)."""
        self.inst.call("getDerivatives", self._get_dx, self._pdx, self.nx)
        return self._dx.copy()

    def outputs(self) -> np.ndarray:
        """All outputs at the loaded point, flat float64."""
        out = np.empty(self.n_out)
        self.inst.read(self._acc_out, out)
        return out

    def surfaces(self, t: float) -> np.ndarray:
        """Event indicators and the time-event surface ``t - nextEventTime``, shape (nz+1,)."""
        out = np.empty(self.nz + 1)
        if self.nz:
            self.inst.call("getEventIndicators", self.inst.fmu.getEventIndicators, self._pz,
                           self.nz)
            out[:self.nz] = self._z
        out[self.nz] = t - self.next_event if self.next_event < math.inf else -1.0
        return out

    def completed_step(self, t: float) -> bool:
        """``completedIntegratorStep`` after an accepted step; True asks for a step event."""
        enter, stop = self.inst.call("completedIntegratorStep",
                                     self.inst.fmu.completedIntegratorStep)
        if stop:
            raise StopSimulation(t, f"FMU {self.inst.name!r} asked to terminate "
                                    "(completedIntegratorStep)")
        return bool(enter)

    # -- events -------------------------------------------------------------------------------

    def event(self, t: float, disc_inputs: np.ndarray | None,
              texts: dict | None = None) -> np.ndarray | None:
        """The FMI event iteration at ``t`` (state loaded): event mode, the discrete inputs
        (``texts``: String / Binary inputs -> their ``str`` / ``bytes``), new discrete
        states until stable, continuous-time mode. Returns the new continuous state (shape
        (nx,)) or None if unchanged."""
        inst, f = self.inst, self.inst.fmu
        inst.call("enterEventMode", f.enterEventMode)
        if disc_inputs is not None and self.disc_in:
            inst.write(self._acc_disc, disc_inputs)
            self.disc_values = disc_inputs.copy()
        for v, value in (texts or {}).items():
            value = text_value(v, value, f"FMU {inst.name!r}: input")
            if v.type == "String":
                inst.call("setString", f.setString, [v.vr], [value])
            else:
                inst.call("fmi3SetBinary", f.setBinary, [v.vr], [value])
        changed = self._iterate(t)
        inst.call("enterContinuousTimeMode", f.enterContinuousTimeMode)
        if changed and self.nx:
            inst.call("getContinuousStates", f.getContinuousStates, self._px, self.nx)
            return self._x.copy()
        return None

    def _iterate(self, t: float) -> bool:
        """New discrete states until stable; True if the continuous state changed."""
        changed = False
        for _ in range(MAX_EVENT_ITERATIONS):
            again, stop, _, values_changed, defined, next_t = self.inst.call(
                "updateDiscreteStates" if self.fmi3 else "newDiscreteStates", self._update)
            changed = changed or values_changed
            self.next_event = next_t if defined else math.inf
            if stop:
                raise StopSimulation(t, f"FMU {self.inst.name!r} asked to terminate")
            if not again:
                return changed
        raise SimulationError(f"FMU {self.inst.name!r}: the event iteration did not settle "
                              f"after {MAX_EVENT_ITERATIONS} updates of the discrete states",
                              t=t)
