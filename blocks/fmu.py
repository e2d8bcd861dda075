"""FMU blocks: a co-simulation FMU as a block of a diagram (and as a unit when co-simulated),
and a model-exchange FMU as a continuous block integrated by cosim's solvers.

Ports have the FMU variables' shapes; their values are float64 arrays like every port's,
which hold the FMU's integers, booleans (0/1) and enumerations exactly
(:mod:`cosim.fmi.variables`). String and Binary inputs and outputs are ports of their own
kind (``input_kinds`` / ``output_kinds``; values ``str`` / ``bytes`` in object arrays) wired
only to ports of their kind, another FMU's among them; an unconnected one keeps its start
value or ``start_values`` (a model-exchange FMU's text inputs are set in event mode). In a
monolithic run a co-simulation FMU is a discrete block stepped at its sample hits (outputs
that depend directly on inputs are refreshed for the current inputs); in a co-simulation a
top-level FMU block becomes its own unit (:class:`cosim.fmi.unit.FmuUnit`). An FMU that asks
to terminate ends the run cleanly at that time (:class:`~cosim.errors.StopSimulation`).
fmpy is imported when the block is built, never by ``import blocks``.
"""

from __future__ import annotations

import numpy as np

from cosim.errors import ModelError, StopSimulation
from cosim.model.block import NAME_RE, Block

__all__ = ["FmuBlock", "ModelExchangeFmuBlock"]


def _check_names(kind: str, name: str, path, variables) -> None:
    bad = [v.name for v in variables if not NAME_RE.match(v.name)]
    if bad:
        raise ModelError(f"{kind} {name!r}: variables {bad} of {path} are not valid port "
                         "names (letters, digits, '_')")


def _same_time(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 * max(1.0, abs(b))


def _typed(flat: np.ndarray, variables) -> dict:
    """Port values of ``variables`` (float64 arrays of their shape) from a flat vector."""
    out, k = {}, 0
    for v in variables:
        out[v.name] = flat[k:k + v.size].reshape(v.shape)
        k += v.size
    return out


class FmuBlock(Block):
    """An FMI 2.0 or 3.0 co-simulation FMU.

    Parameters
    ----------
    name : str
    path : str
        The ``.fmu`` file.
    sample_time : float
        Communication step (s) of the FMU in the diagram (also the unit's step when
        co-simulated). FMI leaves the step to the importer: the FMU's default experiment
        is not a constraint. An FMU that cannot handle a variable step is stepped with
        this one constant step.
    start_values : dict of str to float or array, optional
        Parameters, structural parameters and start values set before initialization.

    Ports
    -----
    One input / output per input / output variable of the FMU, of its shape.

    Notes
    -----
    Feedthrough from the model description. The FMU's state lives inside the FMU, so a
    monolithic checkpoint cannot capture it; co-simulated, the unit rolls back through the
    FMU's own state functions when the FMU has them.
    """

    def __init__(self, name: str, path: str, sample_time: float = 0.01,
                 start_values: dict | None = None):
        from cosim.fmi.description import read_fmu
        from cosim.fmi.variables import is_text, ports_of
        md = read_fmu(path)
        where = f"FmuBlock {name!r} ({path})"
        ins, outs = ports_of(md, dict(start_values or {}), where, path, text=True)
        _check_names("FmuBlock", name, path, ins + outs)
        super().__init__(name, sample_time=sample_time, inputs=tuple(v.name for v in ins),
                         outputs=tuple(v.name for v in outs))
        # String and Binary variables are ports of their own kind (str / bytes values).
        self.input_kinds = {v.name: v.type for v in ins if is_text(v)}
        self.output_kinds = {v.name: v.type for v in outs if is_text(v)}
        self.path = str(path)
        self.start_values = dict(start_values or {})
        # An unconnected input keeps the FMU's value (its start value or start_values), as
        # importers do.
        self.optional_inputs = frozenset(self.input_names)
        deps = [o.dependencies for o in md.outputs]
        self.direct_feedthrough = bool(ins) and any(d is None or d for d in deps)
        self._unit = None

    def __getstate__(self):
        # A running FMU instance (ctypes) never travels: units rebuild their own.
        return {k: v for k, v in self.__dict__.items() if k != "_unit"} | {"_unit": None}

    def text_outputs(self) -> dict:
        """The FMU's String (``str``) and Binary (``bytes``) outputs now (initialized
        block): they are not numeric ports. String and Binary inputs hold their
        ``start_values`` (else their start values)."""
        return self._unit.text_outputs()

    def as_unit(self, name: str, config):
        """This FMU as a co-simulation unit."""
        from cosim.fmi.unit import FmuUnit
        step = self.sample_time[0] if isinstance(self.sample_time, tuple) else \
            self.sample_time
        return FmuUnit(self.path, name, self.start_values, step=step,
                       log=getattr(config, "log", None))

    def _outputs(self):
        self.outputs.update(self._unit.get_outputs())

    def initialize(self, t0):
        if self._unit is None:
            self._unit = self.as_unit(self.name, None)
        self._unit.initialize(t0)
        self._stop: StopSimulation | None = None
        self._outputs()

    def output_update(self, t, dt):
        if self.direct_feedthrough and self._stop is None:
            self._unit.set_inputs(self._given())
        self._outputs()

    def _given(self) -> dict:
        """The connected inputs' values (the others keep the FMU's)."""
        return {p: self.inputs[p] for p in self.input_names if p in self.inputs}

    def state_update(self, t, dt):
        if self._stop is not None:
            raise self._stop            # after the stop time's outputs were logged
        self._unit.set_inputs(self._given())
        done = self._unit.do_step(t, dt)
        if done.event:
            stop = StopSimulation(done.t_reached, f"FMU {self.name!r} asked to terminate")
            if not _same_time(done.t_reached, t + dt):
                # Between ticks: its outputs where it stopped are its last sample.
                stop.block, stop.outputs = self, self._unit.get_outputs()
                raise stop
            # It stopped at the next tick: that tick's outputs (the FMU's last) are logged
            # first, the run ends at its state update.
            self._stop = stop

    def finalize(self):
        if self._unit is not None:
            self._unit.terminate()
            self._unit = None


class ModelExchangeFmuBlock(Block):
    """An FMI 2.0 or 3.0 model-exchange FMU as a continuous block, integrated by cosim's
    solver, with its events handled by cosim's event monitor.

    The block's continuous state is the FMU's (``cstate``). The FMU's event indicators and
    its next time event are the block's switching surfaces (a block with modes, see
    :class:`~cosim.model.block.Block` rule 10): the simulator locates their sign changes on
    the solver's dense output and calls :meth:`switch_mode` there, which runs the FMI event
    iteration and may reset the continuous state. After every accepted step the FMU may ask
    for a step event (:meth:`completed_step`). Discrete-variability inputs are set only in
    event mode: a change of one at a tick is an event at that tick.

    Parameters
    ----------
    name : str
    path : str
        The ``.fmu`` file (with a ModelExchange interface).
    start_values : dict of str to float or array, optional

    Ports
    -----
    One input / output per input / output variable, of its shape.

    Notes
    -----
    Located events are logged in ``Simulator.switch_log`` as ``(t, block path)``. An FMU's
    request to terminate ends the run at that time.
    """

    def __init__(self, name: str, path: str, start_values: dict | None = None):
        from cosim.fmi.description import read_fmu
        from cosim.fmi.variables import clocks_of, is_text, ports_of
        md = read_fmu(path, "me")
        where = f"ModelExchangeFmuBlock {name!r} ({path})"
        ins, outs = ports_of(md, dict(start_values or {}), where, path, text=True)
        if md.fmiVersion == "3.0" and clocks_of(md, path, where):
            raise ModelError(f"{where}: clocks of a model-exchange FMU are not supported "
                             "(docs/fmi.md)" + ("; use its co-simulation interface with "
                                                "FmuBlock, which ticks time-based input clocks"
                                                if md.coSimulation is not None else ""))
        _check_names("ModelExchangeFmuBlock", name, path, ins + outs)
        super().__init__(name, inputs=tuple(v.name for v in ins),
                         outputs=tuple(v.name for v in outs))
        self.path = str(path)
        self.start_values = dict(start_values or {})
        self._md = md
        # String and Binary variables are ports of their own kind (str / bytes values): an
        # input set in event mode (a change at a tick is an event, as for discrete inputs).
        self.input_kinds = {v.name: v.type for v in ins if is_text(v)}
        self.output_kinds = {v.name: v.type for v in outs if is_text(v)}
        self._text_in = [v for v in ins if is_text(v)]
        self._text_out = [v for v in outs if is_text(v)]
        ins = [v for v in ins if not is_text(v)]
        outs = [v for v in outs if not is_text(v)]
        self._ins, self._outs = ins, outs
        self.optional_inputs = frozenset(self.input_names)     # unconnected: the FMU's value
        deps = [o.dependencies for o in md.outputs]
        self.direct_feedthrough = bool(ins) and any(
            d is None or any(x.causality == "input" for x in d) for d in deps)
        self._fmu = None

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != "_fmu"} | {"_fmu": None}

    def initialize(self, t0):
        from pathlib import Path

        from cosim.fmi.exchange import ModelExchangeFmu
        from cosim.fmi.description import start_value_setter
        if self._fmu is None:
            self._fmu = ModelExchangeFmu(Path(self.path), self._md, self.name, self._ins,
                                         self._outs)
            self._start = start_value_setter(self._fmu.inst, self._md, self.start_values,
                                             f"ModelExchangeFmuBlock {self.name!r}")
        else:
            self._fmu.reset()
        x = self._fmu.initialize(t0, self._start)
        # An FMU without continuous states still has time, state and step events, which the
        # event monitor finds on solver steps; in a model with no other continuous state no
        # solver would step, so such an FMU holds one constant state (derivative 0) that
        # makes time advance through the solver (fmpy does the same for its CVode).
        self._clock_only = x.size == 0
        self.cstate = np.zeros(1) if self._clock_only else x
        self._fmu.disc_values = None
        self._texts_set: dict = {}     # text inputs as last set
        self._stop: StopSimulation | None = None
        self._tick_end = t0
        self._connected = -1           # inputs wired when last counted

    def _flat(self, variables) -> np.ndarray | None:
        if not variables:
            return None
        return np.concatenate([np.asarray(self.inputs[v.name], np.float64).reshape(-1)
                               for v in variables])

    def _load(self, t) -> None:
        if len(self.inputs) != self._connected:
            # The inputs set are the connected ones, once wired (the others keep the FMU's).
            self._connected = len(self.inputs)
            self._fmu.use_inputs(frozenset(self.inputs))
        if self._stop is not None:
            # Stopped at a tick's end: that tick's outputs are the FMU's last (read as they
            # are); anything later ends the run.
            if t > self._stop.t and not _same_time(t, self._stop.t):
                raise self._stop
            return
        self._fmu.load(t, self.cstate, self._flat(self._fmu.cont_in))

    def output_update(self, t, dt):
        self._tick_end = t + dt
        # At a tick: a changed discrete input is an event here (FMI sets those only in event
        # mode); the new state is written into the simulator's vector (a discrete block ran,
        # so the solver restarts from it).
        self._load(t)
        disc = self._flat(self._fmu.disc_in)
        texts = self._texts()
        if texts or disc is not None and (self._fmu.disc_values is None or
                                          not np.array_equal(disc, self._fmu.disc_values)):
            self._event(t, disc, texts)
        self.held_output_update(t, dt)

    def _texts(self) -> dict:
        """The connected text inputs whose values differ from those last set."""
        out = {}
        for v in self._text_in:
            if v.name in self.inputs:
                value = self.inputs[v.name].reshape(-1)[0]
                if self._texts_set.get(v.name) != value:
                    out[v] = value
        return out

    def held_output_update(self, t, dt):
        self._load(t)
        self.outputs.update(_typed(self._fmu.outputs(), self._outs))
        if self._text_out:
            from cosim.fmi.description import read_text
            for name, value in read_text(self._fmu.inst, self._md).items():
                a = np.empty(1, dtype=object)
                a[0] = value
                self.outputs[name] = a

    def derivative(self, t):
        if self._clock_only:
            return np.zeros(1)
        self._load(t)
        if self._stop is not None:
            return np.zeros_like(self.cstate)
        return self._fmu.derivatives()

    def switch_surfaces(self, t):
        self._load(t)
        if self._stop is not None:
            return np.full(self._fmu.nz + 1, -1.0)
        return self._fmu.surfaces(t)

    def switch_mode(self, t):
        self._load(t)
        self._event(t, self._flat(self._fmu.disc_in), self._texts())

    def completed_step(self, t):
        self._load(t)
        return self._stop is None and self._fmu.completed_step(t)

    def _event(self, t, disc, texts=None) -> None:
        if self._stop is not None:
            return
        try:
            x = self._fmu.event(t, disc, texts)
            if texts:
                self._texts_set.update((v.name, value) for v, value in texts.items())
        except StopSimulation as stop:
            if not _same_time(t, self._tick_end):
                # Between ticks: its outputs after the event are its last sample there.
                stop.block, stop.outputs = self, _typed(self._fmu.outputs(), self._outs)
                raise
            # It stopped at the end of the tick being integrated: that tick's outputs (the
            # FMU's last, after the event) are logged first, the run ends right after.
            self._stop = stop
            return
        if x is not None and not self._clock_only:
            self.cstate[:] = x

    def text_outputs(self) -> dict:
        """The FMU's String (``str``) and Binary (``bytes``) outputs now (initialized
        block); see :meth:`FmuBlock.text_outputs`."""
        from cosim.fmi.description import read_text
        return read_text(self._fmu.inst, self._md)

    def finalize(self):
        if self._fmu is not None:
            fmu, self._fmu = self._fmu, None
            fmu.free()
