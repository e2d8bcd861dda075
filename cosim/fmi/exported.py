"""The runtime of an exported FMU (:mod:`cosim.fmi.export`): the subsystem as a
:class:`~cosim.master.local_unit.LocalUnit`, driven by the FMU's generated slave (FMI 2.0 or
3.0, pythonfmu or pythonfmu3).

The FMU carries this module with the rest of the engine in its resources and runs in a
Python that may have nothing of cosim installed: block types are registered here from the
list the export wrote (no package entry points), the subsystem is read from its model file
text, and every error is raised as :class:`ExportError` whose message the slave hands to the
importer's logger. Tunable parameters set between steps are applied at the next step: the
subsystem is rebuilt with the new values and the unit's state moved into it (the values
change, the state does not).
"""

from __future__ import annotations

import importlib
import tempfile
from pathlib import Path

import numpy as np

__all__ = ["ExportError", "ExportedUnit"]


class ExportError(Exception):
    """What the FMU tells its importer (through the logger, with status error)."""


class ExportedUnit:
    """The subsystem behind an exported FMU.

    Parameters
    ----------
    model_text : str
        The model file of a model holding the subsystem alone (its parameters included).
    types : list of (str, str, str)
        ``(type name, module, class name)`` of every block type the subsystem uses.
    dt : float
        The subsystem's step (s); every communication step is a multiple of it.
    inputs, outputs : list of str
        Port names (scalar).
    parameters : dict of str to float
        The FMU's parameters and their start values.
    tunable : set of str
        The parameters that may change after initialization.
    codec : (callable, callable)
        ``encode``, ``decode`` of cosim's msgpack codec (``cluster.codec``, carried by the
        FMU; given by the slave, as the engine imports nothing of ``cluster``).
    """

    def __init__(self, model_text: str, types, dt: float, inputs, outputs, parameters: dict,
                 tunable, codec):
        self.model_text = model_text
        self.dt = dt
        self.inputs, self.outputs = list(inputs), list(outputs)
        self.values = {n: 0.0 for n in self.inputs + self.outputs}
        self.params = dict(parameters)
        self.tunable = set(tunable)
        self.codec = codec
        self.t0 = 0.0
        self.unit = None
        self._retune = False
        self._stale = False         # inputs set since the outputs were computed
        _register(types)

    # -- values set and read by the importer ---------------------------------------------

    def set_input(self, name: str, value: float) -> None:
        self.values[name] = float(value)
        self._stale = True

    def output(self, name: str) -> float:
        """An output, consistent with the inputs set (FMI: outputs that depend directly on
        inputs follow them without a step)."""
        if self._stale and self.unit is not None:
            self._guard("refreshing the outputs", self._refresh)
        return self.values[name]

    def _refresh(self) -> None:
        self.unit.set_inputs({n: np.array([self.values[n]]) for n in self.inputs})
        self.unit.refresh_outputs()
        for n, v in self.unit.get_outputs().items():
            self.values[n] = float(v[0])
        self._stale = False

    def set_parameter(self, name: str, value: float) -> None:
        """Set a parameter: before initialization any; after, only a tunable one (applied at
        the next step)."""
        if self.unit is not None:
            if name not in self.tunable:
                raise ExportError(f"parameter {name!r} is fixed: it can be set only before "
                                  "initialization (tunable parameters: "
                                  f"{', '.join(sorted(self.tunable)) or 'none'})")
            self._retune = self._retune or value != self.params[name]
        self.params[name] = float(value)

    # -- life cycle ------------------------------------------------------------------------

    def _build(self):
        from cosim.config import SimulationConfig
        from cosim.master.local_unit import LocalUnit
        from cosim.model.evaluate import evaluate
        from cosim.modelfile import load
        from cosim.run.atomic import inner_config
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "unit.yaml"
            path.write_text(self.model_text)
            model = load(str(path))
        model.parameters.update(self.params)
        evaluate(model)
        (sub,) = model.blocks
        return LocalUnit(sub, inner_config(sub, SimulationConfig(dt=self.dt, t_end=0.0)))

    def initialize(self, t0: float) -> None:
        """Build and initialize the subsystem at ``t0`` with the parameters set so far."""
        self.t0 = t0
        self.unit = self._guard("initialization", self._build)
        self._guard("initialization", self.unit.initialize, t0)
        self._guard("initialization", self._refresh)     # the inputs set so far
        self._retune = False

    def _apply_tuning(self) -> None:
        """Rebuild the subsystem with the tuned values and move the unit's state into it."""
        state = self.unit.get_state()
        unit = self._build()
        unit.initialize(self.t0)
        unit.set_state(state)
        self.unit.terminate()
        self.unit = unit
        self._retune = False

    def step(self, t: float, h: float) -> None:
        """One communication step ``[t, t + h]`` (a multiple of the subsystem's step)."""
        steps = h / self.dt
        if h <= 0 or abs(steps - round(steps)) > 1e-9 * max(1.0, steps):
            raise ExportError(f"doStep at t={t:g}: the step size {h:g} s is not a multiple of "
                              f"this FMU's step {self.dt:g} s (use a multiple of {self.dt:g})")
        if self._retune:
            self._guard(f"doStep at t={t:g}: applying tuned parameters", self._apply_tuning)
        self.unit.set_inputs({n: np.array([self.values[n]]) for n in self.inputs})
        self._guard(f"doStep at t={t:g}", self.unit.do_step, t, h)
        for n, v in self.unit.get_outputs().items():
            self.values[n] = float(v[0])
        self._stale = False

    def terminate(self) -> None:
        if self.unit is not None:
            self.unit.terminate()

    @staticmethod
    def _guard(what: str, fn, *args):
        try:
            return fn(*args)
        except ExportError:
            raise
        except Exception as err:  # noqa: BLE001 - every failure reaches the importer's log
            raise ExportError(f"{what}: {type(err).__name__}: {err}") from err

    # -- FMU state (msgpack through the carried codec, never pickle) -------------------------

    def get_state(self) -> dict:
        import base64
        return {"unit": base64.b64encode(self.codec[0](self.unit.get_state())).decode("ascii"),
                "values": dict(self.values), "params": dict(self.params),
                "retune": self._retune, "stale": self._stale}

    def set_state(self, state: dict) -> None:
        import base64
        if state["params"] != self.params:
            self.params = dict(state["params"])
            self.unit = self._build()
            self.unit.initialize(self.t0)
        self.unit.set_state(self.codec[1](base64.b64decode(state["unit"])))
        self.values.update(state["values"])     # in place: the slave's getters hold it
        self._retune = state["retune"]
        self._stale = state.get("stale", False)


def _register(types) -> None:
    """Make the subsystem's block types known to model files without entry points (a Python
    without cosim installed); where the installed library already knows them, nothing."""
    from cosim.model.registry import known, register_block_type
    have = known()
    for type_name, module, cls_name in types:
        cls = getattr(importlib.import_module(module), cls_name)
        if have.get(type_name) is not cls:
            register_block_type(cls, name=type_name)
