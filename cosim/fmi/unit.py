"""FMUs as units: an FMI 2.0 or 3.0 co-simulation FMU driven through the unit protocol.

Ports are the FMU's inputs and outputs of every numeric type (:mod:`cosim.fmi.variables`);
on the protocol their values travel as float64 arrays of the port's shape, converted exactly
to and from the FMU's type here (an input value that the type cannot hold is an error naming
the port). String and Binary inputs and outputs are ports too, their values ``str`` /
``bytes`` in object arrays of shape ``(1,)``; a unit with them takes separate protocol
requests (the fused step packs float64 only), and its direct step (the compiled exchange)
carries its numbers only. Which outputs depend on which inputs comes from ``<ModelStructure>`` (none listed:
every output depends on every input, the safe choice). Rollback and checkpoints use the FMU's
own state functions; an FMU that cannot save its state refuses ``get_state`` with an error
saying so, which makes the master refuse iteration, adaptive steps and checkpoints for it.

An FMU's request to terminate (FMI 2.0: ``fmi2Discard`` from ``fmi2DoStep`` with
``fmi2Terminated`` true; FMI 3.0: ``terminateSimulation`` from ``fmi3DoStep``) is a stop: the
step reports ``StepDone(t, event=True)`` at the time the FMU reached, and the master ends the
co-simulation there, on every backend. FMI 3.0 time-based input clocks tick as scheduled
events inside the unit's steps. Every FMI call goes through :class:`~cosim.fmi.instance.
FmuInstance`, whose errors carry the FMU's own log messages.
"""

from __future__ import annotations

import ctypes
import functools
import math
from pathlib import Path

import numpy as np

from cosim.errors import ModelError, SimulationError, UnsupportedError
from cosim.fmi.instance import DISCARD, FmuInstance
from cosim.fmi.description import read_fmu, read_text, start_value_setter
from cosim.fmi.variables import clocks_of, exact_cast, is_text, ports_of, text_value
from cosim.master import protocol as P
from cosim.master.units import DirectStep, Unit

__all__ = ["FmuUnit"]


#: Bit of :meth:`FmuUnit._stale_masks` for "a String / Binary output depends on this input".
_TEXT_BIT = 1 << 62


def _text_array(value) -> np.ndarray:
    """A String / Binary port value: ``value`` in an object array of shape ``(1,)``."""
    a = np.empty(1, dtype=object)
    a[0] = value
    return a


class _OneInput:
    """One scalar input set by its own FMI call through a one-value buffer made once."""

    __slots__ = ("group", "variable", "unit")

    def __init__(self, unit, v):
        (self.group,) = unit.inst.groups([v])
        self.variable = v
        self.unit = unit

    def failed(self, status: int) -> None:
        """Raise the error of a write that returned ``status``."""
        self.unit.inst.check(self.group.set_name, status)

    def write(self, value: float) -> None:
        g, v = self.group, self.variable
        if v.dtype != np.float64 and float(v.dtype.type(value)) != value:
            exact_cast(np.array([value]), v, self.unit.where)     # raises, naming the port
        g.buf[0] = v.dtype.type(value).item() if v.dtype != np.float64 else value
        status = g.set()
        if status > 1:
            self.unit.inst.check(g.set_name, status)


#: The rest of a generated FMI 2.0 direct step (:meth:`FmuUnit._direct_fmi2`): the step to
#: tick ``k_full`` (or, with ``k_full == k``, the refresh) and the outputs into the slots.
_DIRECT_FMI2_TAIL = '''
    if k_full > k:
        unit._k = k_full
        t, h = t0 + k * dt, (k_full - k) * dt
        if unit._terminated:
            raise SimulationError(f"{unit.where}: stepped after the FMU asked to terminate",
                                  t=t)
        if unit._logged_t != unit.t:
            record()            # the step's start, with the inputs just set
        if unit._constant_h:
            unit._check_constant(t, h)
        inst.t = c_t.value = t
        c_h.value = h
        status = do_step(*args)
        t_reached = t0 + k_full * dt
        if status > 1:
            reached = unit._not_ok2(t, h, status)
            if reached != t + h:
                t_reached = reached
        unit.t = inst.t = t_reached
        unit._y = y = unit._text = None
        if unit._terminated:
            stops.append(t_reached)
    else:
        record(True)
        y = unit._y
    if y is None:
        y = unit._y = read_out()
    if type(y) is tuple:
        Sc[:] = y
    else:
        S[:] = y
    return k_full, last
'''


class FmuUnit(Unit):
    """A co-simulation FMU as a unit.

    Parameters
    ----------
    path : str or Path
        The ``.fmu`` file.
    name : str
        Unit name.
    start_values : dict of str to float or array, optional
        Values set before initialization (parameters, structural parameters and start
        values alike).
    step : float, optional
        The unit's communication step (s): every macro step is a multiple of it. Default:
        the FMU's default-experiment step (a default only: FMI lets the importer choose),
        else 1 ms. An FMU that declares ``canHandleVariableCommunicationStepSize="false"``
        is stepped with one constant step; a different one is an error naming it.
    log : tuple of str, optional
        The outputs to log, as ``"fmu.<output>"`` (``"*"``: all); default: all. An output
        neither logged nor linked is not read when only the log would need it (a String
        one is read only when asked for).
    """

    def __init__(self, path, name: str, start_values: dict | None = None,
                 step: float | None = None, log: tuple | None = None):
        self.name = name
        self.path = Path(path)
        self.md = read_fmu(self.path)
        self.start_values = dict(start_values or {})
        where = f"FMU unit {name!r} ({self.path.name})"
        self.where = where
        ins, outs = ports_of(self.md, self.start_values, where, self.path, text=True)
        #: Numeric ports (float64 on the protocol) and String / Binary ones (object arrays
        #: of str / bytes), each in the FMU's order.
        self.inputs = [v for v in ins if not is_text(v)]
        self.outputs = [v for v in outs if not is_text(v)]
        self.text_in = [v for v in ins if is_text(v)]
        self.text_out = [v for v in outs if is_text(v)]
        self.numeric = not (self.text_in or self.text_out)
        every = log is None or "*" in log
        chosen = set() if every else {k[4:] for k in log if k.startswith("fmu.")}
        #: Logged outputs: numeric ones (names), String / Binary ones (their positions).
        self._log_out = [v.name for v in self.outputs if every or v.name in chosen]
        self._log_txt = [j for j, v in enumerate(self.text_out) if every or v.name in chosen]
        self._logs_any = bool(self._log_out or self._log_txt)
        self.clocks = clocks_of(self.md, self.path, where) if self.md.fmiVersion == "3.0" \
            else []
        cs = self.md.coSimulation
        self.can_state = bool(cs.canGetAndSetFMUstate and cs.canSerializeFMUstate)
        self.fmi3 = self.md.fmiVersion == "3.0"
        self.event_mode = self.fmi3 and bool(self.clocks)
        # FMI 3.0 co-simulation has no input derivatives (intermediate updates instead).
        self.can_interpolate = bool(cs.canInterpolateInputs) and not self.fmi3
        if self.clocks and not cs.hasEventMode:
            raise ModelError(f"{where}: it has input clocks but no event mode (hasEventMode "
                             "false), so its clocks cannot be ticked")
        self._in_index = {v.name: v for v in self.inputs}
        self._n_in = sum(v.size for v in self.inputs)
        self._n_out = sum(v.size for v in self.outputs)
        # Where each port's values sit in the flat input / output vectors (made once: the
        # per-step path only copies values).
        self._in_slots, self._in_casts, self._out_slots, k = [], [], [], 0
        for v in self.inputs:
            self._in_slots.append((v.name, slice(k, k + v.size)))
            if v.dtype != np.float64:
                self._in_casts.append((v, slice(k, k + v.size)))
            k += v.size
        k = 0
        for v in self.outputs:
            self._out_slots.append((v.name, slice(k, k + v.size), v.shape))
            k += v.size
        self._in_flat = np.zeros(self._n_in)
        # Output -> the inputs it depends on (<ModelStructure>; none declared: every input).
        self._deps = {}
        for out in self.md.outputs:
            self._deps[out.variable.name] = \
                tuple(v.name for v in ins) if out.dependencies is None else \
                tuple(d.name for d in out.dependencies if d.causality == "input")
        #: Setting inputs can change outputs; if not, outputs read stay valid until a step.
        self._feedthrough = any(self._deps.get(v.name, ()) for v in self.outputs)
        self._y: np.ndarray | None = None
        de = self.md.defaultExperiment
        self._dt = float(step) if step else \
            float(de.stepSize) if de and de.stepSize else 1e-3
        if not self._dt > 0 or not math.isfinite(self._dt):
            raise ModelError(f"{where}: communication step {step!r} must be a positive "
                             "number of seconds")
        #: FMI: canHandleVariableCommunicationStepSize false -> one constant step size.
        self._constant_h = not cs.canHandleVariableCommunicationStepSize
        self._h_first: float | None = None
        self._t0, self._k = 0.0, 0
        # Direct steps: each input's live values [value, has derivatives, d1, d2, t]
        # (DirectStep), the outputs' slots, the stop times of steps that stopped.
        self._lives = {v.name: [0.0, 0.0, 0.0, 0.0, 0.0] for v in self.inputs}
        self._live_list = list(self._lives.values())
        self._direct_out = np.zeros(len(self.outputs))
        self._stops: list[float] = []
        self._direct_made: tuple | None = None      # (instance, direct step function)
        self._logged_t: float | None = None     # time and values of the latest sample
        self._logged_y: np.ndarray | None = None
        self._logged_text: tuple = ()
        self.inst: FmuInstance | None = None
        self.t = 0.0
        self._log_t: list[float] = []
        self._log_y: list[np.ndarray] = []
        self._log_text: list[tuple] = []        # String / Binary outputs per sample
        self._text: tuple | None = None
        self._terminated = False

    # -- protocol -------------------------------------------------------------------------

    def describe(self) -> P.UnitDescription:
        deps = self._deps
        return P.UnitDescription(
            name=self.name,
            inputs=tuple(P.PortInfo(v.name, v.shape) for v in self.inputs + self.text_in),
            outputs=tuple(P.PortInfo(v.name, v.shape) for v in self.outputs + self.text_out),
            feedthrough=tuple((v.name, deps.get(v.name, ()))
                              for v in self.outputs + self.text_out),
            dt=self._dt,
            can_get_set_state=self.can_state,
            # An unlinked input keeps the FMU's value, as FMI importers leave it. The fused
            # step (one message per macro step, Unit.step) packs float64 values only.
            capabilities=(("rollback",) if self.can_state else ()) + (P.OPTIONAL_INPUTS,)
            + ((P.FUSED_STEP,) if self.numeric else ()))

    def initialize(self, t0: float) -> None:
        if self.inst is None:
            self.inst = FmuInstance(self.path, self.md, "cs", self.name, self.event_mode)
            if not self.fmi3:
                self._do_step2 = self.inst.raw("fmi2DoStep")
                self._step_args = (self.inst.component, ctypes.c_double(), ctypes.c_double(),
                                   ctypes.c_int(1))
            self._acc_in = self.inst.groups(self.inputs)
            if len(self._acc_in) == 1 and self._acc_in[0].whole and \
                    self._acc_in[0].view.dtype == np.float64:
                self._in_flat = self._acc_in[0].view    # inputs written straight to C
            self._acc_out = self.inst.groups(self.outputs)
            self._some_groups: dict[tuple, list] = {}      # inputs set by name -> groups
            self._read_out = self._reader()
            self._read_text = self._text_reader()
            self._start = start_value_setter(self.inst, self.md, self.start_values,
                                             self.where)
        else:
            self.inst.call("reset", self.inst.fmu.reset)
        inst, fmu = self.inst, self.inst.fmu
        inst.terminated = self._terminated = False
        self.t = inst.t = self._t0 = t0
        self._k = 0
        self._h_first = None
        self._stops.clear()
        if self.fmi3:
            if any(v.causality == "structuralParameter" for v in self.md.modelVariables):
                inst.call("fmi3EnterConfigurationMode", fmu.enterConfigurationMode)
                self._start("config")
                inst.call("fmi3ExitConfigurationMode", fmu.exitConfigurationMode)
            self._start("init")
            inst.call("fmi3EnterInitializationMode", fmu.enterInitializationMode, None, t0)
            inst.call("fmi3ExitInitializationMode", fmu.exitInitializationMode)
            if self.event_mode:
                # Ticks at or after t0; each is handled when the unit steps from it (with the
                # inputs of that time) or inside a step (with the held ones).
                self._ticks = [c.shift + c.interval * max(0, math.ceil((t0 - c.shift)
                                                                       / c.interval - 1e-9))
                               for c in self.clocks]
                self._event_update([])
        else:
            inst.call("fmi2SetupExperiment", fmu.setupExperiment, None, t0)
            self._start("init")
            inst.call("fmi2EnterInitializationMode", fmu.enterInitializationMode)
            inst.call("fmi2ExitInitializationMode", fmu.exitInitializationMode)
        self._log_t, self._log_y, self._log_text = [], [], []
        self._y = self._text = None
        self._logged_t = None
        self._record()

    def _event_update(self, ticking) -> None:
        """FMI 3.0 event mode at the current time: tick ``ticking`` clocks, update the
        discrete states until stable, back to step mode (a termination request is noted)."""
        inst, fmu = self.inst, self.inst.fmu
        if ticking:
            inst.call("fmi3SetClock", fmu.setClock, [c.vr for c in ticking], [True] * len(ticking))
        for _ in range(1000):
            again, stop, *_ = inst.call("fmi3UpdateDiscreteStates", fmu.updateDiscreteStates)
            if stop:
                self._terminated = True
                break
            if not again:
                break
        else:
            raise SimulationError(f"{self.where}: the event iteration did not settle after "
                                  "1000 updates", t=self.t)
        inst.call("fmi3EnterStepMode", fmu.enterStepMode)

    def set_inputs(self, values: dict, derivatives: dict | None = None) -> None:
        if self.text_in and values:
            values = self._set_text(values)
        if not values:
            return
        if len(values) != len(self.inputs):
            self._set_some(values)
            return
        flat = self._in_flat
        try:
            for name, sl in self._in_slots:
                flat[sl] = values[name].reshape(-1)
        except (KeyError, ValueError, AttributeError):
            self._set_some(values)          # the careful path names what is wrong
            return
        for v, sl in self._in_casts:
            exact_cast(flat[sl], v, self.where)
        self.inst.write(self._acc_in, flat)
        if self._feedthrough:
            self._y = None
        if derivatives and self.can_interpolate:
            self._set_derivatives(derivatives)

    def _set_text(self, values: dict) -> dict:
        """Set the String / Binary inputs among ``values`` (each a ``str`` / ``bytes`` or an
        object array holding one); the numeric ones are returned."""
        inst, f = self.inst, self.inst.fmu
        rest = dict(values)
        for v in self.text_in:
            if v.name not in rest:
                continue
            value = rest.pop(v.name)
            if isinstance(value, np.ndarray):
                if value.size != 1:
                    raise ModelError(f"{self.where}: input {v.name!r} takes one value, got "
                                     f"{value.size}")
                value = value.reshape(-1)[0]
            value = text_value(v, value, f"{self.where}: input")
            if v.type == "String":
                inst.call("setString", f.setString, [v.vr], [value])
            else:
                inst.call("fmi3SetBinary", f.setBinary, [v.vr], [value])
        self._text = None
        return rest

    def _text_now(self) -> tuple:
        """The String / Binary outputs now (``str`` / ``bytes``), read once per step or
        change of inputs."""
        if self._text is None:
            self._text = self._read_text()
        return self._text

    def _text_reader(self):
        """A function returning the String / Binary outputs as a tuple, each read by its FMI
        function through a bare pointer with its arguments made once (fmpy's getString
        costs several times the call)."""
        inst, prefix = self.inst, "fmi3" if self.fmi3 else "fmi2"
        reads = []
        for v in self.text_out:
            vr = (ctypes.c_uint32 * 1)(v.vr)
            one = ctypes.c_size_t(1)
            if v.type == "String":
                name, value = f"{prefix}GetString", (ctypes.c_char_p * 1)()
                args = (inst.component, vr, one, value) + ((one,) if self.fmi3 else ())
                sizes = None
            else:
                name, value = "fmi3GetBinary", (ctypes.c_void_p * 1)()
                sizes = (ctypes.c_size_t * 1)()
                args = (inst.component, vr, one, sizes, value, one)
            reads.append((functools.partial(inst.raw(name), *args), name, value, sizes))

        def read() -> tuple:
            out = []
            for call, name, value, sizes in reads:
                status = call()
                if status > 1:
                    inst.check(name, status)
                if sizes is None:
                    out.append((value[0] or b"").decode("utf-8"))
                else:
                    out.append(ctypes.string_at(value[0], sizes[0]) if sizes[0] else b"")
            return tuple(out)
        return read

    def _set_derivatives(self, derivatives: dict) -> None:
        """First derivatives of the real inputs over the coming step (FMI 2.0
        ``fmi2SetRealInputDerivatives``, when the FMU can interpolate its inputs)."""
        f = self.inst.fmu
        for p, ders in derivatives.items():
            v = self._in_index[p]
            if ders and v.type == "Real":
                self.inst.call("fmi2SetRealInputDerivatives", f.setRealInputDerivatives,
                               [v.vr], [1], [float(np.asarray(ders[0]).reshape(-1)[0])])

    def _set_some(self, values: dict) -> None:
        """Set the inputs in ``values`` only (the others, unconnected, keep their values)."""
        unknown = [p for p in values if p not in self._in_index]
        if unknown:
            raise ModelError(f"{self.where} has no input {unknown[0]!r} (inputs: "
                             f"{', '.join(self._in_index)})")
        names = tuple(values)
        groups = self._some_groups.get(names)
        chosen = [self._in_index[p] for p in names]
        if groups is None:
            groups = self._some_groups[names] = self.inst.groups(chosen)
        parts = []
        for v in chosen:
            val = np.asarray(values[v.name], dtype=np.float64).reshape(-1)
            if val.size != v.size:
                raise ModelError(f"{self.where}: input {v.name!r} takes {v.size} values, "
                                 f"got {val.size}")
            parts.append(exact_cast(val, v, self.where).astype(np.float64))
        self.inst.write(groups, np.concatenate(parts))
        if self._feedthrough:
            self._y = None

    def refresh_outputs(self) -> P.StepDone:
        """Log the outputs for the inputs just set as this time's sample (FMI computes
        outputs on demand, so nothing else is due)."""
        self._record(replace=True)
        return P.StepDone(self.t, False, self._next_tick())

    def _next_tick(self) -> float:
        return min(self._ticks) if self.event_mode and self._ticks else math.inf

    def do_step(self, t: float, h: float) -> P.StepDone:
        # On the unit's grid (every co-simulation step is) the FMU sees t0 + k*dt and m*dt,
        # computed from integer ticks, as the compiled exchange's direct steps do.
        k, m = (t - self._t0) / self._dt, h / self._dt
        if abs(k - round(k)) < 1e-6 and abs(m - round(m)) < 1e-6 and round(m) > 0:
            return self._advance(round(k), round(m))
        return self._step(t, h)

    def _advance(self, k: int, m: int) -> P.StepDone:
        self._k = k + m
        return self._step(self._t0 + k * self._dt, m * self._dt,
                          self._t0 + self._k * self._dt)

    def _step(self, t: float, h: float, t_end: float | None = None) -> P.StepDone:
        """Step ``[t, t + h]``; the time reached is ``t_end`` (the grid's, never
        accumulated) unless the FMU stopped earlier."""
        if self._terminated:
            raise SimulationError(f"{self.where}: stepped after the FMU asked to terminate",
                                  t=t)
        if self._constant_h:
            self._check_constant(t, h)
        if self._logged_t != self.t:
            self._record()          # the step's start, with the inputs just set
        inst = self.inst
        inst.t = t
        t_reached = self._step_fmi3(t, h) if self.fmi3 else self._step_fmi2(t, h)
        if t_end is not None and t_reached == t + h:
            t_reached = t_end
        self.t = inst.t = t_reached
        self._y = self._text = None
        return P.StepDone(t_reached, self._terminated, self._next_tick())

    def _check_constant(self, t: float, h: float) -> None:
        """An FMU that cannot handle a variable communication step gets one step size."""
        if self._h_first is None:
            self._h_first = h
        elif not math.isclose(h, self._h_first, rel_tol=1e-9):
            raise SimulationError(
                f"{self.where}: the FMU declares canHandleVariableCommunicationStepSize="
                f"false, so every step must be {self._h_first:g} s (its first); this one is "
                f"{h:g} s (use a fixed macro step, and end time a multiple of it)", t=t)

    # -- direct steps (the compiled exchange) ---------------------------------------------

    def direct(self) -> DirectStep | None:
        """Direct steps for the compiled exchange (:mod:`cosim.master.compiled`): the same
        calls as the protocol path (``set_inputs``, ``do_step`` / ``refresh_outputs``) without
        request objects, for an FMU with scalar ports, no input clocks and no input
        derivatives. Its numeric ports only: String / Binary inputs keep their values, text
        outputs are logged (the exchange runs only while no text port is linked)."""
        if (self.inst is None or self._terminated or self.event_mode or self.can_interpolate
                or any(v.size != 1 for v in self.inputs + self.outputs)):
            return None
        # An input the exchange does not drive (unconnected) keeps the FMU's value: the live
        # values start as the FMU's current inputs, and an input is set when its value
        # changes.
        if self._direct_made is None or self._direct_made[0] is not self.inst:
            # Made once per instance (the exchange asks at every chunk): the inputs' setters
            # and last values, and the step function bound to them.
            masks = self._stale_masks()
            self._direct_inputs = [(live, _OneInput(self, v), [0.0], masks[v.name])
                                   for v, live in zip(self.inputs, self._live_list)]
            self._direct_made = (self.inst, self._direct_step if self.fmi3
                                 else self._direct_fmi2())
        fn = self._direct_made[1]
        if self.inputs:
            now = self.inst.read_new(self._acc_in, self._n_in)
            for (live, _, last_value, _), value in zip(self._direct_inputs, now):
                live[0] = last_value[0] = float(value)
        return DirectStep((fn, self._direct_out, None, None, None, None),
                          self._k, 0, self._t0, self._dt, self._lives,
                          {v.name: j for j, v in enumerate(self.outputs)}, self._stops,
                          generated=False)

    def _stale_masks(self) -> dict:
        """Input -> bit mask of the output reads (:attr:`_acc_out`, bit ``i`` the ``i``-th
        FMI call) holding an output that depends on that input (<ModelStructure>): only
        those are read again when it changes at the same time."""
        group_of = {}
        for i, g in enumerate(self._acc_out):
            pos = range(g.pos.start, g.pos.stop) if isinstance(g.pos, slice) else g.pos
            group_of.update((int(p), i) for p in pos)
        everything = tuple(v.name for v in self.inputs)
        masks = dict.fromkeys(everything, 0)
        for j, out in enumerate(self.outputs):
            for name in self._deps.get(out.name, everything):
                if name in masks:           # (text inputs are not set on this path)
                    masks[name] |= 1 << group_of[j]
        for out in self.text_out:          # (String / Binary outputs: _TEXT_BIT)
            for name in self._deps.get(out.name, everything):
                if name in masks:
                    masks[name] |= _TEXT_BIT
        return masks

    def _direct_fmi2(self):
        """:meth:`_direct_step` for FMI 2.0 units as a function generated for this unit, its
        calls bound once: each input that changed set (one call each, unrolled), the output
        reads holding outputs of those inputs done again (:meth:`_stale_masks`),
        ``fmi2DoStep`` with the times of the unit's ticks, the outputs read per FMI call
        (:meth:`_reader`) and written to the exchange's slots through a ctypes view (numpy
        converts a tuple 2.5x slower); the same calls, values and samples."""
        env = {"unit": self, "inst": self.inst, "stops": self._stops,
               "read_out": self._read_out, "record": self._record, "do_step": self._do_step2,
               "args": self._step_args, "c_t": self._step_args[1],
               "c_h": self._step_args[2], "t0": self._t0, "dt": self._dt,
               "SimulationError": SimulationError, "TEXT": _TEXT_BIT,
               "Sc": (ctypes.c_double * len(self.outputs)).from_buffer(self._direct_out)}
        lines = ["def step(k, k_stop, last, S, D, X, R, G, k_full, k_log):", "    stale = 0"]
        for i, (live, one, last_value, mask) in enumerate(self._direct_inputs):
            env[f"L{i}"], env[f"P{i}"] = live, last_value
            lines += [f"    v = L{i}[0]", f"    if v != P{i}[0]:"]
            g = one.group
            if one.variable.dtype == np.float64:     # (others: checked and cast, _OneInput)
                env[f"B{i}"], env[f"SET{i}"], env[f"FAIL{i}"] = g.buf, g.set, one.failed
                lines += [f"        B{i}[0] = v", f"        s = SET{i}()",
                          "        if s > 1:", f"            FAIL{i}(s)"]
            else:
                env[f"W{i}"] = one.write
                lines.append(f"        W{i}(v)")
            lines += [f"        P{i}[0] = v", f"        stale |= {mask}"]
        lines += ["    if stale:", "        if stale & TEXT:", "            unit._text = None",
                  "        y = unit._y", "        if y is not None:"]
        if self._parts:
            for i, part in enumerate(self._parts):
                env[f"part{i}"] = part
                lines += [f"            if stale & {1 << i}:", f"                y = part{i}(y)"]
            lines.append("            unit._y = y")
        else:
            lines.append("            unit._y = None")
        lines.append(_DIRECT_FMI2_TAIL)
        exec(compile("\n".join(lines), f"<direct step of FMU unit {self.name!r}>", "exec"),
             env)
        return env["step"]

    def _direct_step(self, k, k_stop, last, S, D, X, R, G, k_full, k_log):
        """The generated-function signature of :class:`DirectStep`: inputs from the live
        values, then a step to tick ``k_full`` (or, with ``k_full == k``, a refresh)."""
        changed = 0
        for live, one, last_value, mask in self._direct_inputs:
            value = live[0]
            if value != last_value[0]:
                # Only inputs that changed are set (an unlinked one never does), each with
                # its own FMI call on a one-value buffer made once.
                one.write(value)
                last_value[0] = value
                changed |= mask | 1
        if changed and self._feedthrough:
            self._y = None
        if changed & _TEXT_BIT:
            self._text = None
        if k_full > k:
            done = self._advance(k, k_full - k)
            if done.event:
                self._stops.append(done.t_reached)
        else:
            self._record(replace=True)
        S[:] = self._outputs_now()
        return k_full, last

    def settle(self, k: int, last: int, stepped: int, derivatives: dict) -> None:
        """After direct steps: the unit is at tick ``k`` (kept by the steps themselves)."""
        self._k = k

    def _step_fmi2(self, t: float, h: float) -> float:
        args = self._step_args
        args[1].value = t
        args[2].value = h
        status = self._do_step2(*args)
        return t + h if status <= 1 else self._not_ok2(t, h, status)

    def _not_ok2(self, t: float, h: float, status: int) -> float:
        """After ``fmi2DoStep`` returned ``status`` (worse than warning): the time the FMU
        reached if it asked to terminate, else its error."""
        inst, fmu = self.inst, self.inst.fmu
        if status != DISCARD:
            inst.check("fmi2DoStep", status)
        from fmpy.fmi2 import fmi2LastSuccessfulTime, fmi2Terminated
        if not inst.ask(fmu.getBooleanStatus, fmi2Terminated):
            inst.check("fmi2DoStep", status)        # a refused step, not a stop
        self._terminated = True
        inst.log.clear()        # the FMU's own words on why it stopped: not an error
        return inst.call("fmi2GetRealStatus", fmu.getRealStatus, fmi2LastSuccessfulTime)

    def _due(self, t: float) -> list:
        """The clocks whose next tick is at ``t`` (within rounding)."""
        return [c for c, tt in zip(self.clocks, self._ticks)
                if math.isclose(tt, t, rel_tol=1e-12, abs_tol=1e-15)]

    def _tick(self, t: float, ticking) -> None:
        """Event mode at ``t``: tick ``ticking`` (or handle an event the FMU asked for)."""
        self.inst.call("fmi3EnterEventMode", self.inst.fmu.enterEventMode)
        self._event_update(ticking)
        self._ticks = [tt + c.interval if c in ticking else tt
                       for tt, c in zip(self._ticks, self.clocks)]

    def _step_fmi3(self, t: float, h: float) -> float:
        """doStep over ``[t, t + h]``, split at the clock ticks inside it: a tick at ``t``
        is handled first (inputs just set), one inside the step with the held inputs, one
        at ``t + h`` when the unit steps from there."""
        inst, fmu = self.inst, self.inst.fmu
        t0, t_end = t, t + h
        tol = 1e-12 * max(1.0, abs(t_end))
        if self.event_mode and self._due(t):
            self._tick(t, self._due(t))
            if self._terminated:
                return t
        while True:
            tick = self._next_tick()
            inside = tick < t_end - tol
            step = (tick - t) if inside else h if t == t0 else t_end - t
            event, stop, early, last = inst.call("fmi3DoStep", fmu.doStep, t, step)
            reached = last if early else tick if inside else t_end
            if stop:
                self._terminated = True
                return reached
            if self.event_mode and (event or (inside and reached == tick)):
                self._tick(reached, self._due(reached))
                if self._terminated:
                    return reached
            if not inside and not early:
                return t_end
            t = reached

    def text_outputs(self) -> dict:
        """The FMU's String (``str``) and Binary (``bytes``) outputs now, by name (they are
        not numeric ports)."""
        return read_text(self.inst, self.md)

    def get_outputs(self) -> dict:
        y = np.array(self._outputs_now(), dtype=np.float64)
        out = {name: y[sl].reshape(shape) for name, sl, shape in self._out_slots}
        if self.text_out:
            for v, value in zip(self.text_out, self._text_now()):
                out[v.name] = _text_array(value)
        return out

    def _outputs_now(self):
        """The outputs as one flat sequence of floats (a tuple or a float64 vector,
        :meth:`_reader`), read once per step or change of inputs."""
        if self._y is None:
            self._y = self._read_out()
        return self._y

    def _reader(self):
        """A function returning the outputs as one flat sequence of floats: for a few
        scalar values, a tuple read element by element from each FMI call's buffer by a
        function generated for this unit (numpy's indexing and a Python loop cost more than
        the FMI calls there), else a new float64 vector (:meth:`FmuInstance.read_new`)."""
        inst, groups, n = self.inst, self._acc_out, self._n_out
        self._parts = None
        if n > 16:
            return lambda: inst.read_new(groups, n)
        if not n:
            return tuple
        slots = [None] * n
        env: dict = {"_fail": self._read_failed}
        for i, g in enumerate(groups):
            env[f"g{i}"], env[f"b{i}"] = g.get, g.buf
            pos = range(g.pos.start, g.pos.stop) if isinstance(g.pos, slice) else \
                [int(p) for p in g.pos]
            # Floats only (numpy converts a tuple of mixed ints and floats 6x slower).
            wrap = "{}" if g.view.dtype == np.float64 else "float({})"
            for j, p in enumerate(pos):
                slots[p] = wrap.format(f"b{i}[{j}]")
        calls = "; ".join(f"s{i} = g{i}()" for i in range(len(groups)))
        bad = " or ".join(f"s{i} > 1" for i in range(len(groups)))
        statuses = ", ".join(f"s{i}" for i in range(len(groups)))
        src = (f"def read():\n    {calls}\n    if {bad}:\n        _fail(({statuses},))\n"
               f"    return ({', '.join(slots)},)\n")
        # Per FMI call, the outputs read again with that call only, the others as they were
        # (a refresh after inputs that only some outputs depend on: <ModelStructure>).
        for i in range(len(groups)):
            fresh = [e if e.startswith((f"b{i}[", f"float(b{i}[")) else f"y[{p}]"
                     for p, e in enumerate(slots)]
            src += (f"def part{i}(y):\n    s = g{i}()\n    if s > 1:\n"
                    f"        _fail(({', '.join('s' if j == i else '0' for j in range(len(groups)))},))\n"
                    f"    return ({', '.join(fresh)},)\n")
        exec(compile(src, f"<outputs of FMU unit {self.name!r}>", "exec"), env)
        self._parts = [env[f"part{i}"] for i in range(len(groups))]
        return env["read"]

    def _read_failed(self, statuses) -> None:
        """Raise the error of the first output read that failed."""
        for g, status in zip(self._acc_out, statuses):
            self.inst.check(g.get_name, status)

    def get_state(self) -> P.UnitState:
        if not self.can_state:
            raise UnsupportedError(
                f"{self.where} cannot save its state "
                "(canGetAndSetFMUstate/canSerializeFMUstate is false), so it cannot be rolled "
                "back: iterated couplings, adaptive macro steps and checkpoints are refused "
                "for it; use a fixed macro step without iteration")
        inst, f = self.inst, self.inst.fmu
        names = (("fmi3GetFMUState", f.getFMUState), ("fmi3SerializeFMUState",
                 f.serializeFMUState), ("fmi3FreeFMUState", f.freeFMUState)) if self.fmi3 \
            else (("fmi2GetFMUstate", f.getFMUstate), ("fmi2SerializeFMUstate",
                  f.serializeFMUstate), ("fmi2FreeFMUstate", f.freeFMUstate))
        st = inst.call(*names[0])
        data = inst.call(*names[1], st)
        inst.call(*names[2], st)
        return P.UnitState(self.t, {"fmu": bytes(data), "t": self.t,
                                    "logs": len(self._log_t),
                                    "ticks": list(getattr(self, "_ticks", [])), "k": self._k,
                                    "logged_t": self._logged_t,
                                    "logged_y": None if self._logged_y is None else
                                    np.array(self._logged_y, dtype=np.float64),
                                    "logged_text": list(self._logged_text),
                                    "terminated": self._terminated})

    def set_state(self, state: P.UnitState) -> None:
        if not self.can_state:
            self.get_state()                # raises the explanation
        inst, f = self.inst, self.inst.fmu
        names = (("fmi3DeserializeFMUState", f.deserializeFMUState), ("fmi3SetFMUState",
                 f.setFMUState), ("fmi3FreeFMUState", f.freeFMUState)) if self.fmi3 \
            else (("fmi2DeSerializeFMUstate", f.deSerializeFMUstate), ("fmi2SetFMUstate",
                  f.setFMUstate), ("fmi2FreeFMUstate", f.freeFMUstate))
        st = inst.call(*names[0], state.data["fmu"])
        inst.call(*names[1], st)
        inst.call(*names[2], st)
        self.t = inst.t = state.data["t"]
        self._y = self._text = None
        self._ticks = list(state.data["ticks"])
        self._k = state.data["k"]
        self._logged_t = state.data["logged_t"]
        self._logged_y = state.data["logged_y"]
        self._logged_text = tuple(state.data["logged_text"])
        self._terminated = state.data["terminated"]
        n = state.data["logs"]
        del self._log_t[n:], self._log_y[n:], self._log_text[n:]

    def _record(self, replace: bool = False) -> None:
        """Log the outputs now. A step's end is logged by the refresh at that time or when
        the next step starts (with the inputs of that time), as a LocalUnit logs its ticks;
        ``replace`` replaces a sample of the same time not yet collected."""
        if not self._logs_any:
            return
        y = self._outputs_now()
        text = self._text_now() if self._log_txt else ()
        if replace and self._logged_t == self.t:
            if self._log_t and self._log_t[-1] == self.t:
                self._log_y[-1] = y
                if text:
                    self._log_text[-1] = text
                return
            if np.asarray(y, dtype=np.float64).tobytes() == \
                    np.asarray(self._logged_y, dtype=np.float64).tobytes() and \
                    text == self._logged_text:
                return              # collected already, and unchanged
        self._logged_t, self._logged_y, self._logged_text = self.t, y, text
        self._log_t.append(self.t)
        self._log_y.append(y)
        if text:
            self._log_text.append(text)

    def collect_logs(self) -> P.LogBatch:
        if self._terminated and self._logged_t != self.t and self.inst is not None:
            self._record()          # the run ends where the FMU stopped: its last sample
        t = np.array(self._log_t, dtype=np.float64)
        y = np.array(self._log_y, dtype=np.float64).reshape(len(t), -1) if self._log_y else \
            np.zeros((0, self._n_out))
        out, k, chosen = {}, 0, set(self._log_out)
        for v in self.outputs:
            if v.name in chosen:
                out[f"fmu.{v.name}"] = (t, y[:, k:k + v.size])
            k += v.size
        for j in self._log_txt:
            column = np.empty((len(t), 1), dtype=object)
            column[:, 0] = [sample[j] for sample in self._log_text]
            out[f"fmu.{self.text_out[j].name}"] = (t, column)
        self._log_t, self._log_y, self._log_text = [], [], []
        return P.LogBatch(out)

    def terminate(self) -> None:
        if self.inst is not None:
            inst, self.inst = self.inst, None
            inst.free()
