"""Export an atomic subsystem as a stand-alone FMI 2.0 co-simulation FMU (``cosim
export-fmu``).

The FMU is built with pythonfmu from a generated slave: it embeds the subsystem as a model
file and runs it with cosim's own :class:`~cosim.master.local_unit.LocalUnit` — so the FMU computes
exactly what the unit computes natively. It carries the engine it runs (``cosim``, ``blocks``
and the codec, as sources in its resources), so it runs in a Python without cosim. Its ports
are the subsystem's scalar Inport / Outport names, the model's parameters are FMI parameters,
``<ModelStructure>`` declares the outputs' direct dependencies. It can get, set and serialize
its state (the unit's own snapshot, msgpack-encoded by the codec), so a master can roll it
back: iterate it, adapt its macro step, checkpoint it.
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
import sys
from pathlib import Path

from pythonfmu import DefaultExperiment, Fmi2Causality, Fmi2Slave, Fmi2Variability, Real
from pythonfmu.enums import Fmi2Status

MODEL = {model!r}
INPUTS = {inputs!r}
OUTPUTS = {outputs!r}
PARAMETERS = {parameters!r}
DT = {dt!r}


class {cls}(Fmi2Slave):
    author = "cosim"
    description = "cosim subsystem {name} exported as an FMU"
    default_experiment = DefaultExperiment(0.0, {t_end!r}, DT)

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        # The cosim engine this FMU runs is its own copy, in its resources: first on the path.
        if self.resources and self.resources not in sys.path:
            sys.path.insert(0, self.resources)
        # pythonfmu's library would corrupt the importer's heap at exit (an abort after the
        # run): the carried cosim resets its state first, in a Python importer.
        from cosim.fmi.pythonfmu_exit import release_at_exit
        release_at_exit()
        self._values = {{n: 0.0 for n in INPUTS + OUTPUTS}}
        self._params = dict(PARAMETERS)
        self._t0 = 0.0
        self._unit = None
        for n in INPUTS:
            self.register_variable(Real(n, causality=Fmi2Causality.input, start=0.0,
                                        getter=lambda n=n: self._values[n],
                                        setter=lambda v, n=n: self._values.__setitem__(n, v)))
        for n in OUTPUTS:
            self.register_variable(Real(n, causality=Fmi2Causality.output,
                                        getter=lambda n=n: self._values[n]))
        for n, v in PARAMETERS.items():
            self.register_variable(Real(n, causality=Fmi2Causality.parameter,
                                        variability=Fmi2Variability.fixed, start=v,
                                        getter=lambda n=n: self._params[n],
                                        setter=lambda v, n=n: self._params.__setitem__(n, v)))

    def setup_experiment(self, start_time, stop_time=None, tolerance=None):
        self._t0 = start_time

    def exit_initialization_mode(self):
        import tempfile
        from cosim.config import SimulationConfig
        from cosim.master.local_unit import LocalUnit
        from cosim.model.evaluate import evaluate
        from cosim.modelfile import load
        from cosim.run.atomic import inner_config
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "unit.yaml"
            path.write_text(MODEL)
            model = load(str(path))
        model.parameters.update(self._params)
        evaluate(model)
        (sub,) = model.blocks
        self._unit = LocalUnit(sub, inner_config(sub, SimulationConfig(dt=DT, t_end=0.0)))
        self._unit.initialize(self._t0)
        self._exchange()

    def _exchange(self):
        import numpy as np
        self._unit.set_inputs({{n: np.array([self._values[n]]) for n in INPUTS}})
        for n, v in self._unit.get_outputs().items():
            self._values[n] = float(v[0])

    def do_step(self, current_time, step_size):
        import numpy as np
        steps = step_size / DT
        if step_size <= 0 or abs(steps - round(steps)) > 1e-9 * max(1.0, steps):
            msg = (f"doStep at t={{current_time:g}}: the step size {{step_size:g}} s is not a "
                   f"multiple of this FMU's step {{DT:g}} s (use a multiple of {{DT:g}})")
            # The reason goes to the importer's logger (when its logging is on for
            # logStatusError) as an error. The step fails with fmi2Fatal: pythonfmu answers
            # any exception so, and its other answer, fmi2Discard for False, reads as the
            # FMU asking to terminate (fmi2GetBooleanStatus(fmi2Terminated) is then true),
            # which a master would take for a clean stop at current_time.
            self.log(msg, Fmi2Status.error, "logStatusError")
            raise ValueError(msg)
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


def _payload(d: Path) -> list[Path]:
    """The code an exported FMU carries in its resources: the cosim engine, the block
    library and the codec (``cluster/codec.py`` with an empty package), sources only."""
    import importlib.util
    import shutil

    def source(name: str) -> Path:
        # Located, not imported: the exported FMU carries these files (cosim imports
        # neither blocks nor cluster).
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            raise ModelError(f"FMU export needs the {name!r} package's sources to carry")
        return Path(spec.origin)

    out = []
    for pkg in ("cosim", "blocks"):
        src = source(pkg).parent
        dst = d / pkg
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        out.append(dst)
    cl = d / "cluster"
    cl.mkdir(parents=True)
    (cl / "__init__.py").write_text('"""The codec of cosim\'s cluster package, carried by an '
                                    'exported FMU."""\n')
    shutil.copy(source("cluster").parent / "codec.py", cl / "codec.py")
    out.append(cl)
    return out


def _model_structure(fmu: Path, outputs: list[str], deps: dict) -> None:
    """Rewrite ``<ModelStructure>`` of the built FMU: each output with the inputs it depends
    on directly, and the outputs as initial unknowns (pythonfmu lists none)."""
    import re
    import zipfile
    with zipfile.ZipFile(fmu) as z:
        items = {n: z.read(n) for n in z.namelist()}
    xml = items["modelDescription.xml"].decode("utf-8")
    index = {m.group(1): i + 1 for i, m in enumerate(
        re.finditer(r'<ScalarVariable[^>]*\bname="([^"]+)"', xml))}

    def unknowns(names):
        return "".join(
            f'<Unknown index="{index[n]}" dependencies="'
            + " ".join(str(index[i]) for i in deps.get(n, ()))
            + '"/>' for n in names)
    structure = (f"<ModelStructure><Outputs>{unknowns(outputs)}</Outputs>"
                 f"<InitialUnknowns>{unknowns(outputs)}</InitialUnknowns></ModelStructure>")
    xml = re.sub(r"<ModelStructure\s*/>|<ModelStructure>.*?</ModelStructure>",
                 lambda _: structure, xml, flags=re.S)
    items["modelDescription.xml"] = xml.encode("utf-8")
    with zipfile.ZipFile(fmu, "w", zipfile.ZIP_DEFLATED) as z:
        for n, data in items.items():
            z.writestr(n, data)


def export_fmu(model, subsystem: str, out: str, t_end: float | None = None) -> Path:
    """Write atomic subsystem ``subsystem`` of ``model`` (a Model or a model file) as a
    stand-alone FMI 2.0 co-simulation FMU.

    The FMU carries the cosim engine, the block library and the codec in its resources, so
    it runs in a Python that has numpy, scipy, msgpack and pythonfmu (its runtime) but not
    cosim. The model's parameters are FMI parameters (fixed: set before initialization);
    ``<ModelStructure>`` declares each output's direct dependencies; the default experiment
    has the subsystem's step and ``t_end`` (default: the model file's, else 1 s). A step
    size that is not a multiple of the subsystem's step fails ``fmi2DoStep`` (``fmi2Fatal``,
    pythonfmu's status for an error raised in Python); the reason is logged with status
    ``fmi2Error`` in category ``logStatusError``.

    Returns the path of the ``.fmu``.
    """
    from cosim import Model, SimulationConfig
    from cosim.master.local_unit import LocalUnit
    from cosim.model.diagram import Subsystem
    from cosim.model.evaluate import evaluate
    from cosim.run.atomic import inner_config
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
    bad = [k for k, v in model.parameters.items() if not isinstance(v, (int, float))]
    if bad:
        raise ModelError(f"FMU export: model parameters {bad} are not numbers; FMI "
                         "parameters of the FMU are reals")
    if t_end is None:
        sim = getattr(model, "simulation", None)
        t_end = float(sim.t_end) if sim is not None and sim.t_end else 1.0
    wrapper = Model(f"{subsystem}_fmu", parameters=dict(model.parameters))
    wrapper.blocks.append(sub)
    text = wrapper.to_yaml(simulation=SimulationConfig(dt=sub.dt, t_end=0.0))
    # Direct dependencies of the outputs, from the unit itself.
    probe = Model.from_yaml(text)
    evaluate(probe)
    desc = LocalUnit(probe.blocks[0], inner_config(
        probe.blocks[0], SimulationConfig(dt=sub.dt, t_end=0.0))).describe()
    deps = dict(desc.feedthrough)
    cls = "".join(part.capitalize() for part in subsystem.split("_")) or "Unit"
    source = _SLAVE.format(model=text, inputs=list(sub.input_names),
                           outputs=list(sub.output_names), cls=cls, name=subsystem,
                           dt=float(sub.dt), t_end=float(t_end),
                           parameters={k: float(v) for k, v in model.parameters.items()})
    out_path = Path(out)
    with tempfile.TemporaryDirectory(prefix="cosim-fmu-build-") as d:
        script = Path(d) / f"{cls}.py"
        script.write_text(textwrap.dedent(source))
        payload = _payload(Path(d) / "payload")
        res = subprocess.run([sys.executable, "-m", "pythonfmu", "build", "-f", str(script),
                              "-d", d, "--handle-state", "--serialize-state",
                              *map(str, payload)], capture_output=True, text=True)
        built = Path(d) / f"{cls}.fmu"
        if res.returncode != 0 or not built.exists():
            raise ModelError(f"building the FMU failed: {res.stderr or res.stdout}")
        _model_structure(built, list(sub.output_names), deps)
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
