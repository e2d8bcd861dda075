"""Export an atomic subsystem as a stand-alone FMI 2.0 or 3.0 co-simulation FMU (``cosim
export-fmu``).

The FMU is built with pythonfmu (FMI 2.0) or pythonfmu3 (FMI 3.0) from a generated slave: it
embeds the subsystem as a model file and runs it with cosim's own
:class:`~cosim.master.local_unit.LocalUnit` (through :mod:`cosim.fmi.exported`) — so the FMU
computes exactly what the unit computes natively. It carries what it runs in its resources:
``cosim``, ``blocks``, the codec, and the pure-Python sources of PyYAML and msgpack, so it runs
in a Python that has only the importer's own needs (fmpy and numpy). Its ports are the
subsystem's scalar Inport / Outport names; its parameters are the model parameters the
subsystem uses (fixed, or tunable where the export names them); ``<ModelStructure>`` declares
the outputs' direct dependencies. It can get, set and serialize its state (the unit's own
snapshot, msgpack-encoded by the codec), so a master can roll it back: iterate it, adapt its
macro step, checkpoint it. An error inside the FMU reaches the importer's logger (status
error, category ``logStatusError``) with its reason.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from cosim.errors import CompileError, ModelError

__all__ = ["export_fmu", "main"]

#: FMI version -> (builder module, the slave's imports, extra declarations in __init__); the
#: builders find the slave by its base class's own name (Fmi2Slave / Fmi3Slave).
_FLAVOURS = {
    "2.0": ("pythonfmu", """\
from pythonfmu import DefaultExperiment
from pythonfmu import Fmi2Causality as Causality
from pythonfmu import Fmi2Slave
from pythonfmu import Fmi2Variability as Variability
from pythonfmu import Real as Float
from pythonfmu.enums import Fmi2Status as Status
""", ""),
    "3.0": ("pythonfmu3", """\
from pythonfmu3 import DefaultExperiment
from pythonfmu3 import Fmi3Causality as Causality
from pythonfmu3 import Fmi3Slave
from pythonfmu3 import Fmi3Variability as Variability
from pythonfmu3 import Float64 as Float
from pythonfmu3.enums import Fmi3Status as Status
""", """\
        self.time = 0.0
        self.register_variable(Float("time", causality=Causality.independent,
                                     variability=Variability.continuous))
"""),
}

_SLAVE = '''
import sys

{imports}
MODEL = {model!r}
TYPES = {types!r}
INPUTS = {inputs!r}
OUTPUTS = {outputs!r}
PARAMETERS = {parameters!r}
TUNABLE = {tunable!r}
DT = {dt!r}


class {cls}({base}):
    author = "cosim"
    description = "cosim subsystem {name} exported as an FMU"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        # (pythonfmu3 resets a class-level default experiment in its __init__.)
        self.default_experiment = DefaultExperiment(0.0, {t_end!r}, DT)
        # The cosim engine this FMU runs is its own copy, in its resources: first on the path.
        if self.resources and self.resources not in sys.path:
            sys.path.insert(0, self.resources)
        # pythonfmu's library would corrupt the importer's heap at exit (an abort after the
        # run): the carried cosim resets its state first, in a Python importer.
        from cosim.fmi.pythonfmu_exit import release_at_exit
        release_at_exit()
        from cluster.codec import decode, encode
        from cosim.fmi.exported import ExportedUnit
        self._unit = ExportedUnit(MODEL, TYPES, DT, INPUTS, OUTPUTS, PARAMETERS, TUNABLE,
                                  (encode, decode))
        self._t0 = 0.0
        unit = self._unit
{extra}        for n in INPUTS:
            self.register_variable(Float(n, causality=Causality.input, start=0.0,
                                         getter=lambda n=n: unit.values[n],
                                         setter=lambda v, n=n: unit.set_input(n, v)))
        for n in OUTPUTS:
            self.register_variable(Float(n, causality=Causality.output,
                                         getter=lambda n=n: self._told(unit.output, n)))
        for n, v in PARAMETERS.items():
            how = Variability.tunable if n in TUNABLE else Variability.fixed
            self.register_variable(Float(n, causality=Causality.parameter, variability=how,
                                         start=v, getter=lambda n=n: self._unit.params[n],
                                         setter=lambda v, n=n: self._told(
                                             self._unit.set_parameter, n, v)))

    def _told(self, fn, *args):
        """Call ``fn``; its error goes to the importer's logger (status error,
        logStatusError) before the call fails (pythonfmu answers an exception with fatal;
        returning False from doStep would read as the FMU asking to terminate)."""
        from cosim.fmi.exported import ExportError
        try:
            return fn(*args)
        except ExportError as err:
            self.log(str(err), Status.error, "logStatusError")
            raise

    def setup_experiment(self, start_time, *args, **kwargs):
        self._t0 = start_time

    def exit_initialization_mode(self):
        self._told(self._unit.initialize, self._t0)

    def do_step(self, current_time, step_size):
        self._told(self._unit.step, current_time, step_size)
        return True

    def terminate(self):
        self._unit.terminate()

    # FMU state: pythonfmu keeps what these return and serializes it as JSON, so the unit's
    # snapshot travels as base64 of its msgpack encoding (never pickle).
    def _get_fmu_state(self):
        return self._unit.get_state()

    def _set_fmu_state(self, state):
        self._unit.set_state(state)
'''


#: Third-party packages the carried engine imports beyond numpy, carried as their pure-Python
#: sources (both fall back to them without their C extensions).
_CARRIED_DEPENDENCIES = ("yaml", "msgpack")


def _payload(d: Path) -> list[Path]:
    """The code an exported FMU carries in its resources: the cosim engine, the block
    library, the codec (``cluster/codec.py`` and the cluster modules it imports, in an empty
    package) and the pure-Python sources of PyYAML and msgpack."""
    import importlib.machinery
    import importlib.util
    import shutil

    def source(name: str) -> Path:
        # Located, not imported (cosim imports neither blocks nor cluster). An FMU this
        # process ran may have imported its own carried copy from a directory removed since:
        # then the one on the path.
        for find in (importlib.util.find_spec, importlib.machinery.PathFinder.find_spec):
            spec = find(name)
            if spec is not None and spec.origin is not None and Path(spec.origin).is_file():
                return Path(spec.origin)
        raise ModelError(f"FMU export needs the {name!r} package's sources to carry")

    out = []
    for pkg in ("cosim", "blocks"):
        src = source(pkg).parent
        dst = d / pkg
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        out.append(dst)
    for pkg in _CARRIED_DEPENDENCIES:
        dst = d / pkg
        shutil.copytree(source(pkg).parent, dst, ignore=shutil.ignore_patterns(
            "__pycache__", "*.pyc", "*.so", "*.pyd", "*.c", "*.pyx", "*.h", "*.cpp"))
        out.append(dst)
    cl = d / "cluster"
    cl.mkdir(parents=True)
    (cl / "__init__.py").write_text('"""The codec of cosim\'s cluster package, carried by an '
                                    'exported FMU."""\n')
    for name in _codec_modules(source("cluster").parent):
        shutil.copy(source("cluster").parent / f"{name}.py", cl / f"{name}.py")
    out.append(cl)
    return out


def _codec_modules(cluster_dir: Path) -> list[str]:
    """The modules of the ``cluster`` package the codec needs: ``codec`` and the cluster
    modules it imports, transitively (read from their sources, not imported)."""
    import re
    pattern = re.compile(r"^\s*(?:from\s+cluster\s+import\s+(\w+)|from\s+cluster\.(\w+)\s+"
                         r"import|import\s+cluster\.(\w+))", re.M)
    need, todo = set(), ["codec"]
    while todo:
        name = todo.pop()
        if name in need or not (cluster_dir / f"{name}.py").is_file():
            continue
        need.add(name)
        todo.extend(n for m in pattern.finditer((cluster_dir / f"{name}.py").read_text())
                    for n in m.groups() if n)
    return sorted(need)


def _model_structure(fmu: Path, outputs: list[str], deps: dict, version: str) -> None:
    """Rewrite ``<ModelStructure>`` of the built FMU: each output with the inputs it depends
    on directly, and the outputs as initial unknowns (the builders list none or all)."""
    import re
    import zipfile
    with zipfile.ZipFile(fmu) as z:
        items = {n: z.read(n) for n in z.namelist()}
    xml = items["modelDescription.xml"].decode("utf-8")
    if version == "2.0":
        # Variables are referenced by their 1-based index.
        ref = {m.group(1): str(i + 1) for i, m in enumerate(
            re.finditer(r'<ScalarVariable[^>]*\bname="([^"]+)"', xml))}
        item = '<Unknown index="{}" dependencies="{}"/>'
        structure = "<ModelStructure><Outputs>{o}</Outputs><InitialUnknowns>{o}" \
                    "</InitialUnknowns></ModelStructure>"
    else:
        # Variables are referenced by their value reference.
        ref = {m.group(1): m.group(2) for m in re.finditer(
            r'<Float64[^>]*\bname="([^"]+)"[^>]*\bvalueReference="(\d+)"', xml)}
        structure = "<ModelStructure>{o}{i}</ModelStructure>"
        item = '<Output valueReference="{}" dependencies="{}"/>'

    def unknowns(names, fmt=item):
        return "".join(fmt.format(ref[n], " ".join(ref[i] for i in deps.get(n, ())))
                       for n in names)
    text = structure.format(o=unknowns(outputs), i=unknowns(
        outputs, '<InitialUnknown valueReference="{}" dependencies="{}"/>'))
    xml = re.sub(r"<ModelStructure\s*/>|<ModelStructure>.*?</ModelStructure>",
                 lambda _: text, xml, flags=re.S)
    items["modelDescription.xml"] = xml.encode("utf-8")
    with zipfile.ZipFile(fmu, "w", zipfile.ZIP_DEFLATED) as z:
        for n, data in items.items():
            z.writestr(n, data)


def _used_parameters(model, wrapper_of) -> list[str]:
    """The model parameters the subsystem uses: those without which it does not evaluate
    (``wrapper_of(params)`` is the subsystem alone in a model with those parameters)."""
    from cosim.model.evaluate import evaluate
    used = []
    for name in model.parameters:
        rest = {k: v for k, v in model.parameters.items() if k != name}
        try:
            evaluate(wrapper_of(rest))
        except CompileError:
            used.append(name)
    return used


def _block_types(sub) -> list[tuple[str, str, str]]:
    """(type name, module, class name) of every block type in ``sub``, nested ones too."""
    from cosim.model.diagram import Diagram
    from cosim.model.registry import name_of
    out = {}

    def walk(d):
        for b in d.blocks:
            if isinstance(b, Diagram):
                walk(b)
                continue
            cls = type(b)
            name = name_of(cls)
            if name is None:
                raise ModelError(f"FMU export: block {b.name!r} has type "
                                 f"{cls.__qualname__}, which model files do not know; "
                                 "register it with register_block_type")
            out[name] = (name, cls.__module__, cls.__qualname__)
    walk(sub)
    return sorted(out.values())


def export_fmu(model, subsystem: str, out: str, t_end: float | None = None,
               fmi_version: str = "2.0", tunable=()) -> Path:
    """Write atomic subsystem ``subsystem`` of ``model`` (a Model or a model file) as a
    stand-alone FMI 2.0 or 3.0 co-simulation FMU.

    The FMU carries the cosim engine, the block library, the codec and the pure-Python
    PyYAML and msgpack in its resources, so it runs in a Python that has numpy and the
    importer (fmpy) but not cosim. Its parameters are the model parameters the subsystem
    uses: fixed (set before initialization; setting one later is an error), or tunable for
    the names in ``tunable`` (set between steps, applied at the next step).
    ``<ModelStructure>`` declares each output's direct dependencies; the default experiment
    has the subsystem's step and ``t_end`` (default: the model file's, else 1 s). A step
    size that is not a multiple of the subsystem's step fails ``doStep`` (fatal, pythonfmu's
    status for an error raised in Python); the reason is logged with status error in
    category ``logStatusError``, as every error inside the FMU is.

    Parameters
    ----------
    fmi_version : {"2.0", "3.0"}
        Built with pythonfmu (2.0) or pythonfmu3 (3.0).
    tunable : iterable of str
        Parameters exported as tunable.

    Returns the path of the ``.fmu``.
    """
    from cosim import Model, SimulationConfig
    from cosim.master.local_unit import LocalUnit
    from cosim.model.diagram import Subsystem
    from cosim.model.evaluate import evaluate
    from cosim.run.atomic import inner_config
    if fmi_version not in _FLAVOURS:
        raise ModelError(f"FMU export: FMI version {fmi_version!r} is not one of "
                         f"{', '.join(_FLAVOURS)}")
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
    if t_end is None:
        sim = getattr(model, "simulation", None)
        t_end = float(sim.t_end) if sim is not None and sim.t_end else 1.0
    context = dict(model.context)

    def text_of(params: dict) -> str:
        """The model file of the subsystem alone in a model with ``params`` and the model's
        context."""
        w = Model(f"{subsystem}_fmu", parameters=params)
        w.context.update(context)
        w.blocks.append(sub)
        return w.to_yaml(simulation=SimulationConfig(dt=sub.dt, t_end=0.0))

    # A copy of the subsystem per probe: evaluating it leaves ``model`` as it is.
    used = _used_parameters(model, lambda params: Model.from_yaml(text_of(params)))
    bad = [k for k in used if not isinstance(model.parameters[k], (int, float))
           or isinstance(model.parameters[k], bool)]
    if bad:
        raise ModelError(f"FMU export: parameters {bad} of subsystem {subsystem!r} are not "
                         "numbers; FMI parameters of the FMU are reals")
    unknown = sorted(set(tunable) - set(used))
    if unknown:
        raise ModelError(f"FMU export: tunable {unknown} are not parameters subsystem "
                         f"{subsystem!r} uses (its parameters: {', '.join(used) or 'none'})")
    params = {k: model.parameters[k] for k in used}
    text = text_of(params)
    # Direct dependencies of the outputs, from the unit itself.
    probe = Model.from_yaml(text)
    evaluate(probe)
    desc = LocalUnit(probe.blocks[0], inner_config(
        probe.blocks[0], SimulationConfig(dt=sub.dt, t_end=0.0))).describe()
    deps = dict(desc.feedthrough)
    cls = "".join(part.capitalize() for part in subsystem.split("_")) or "Unit"
    builder, imports, extra = _FLAVOURS[fmi_version]
    source = _SLAVE.format(imports=imports, extra=extra, base=f"Fmi{fmi_version[0]}Slave",
                           model=text, types=_block_types(sub),
                           inputs=list(sub.input_names), outputs=list(sub.output_names),
                           cls=cls, name=subsystem, dt=float(sub.dt), t_end=float(t_end),
                           parameters={k: float(v) for k, v in params.items()},
                           tunable=sorted(tunable))
    out_path = Path(out)
    with tempfile.TemporaryDirectory(prefix="cosim-fmu-build-") as d:
        script = Path(d) / f"{cls}.py"
        script.write_text(textwrap.dedent(source))
        payload = _payload(Path(d) / "payload")
        res = subprocess.run([sys.executable, "-m", builder, "build", "-f", str(script),
                              "-d", d, "--handle-state", "--serialize-state",
                              *map(str, payload)], capture_output=True, text=True)
        built = Path(d) / f"{cls}.fmu"
        if res.returncode != 0 or not built.exists():
            raise ModelError(f"building the FMU failed: {res.stderr or res.stdout}")
        _model_structure(built, list(sub.output_names), deps, fmi_version)
        out_path.parent.mkdir(parents=True, exist_ok=True)
        out_path.write_bytes(built.read_bytes())
    return out_path


def main(argv=None) -> int:
    """``cosim export-fmu MODEL --subsystem NAME -o NAME.fmu [--fmi 3.0] [--tunable k,...]``."""
    ap = argparse.ArgumentParser(prog="cosim export-fmu",
                                 description="Export an atomic subsystem as an FMI 2.0 or 3.0 "
                                             "co-simulation FMU (needs pythonfmu / "
                                             "pythonfmu3).")
    ap.add_argument("model", help="model file (.yaml)")
    ap.add_argument("--subsystem", required=True, help="name of a top-level atomic subsystem")
    ap.add_argument("-o", "--out", required=True, help="the .fmu to write")
    ap.add_argument("--fmi", default="2.0", choices=sorted(_FLAVOURS), help="FMI version")
    ap.add_argument("--tunable", default="", help="comma-separated parameters exported as "
                                                  "tunable (the others are fixed)")
    args = ap.parse_args(argv)
    tunable = [n for n in args.tunable.split(",") if n]
    try:
        path = export_fmu(args.model, args.subsystem, args.out, fmi_version=args.fmi,
                          tunable=tunable)
    except (ModelError, OSError) as err:
        print(f"cosim export-fmu: error: {err}", file=sys.stderr)
        return 2
    print(f"wrote {path}")
    return 0
