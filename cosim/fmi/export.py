"""Export an atomic subsystem as an FMI 2.0 co-simulation FMU (``cosim export-fmu``).

The FMU is built with pythonfmu from a generated slave: it embeds the subsystem as a model
file (with the model's parameters) and runs it with cosim's own :class:`~cosim.master.units.LocalUnit`
— so the FMU computes exactly what the unit computes natively. Its ports are the subsystem's
scalar Inport / Outport names. The FMU runs wherever cosim is importable (a Python FMU). It
can get, set and serialize its state (the unit's own snapshot, msgpack-encoded by
:mod:`cluster.codec`), so a master can roll it back: iterate it, adapt its macro step,
checkpoint it.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from cosim.errors import ModelError

__all__ = ["export_fmu", "main"]

_SLAVE = '''
from pythonfmu import DefaultExperiment, Fmi2Causality, Fmi2Slave, Real

MODEL = {model!r}
INPUTS = {inputs!r}
OUTPUTS = {outputs!r}


class {cls}(Fmi2Slave):
    author = "cosim"
    description = "cosim subsystem {name} exported as an FMU"
    default_experiment = DefaultExperiment(0.0, 1.0, {dt!r})

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._values = {{n: 0.0 for n in INPUTS + OUTPUTS}}
        self._t0 = 0.0
        self._unit = None
        for n in INPUTS:
            self.register_variable(Real(n, causality=Fmi2Causality.input, start=0.0,
                                        getter=lambda n=n: self._values[n],
                                        setter=lambda v, n=n: self._values.__setitem__(n, v)))
        for n in OUTPUTS:
            self.register_variable(Real(n, causality=Fmi2Causality.output,
                                        getter=lambda n=n: self._values[n]))

    def setup_experiment(self, start_time, stop_time=None, tolerance=None):
        self._t0 = start_time

    def exit_initialization_mode(self):
        import tempfile
        from pathlib import Path
        from cluster.server import units_from_file
        path = Path(tempfile.mkdtemp()) / "unit.yaml"
        path.write_text(MODEL)
        (self._unit,) = units_from_file(str(path)).values()
        self._unit.initialize(self._t0)
        self._exchange()

    def _exchange(self):
        import numpy as np
        self._unit.set_inputs({{n: np.array([self._values[n]]) for n in INPUTS}})
        for n, v in self._unit.get_outputs().items():
            self._values[n] = float(v[0])

    def do_step(self, current_time, step_size):
        import numpy as np
        self._unit.set_inputs({{n: np.array([self._values[n]]) for n in INPUTS}})
        self._unit.do_step(current_time, step_size)
        for n, v in self._unit.get_outputs().items():
            self._values[n] = float(v[0])
        return True

    # FMU state: pythonfmu keeps what these return and serializes it as JSON, so the unit's
    # snapshot travels as base64 of its msgpack encoding (never pickle).
    def _get_fmu_state(self):
        import base64
        from cluster.codec import encode
        return {{"unit": base64.b64encode(encode(self._unit.get_state())).decode("ascii"),
                 "values": dict(self._values)}}

    def _set_fmu_state(self, state):
        import base64
        from cluster.codec import decode
        self._unit.set_state(decode(base64.b64decode(state["unit"])))
        self._values = dict(state["values"])
'''


def export_fmu(model, subsystem: str, out: str) -> Path:
    """Write atomic subsystem ``subsystem`` of ``model`` (a Model or a model file) as an FMU.

    Returns the path of the ``.fmu``.
    """
    from cosim import Model, SimulationConfig
    from cosim.model.diagram import Subsystem
    if not isinstance(model, Model):
        model = Model.from_yaml(model)
    sub = model[subsystem] if subsystem in model else None
    if not isinstance(sub, Subsystem) or not sub.atomic:
        raise ModelError(f"{subsystem!r} is not a top-level atomic subsystem of model "
                         f"{model.name!r}")
    if sub.dt is None:
        raise ModelError(f"subsystem {subsystem!r} needs its own dt to be exported")
    scalar = [b for b in sub.blocks if getattr(b, "shape", (1,)) != (1,)]
    if scalar:
        raise ModelError(f"FMU export supports scalar ports only; {scalar} are not")
    wrapper = Model(f"{subsystem}_fmu", parameters=dict(model.parameters))
    wrapper.blocks.append(sub)
    text = wrapper.to_yaml(simulation=SimulationConfig(dt=sub.dt, t_end=0.0))
    cls = "".join(part.capitalize() for part in subsystem.split("_")) or "Unit"
    source = _SLAVE.format(model=text, inputs=list(sub.input_names),
                           outputs=list(sub.output_names), cls=cls, name=subsystem,
                           dt=float(sub.dt))
    out_path = Path(out)
    with tempfile.TemporaryDirectory(prefix="cosim-fmu-build-") as d:
        script = Path(d) / f"{cls}.py"
        script.write_text(textwrap.dedent(source))
        res = subprocess.run([sys.executable, "-m", "pythonfmu", "build", "-f", str(script),
                              "-d", d, "--handle-state", "--serialize-state"],
                             capture_output=True, text=True)
        built = Path(d) / f"{cls}.fmu"
        if res.returncode != 0 or not built.exists():
            raise ModelError(f"building the FMU failed: {res.stderr or res.stdout}")
        out_path.parent.mkdir(parents=True, exist_ok=True)
        out_path.write_bytes(built.read_bytes())
    return out_path


def main(argv=None) -> int:
    """``cosim export-fmu MODEL --subsystem NAME -o NAME.fmu``."""
    ap = argparse.ArgumentParser(prog="cosim export-fmu",
                                 description="Export an atomic subsystem as an FMI 2.0 "
                                             "co-simulation FMU (needs pythonfmu).")
    ap.add_argument("model", help="model file (.yaml)")
    ap.add_argument("--subsystem", required=True, help="name of a top-level atomic subsystem")
    ap.add_argument("-o", "--out", required=True, help="the .fmu to write")
    args = ap.parse_args(argv)
    try:
        path = export_fmu(args.model, args.subsystem, args.out)
    except (ModelError, OSError) as err:
        print(f"cosim export-fmu: error: {err}", file=sys.stderr)
        return 2
    print(f"wrote {path}")
    return 0
