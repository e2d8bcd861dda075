"""SSP (System Structure and Parameterization 1.0) packages as models of FMU blocks.

An ``.ssp`` file is a zip holding ``SystemStructure.ssd`` (the system: its components — FMUs
under ``resources/`` — their connectors, the connections between them, parameter bindings and a
default experiment), parameter files (``.ssv``) and units. :func:`load_ssp` turns it into a
:class:`~cosim.Model` whose top-level blocks are :class:`~blocks.fmu.FmuBlock` s, so that a
co-simulation makes every FMU a unit; :func:`save_ssp` writes such a model back.

What a loaded system computes
-----------------------------
- A **connection** drives its end connector with its start connector's value, converted between
  the connectors' units (``ssd:Units``: SI exponents must agree; ``v_SI = factor·v + offset``)
  unless ``suppressUnitConversion``, then through its ``ssc:LinearTransformation``
  (``factor·v + offset``). A conversion that is not the identity is a Gain (and a constant
  added for an offset) between the two FMUs.
- Components of **nested systems** become top-level blocks named by their path joined with
  ``_`` (``B.C`` -> ``B_C``), so each FMU stays its own unit; connections through system
  connectors are followed to their source.
- **Parameter bindings** (``.ssv`` files or inline sets; ``prefix`` honoured) set start values
  before initialization. As the standard says: within a level a later binding wins, and a
  binding of an enclosing system wins over one of a subsystem or component. Names matching no
  variable are ignored, as the standard asks, but listed in a warning.
- An FMU **input that nothing drives** keeps its start value (bound or declared) as a constant.
  A root-system input connector needs a value: ``inputs={"name": value}``.
- **Experiment:** ``DefaultExperiment`` start and stop time; the macro step is ``step=``, else
  the one :func:`save_ssp` recorded, else the smallest ``DefaultExperiment stepSize`` of the
  FMUs. The model's ``simulation`` is a co-simulation at that step.

Refused, naming the feature: parameter mappings (``.ssm``), components that are SSPs/SSDs
themselves, model-exchange-only components, signal dictionaries, non-linear transformations.
"""

from __future__ import annotations

import atexit
import re
import shutil
import tempfile
import warnings
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from xml.etree import ElementTree as ET

from blocks.ssp_write import ANNOTATION, FMU_TYPE, save_ssp
from cosim.config import CosimConfig, SimulationConfig
from cosim.errors import ModelError
from cosim.model.block import NAME_RE
from cosim.model.diagram import Model

__all__ = ["load_ssp", "save_ssp"]

_SI = ("kg", "m", "s", "A", "K", "mol", "cd", "rad")


def _local(tag: str) -> str:
    """An element's name without its namespace (SSP 1.0 and later versions alike)."""
    return tag.rsplit("}", 1)[-1]


def _children(el, name: str) -> list:
    return [c for c in el if _local(c.tag) == name]


def _child(el, name: str):
    found = _children(el, name)
    return found[0] if found else None


# -- reading -----------------------------------------------------------------------------

@dataclass
class _Component:
    path: str                      # "B.C": its hierarchical name
    flat: str                      # "B_C": its block name
    fmu: Path
    units: dict = field(default_factory=dict)        # connector -> unit name


@dataclass
class _Reading:
    """What one pass over an SSD found; ``problems`` are reported together."""

    root: Path
    units: dict = field(default_factory=dict)        # unit name -> (exponents, factor, offset)
    components: dict = field(default_factory=dict)   # path -> _Component
    #: (end node, start node, (factor, offset) of the connection's own transformation,
    #: suppressUnitConversion); nodes are hierarchical connector names "B.C.u" / "B.u"
    edges: list = field(default_factory=list)
    system_units: dict = field(default_factory=dict)  # system connector node -> unit
    root_inputs: list = field(default_factory=list)
    #: (hierarchy depth, order, {hierarchical variable name: value}); lower depth wins
    bindings: list = field(default_factory=list)
    problems: list = field(default_factory=list)


def load_ssp(path, *, step: float | None = None, inputs: dict | None = None,
             unpack_to=None) -> Model:
    """Read an SSP (a ``.ssp`` zip, a directory, or its ``.ssd`` file) as a model of FMUs.

    Parameters
    ----------
    path : str or Path
    step : float, optional
        Macro step (s); see the module notes for the default.
    inputs : dict of str to float, optional
        Values of the root system's input connectors (held constant).
    unpack_to : str or Path, optional
        Where a zip is unpacked (default: a temporary directory removed at exit); the FMUs
        stay there for the model's lifetime.

    Returns
    -------
    Model
        Top-level FmuBlocks (plus conversion gains and input constants); ``model.simulation``
        is a co-simulation at the macro step.

    Raises
    ------
    ModelError
        Every problem of the package at once, each naming the element and connector.
    """
    ssd, root = _open(Path(path), unpack_to)
    try:
        tree = ET.parse(ssd).getroot()
    except ET.ParseError as err:
        raise ModelError(f"{ssd}: not valid XML: {err}") from None
    if _local(tree.tag) != "SystemStructureDescription":
        raise ModelError(f"{ssd}: the root element is {_local(tree.tag)!r}, not "
                         "SystemStructureDescription")
    r = _Reading(root)
    units_el = _child(tree, "Units")
    if units_el is not None:
        r.units = _read_units(units_el)
    system = _child(tree, "System")
    if system is None:
        raise ModelError(f"{ssd}: no <System>")
    _read_system(system, "", 0, r)
    inputs = dict(inputs or {})
    for name in sorted(set(inputs) - set(r.root_inputs)):
        r.problems.append(f"inputs: {name!r} is not an input connector of the system "
                          f"(inputs: {', '.join(r.root_inputs) or 'none'})")
    for name in r.root_inputs:
        if name not in inputs:
            r.problems.append(f"system input {name!r} has no value: give it as "
                              f"load_ssp(..., inputs={{{name!r}: value}})")
    t0, t_end, recorded = _experiment(tree)
    step = step if step is not None else recorded
    if r.problems:
        raise ModelError(f"{ssd}: {len(r.problems)} problem(s):\n  " + "\n  ".join(r.problems))
    return _build(tree.get("name") or Path(path).stem, r, inputs, t0, t_end, step, ssd)


def _open(path: Path, unpack_to) -> tuple[Path, Path]:
    """The SSD file and the directory its ``source`` paths are relative to."""
    if path.is_dir():
        return path / "SystemStructure.ssd", path
    if path.suffix.lower() == ".ssd":
        return path, path.parent
    if not path.is_file():
        raise ModelError(f"SSP {path} does not exist")
    if not zipfile.is_zipfile(path):
        raise ModelError(f"{path} is not an SSP (not a zip file)")
    if unpack_to is None:
        unpack_to = tempfile.mkdtemp(prefix="cosim-ssp-")
        atexit.register(shutil.rmtree, unpack_to, True)
    with zipfile.ZipFile(path) as z:
        if "SystemStructure.ssd" not in z.namelist():
            raise ModelError(f"{path} holds no SystemStructure.ssd")
        z.extractall(unpack_to)
    return Path(unpack_to) / "SystemStructure.ssd", Path(unpack_to)


def _read_units(el) -> dict:
    units = {}
    for u in _children(el, "Unit"):
        base = _child(u, "BaseUnit")
        b = base.attrib if base is not None else {}
        units[u.get("name")] = (tuple(int(b.get(k, 0)) for k in _SI),
                                float(b.get("factor", 1.0)), float(b.get("offset", 0.0)))
    return units


def _connector_unit(conn) -> str | None:
    for kind in conn:
        if _local(kind.tag) in ("Real", "Float64"):
            return kind.get("unit")
    return None


def _read_system(system, prefix: str, depth: int, r: _Reading) -> None:
    """One system: its connectors, elements (recursively), bindings and connections."""
    where = f"system {system.get('name')!r}"
    conns = _child(system, "Connectors")
    for c in (_children(conns, "Connector") if conns is not None else []):
        node = prefix + c.get("name")
        r.system_units[node] = _connector_unit(c)
        if not prefix and c.get("kind") == "input":
            r.root_inputs.append(c.get("name"))
    _read_bindings(system, prefix, depth, r, where)
    elements = _child(system, "Elements")
    for el in (list(elements) if elements is not None else []):
        kind, name = _local(el.tag), el.get("name")
        if kind == "System":
            _read_system(el, f"{prefix}{name}.", depth + 1, r)
        elif kind == "Component":
            _read_component(el, prefix, depth + 1, r)
        else:
            r.problems.append(f"{where}: element {name!r} is a {kind}, which is not supported "
                              "(components that are FMUs, and systems, are)")
    if _child(system, "SignalDictionaries") is not None:
        r.problems.append(f"{where}: signal dictionaries are not supported")
    connections = _child(system, "Connections")
    for c in (_children(connections, "Connection") if connections is not None else []):
        start = prefix + (f"{c.get('startElement')}." if c.get("startElement") else "") + \
            c.get("startConnector")
        end = prefix + (f"{c.get('endElement')}." if c.get("endElement") else "") + \
            c.get("endConnector")
        factor, offset = 1.0, 0.0
        for t in c:
            if _local(t.tag) == "LinearTransformation":
                factor, offset = float(t.get("factor", 1.0)), float(t.get("offset", 0.0))
            elif _local(t.tag).endswith("Transformation"):
                r.problems.append(f"connection {start} -> {end}: {_local(t.tag)} is not "
                                  "supported (LinearTransformation is)")
        suppress = c.get("suppressUnitConversion", "false") in ("true", "1")
        r.edges.append((end, start, (factor, offset), suppress))


def _read_component(el, prefix: str, depth: int, r: _Reading) -> None:
    name, source = el.get("name"), el.get("source") or ""
    path = prefix + name
    kind = el.get("type") or (FMU_TYPE if source.lower().endswith(".fmu") else None)
    if kind != FMU_TYPE:
        r.problems.append(f"component {path!r}: type {kind!r} is not supported (FMUs, "
                          f"{FMU_TYPE}, are; a nested SSP can be unpacked as a system)")
        return
    if el.get("implementation") == "ModelExchange":
        r.problems.append(f"component {path!r}: implementation ModelExchange is not supported "
                          "in an SSP (CoSimulation and any are)")
        return
    fmu = (r.root / source).resolve()
    if not fmu.is_file():
        r.problems.append(f"component {path!r}: its FMU {source!r} is not in the package")
        return
    comp = _Component(path, _flat(path, r), fmu)
    conns = _child(el, "Connectors")
    for c in (_children(conns, "Connector") if conns is not None else []):
        comp.units[c.get("name")] = _connector_unit(c)
    r.components[path] = comp
    _read_bindings(el, path + ".", depth, r, f"component {path!r}")


def _flat(path: str, r: _Reading) -> str:
    """A block name for a hierarchical element name, unique in the model."""
    flat = re.sub(r"\W", "_", path.replace(".", "_"))
    if not NAME_RE.match(flat):
        flat = "c_" + flat
    taken = {c.flat for c in r.components.values()}
    base, n = flat, 1
    while flat in taken:
        n += 1
        flat = f"{base}_{n}"
    return flat


def _read_bindings(el, prefix: str, depth: int, r: _Reading, where: str) -> None:
    bindings = _child(el, "ParameterBindings")
    for i, b in enumerate(_children(bindings, "ParameterBinding") if bindings is not None
                          else []):
        if _child(b, "ParameterMapping") is not None:
            r.problems.append(f"{where}: parameter mappings (.ssm) are not supported")
            continue
        btype = b.get("type", "application/x-ssp-parameter-set")
        if btype != "application/x-ssp-parameter-set":
            r.problems.append(f"{where}: parameter binding type {btype!r} is not supported")
            continue
        if b.get("source"):
            src = r.root / b.get("source")
            try:
                pset = ET.parse(src).getroot()
            except (OSError, ET.ParseError) as err:
                r.problems.append(f"{where}: parameter file {b.get('source')!r}: {err}")
                continue
        else:
            values = _child(b, "ParameterValues")
            pset = _child(values, "ParameterSet") if values is not None else None
            if pset is None:
                r.problems.append(f"{where}: a parameter binding with neither a source nor "
                                  "inline ParameterValues")
                continue
        named = prefix + (b.get("prefix") or "")
        r.bindings.append((depth, i, {named + k: v for k, v in _parameters(pset).items()}))


def _parameters(pset) -> dict:
    """``{name: value}`` of an ``ssv:ParameterSet`` (typed as declared)."""
    out = {}
    params = _child(pset, "Parameters")
    for p in (_children(params, "Parameter") if params is not None else []):
        for v in p:
            kind, raw = _local(v.tag), v.get("value")
            if raw is None:
                continue
            if kind in ("Real", "Float64", "Float32"):
                out[p.get("name")] = float(raw)
            elif kind in ("Boolean",):
                out[p.get("name")] = raw in ("true", "1")
            elif kind.startswith(("Integer", "Int", "UInt")):
                out[p.get("name")] = int(raw)
            else:
                out[p.get("name")] = raw
    return out


def _experiment(tree) -> tuple[float, float | None, float | None]:
    exp = _child(tree, "DefaultExperiment")
    if exp is None:
        return 0.0, None, None
    step = None
    notes = _child(exp, "Annotations")
    for a in (_children(notes, "Annotation") if notes is not None else []):
        if a.get("type") == ANNOTATION:
            for e in a:
                if e.get("step") is not None:
                    step = float(e.get("step"))
    stop = exp.get("stopTime")
    return float(exp.get("startTime", 0.0)), (float(stop) if stop is not None else None), step


def _build(name: str, r: _Reading, inputs: dict, t0: float, t_end, step, where) -> Model:
    from blocks.fmu import FmuBlock
    from blocks.math import Gain, Sum
    from blocks.sources import Constant
    from cosim.fmi.description import read_fmu

    mds = {p: read_fmu(c.fmu) for p, c in r.components.items()}
    if step is None:
        steps = [md.defaultExperiment.stepSize for md in mds.values()
                 if md.defaultExperiment is not None and md.defaultExperiment.stepSize]
        if not steps:
            raise ModelError(f"{where}: no macro step: give load_ssp(..., step=H) (neither the "
                             "package nor its FMUs' DefaultExperiment state one)")
        step = min(float(s) for s in steps)
    if t_end is None:
        raise ModelError(f"{where}: no DefaultExperiment stopTime: set model.simulation "
                         "yourself, or add one to the SSD")
    starts, ignored = _start_values(r, mds)
    if ignored:
        warnings.warn(f"{where}: parameter bindings matching no variable, ignored as the SSP "
                      f"standard says: {', '.join(sorted(ignored))}", UserWarning, stacklevel=3)
    model = Model(re.sub(r"\W", "_", name) or "ssp")
    fmus = {p: FmuBlock(c.flat, str(c.fmu), step, start_values=starts[p])
            for p, c in r.components.items()}
    model.add(*fmus.values())
    sources = {e: (s, tr, sup) for e, s, tr, sup in r.edges}
    problems = []
    for p, c in r.components.items():
        declared = {v.name: v for v in mds[p].modelVariables}
        for port in fmus[p].input_names:
            node = f"{p}.{port}"
            found = _trace(node, sources, r, problems)
            dst = f"{c.flat}.{port}"
            if found is None:                          # nothing drives it: its start value
                start = declared[port].start
                value = starts[p].get(port, float(start) if start is not None else 0.0)
                model.add(Constant(f"{c.flat}__{port}", float(value)))
                model.connect(f"{c.flat}__{port}.out", dst)
                continue
            v = declared[port]
            src, (factor, offset) = found
            if src in r.root_inputs:
                value = factor * float(inputs[src]) + offset
                model.add(Constant(f"{c.flat}__{v.name}", value))
                model.connect(f"{c.flat}__{v.name}.out", dst)
                continue
            comp, _, port = src.rpartition(".")
            out = f"{r.components[comp].flat}.{port}"
            if (factor, offset) == (1.0, 0.0):
                model.connect(out, dst)
                continue
            gain = f"{c.flat}__{v.name}_k"
            model.add(Gain(gain, factor))
            model.connect(out, f"{gain}.in")
            if offset == 0.0:
                model.connect(f"{gain}.out", dst)
            else:
                model.add(Constant(f"{c.flat}__{v.name}_b", offset),
                          Sum(f"{c.flat}__{v.name}_s", "++"))
                model.connect(f"{gain}.out", f"{c.flat}__{v.name}_s.in1")
                model.connect(f"{c.flat}__{v.name}_b.out", f"{c.flat}__{v.name}_s.in2")
                model.connect(f"{c.flat}__{v.name}_s.out", dst)
    if problems:
        raise ModelError(f"{where}: {len(problems)} problem(s):\n  " + "\n  ".join(problems))
    model.simulation = SimulationConfig(dt=step, t0=t0, t_end=t_end, cosim=CosimConfig(H=step))
    return model


def _trace(node: str, sources: dict, r: _Reading, problems: list):
    """The component output (or root input) that drives ``node``, through system connectors,
    with the composed affine map ``(factor, offset)``; None when nothing drives it."""
    factor, offset = 1.0, 0.0
    seen = set()
    while node in sources:
        if node in seen:
            problems.append(f"connections form a loop through system connectors at {node}")
            return None
        seen.add(node)
        start, (f, o), suppress = sources[node]
        uf, uo = (1.0, 0.0) if suppress else _conversion(start, node, r, problems)
        # This hop: v_node = f·(uf·v_start + uo) + o (unit conversion first, then the
        # connection's own transformation); composed with what follows it.
        factor, offset = factor * f * uf, factor * (f * uo + o) + offset
        node = start
        comp = node.rpartition(".")[0]
        if comp in r.components:
            return node, (factor, offset)
        if node in r.root_inputs:
            return node, (factor, offset)
    if node in r.system_units and node not in r.root_inputs and seen:
        return None                                      # an unconnected system connector
    if seen:
        problems.append(f"connection from {node}: no such connector")
    return None


def _unit_of(node: str, r: _Reading) -> str | None:
    comp, _, port = node.rpartition(".")
    if comp in r.components:
        return r.components[comp].units.get(port)
    return r.system_units.get(node)


def _conversion(start: str, end: str, r: _Reading, problems: list) -> tuple[float, float]:
    """``(a, b)``: the end connector's value is ``a·v + b`` for the start's value ``v``."""
    us, ue = _unit_of(start, r), _unit_of(end, r)
    if us is None or ue is None or us == ue:
        return 1.0, 0.0
    if us not in r.units or ue not in r.units:
        missing = [u for u in (us, ue) if u not in r.units]
        problems.append(f"connection {start} -> {end}: unit(s) {', '.join(missing)} not "
                        "defined in the SSD's <Units>")
        return 1.0, 0.0
    (es, fs, os_), (ee, fe, oe) = r.units[us], r.units[ue]
    if es != ee:
        problems.append(f"connection {start} -> {end}: {us} and {ue} are different "
                        "quantities (SI exponents differ); set suppressUnitConversion if meant")
        return 1.0, 0.0
    return fs / fe, (os_ - oe) / fe


def _start_values(r: _Reading, mds: dict) -> tuple[dict, set]:
    """Each component's start values from every binding, by the standard's precedence."""
    starts = {p: {} for p in r.components}
    ignored = set()
    # Apply deepest first, and within a level in document order: later writes win.
    for _, _, values in sorted(r.bindings, key=lambda b: (-b[0], b[1])):
        for name, value in values.items():
            comp, _, var = name.rpartition(".")
            while comp and comp not in r.components:
                head, _, last = comp.rpartition(".")
                comp, var = head, f"{last}.{var}"
            variables = {v.name for v in mds[comp].modelVariables} if comp else set()
            if var in variables:
                starts[comp][var] = value
            else:
                ignored.add(name)
    return starts, ignored
