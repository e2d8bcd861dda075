"""Writing SSP 1.0 packages: a model of FMU blocks as ``SystemStructure.ssd``, its FMUs under
``resources/`` and their start values as ``.ssv`` files (see :mod:`blocks.ssp`, which reads
them and re-exports :func:`save_ssp`). The format's names both directions use live here.
"""

from __future__ import annotations

import shutil
import tempfile
import zipfile
from pathlib import Path
from xml.etree import ElementTree as ET

from cosim.config import SimulationConfig
from cosim.errors import ModelError
from cosim.model.diagram import Model

__all__ = ["ANNOTATION", "FMU_TYPE", "NS", "save_ssp"]

FMU_TYPE = "application/x-fmu-sharedlibrary"
#: Our annotation in ``DefaultExperiment``: the macro step (SSP 1.0 has no attribute for it).
ANNOTATION = "org.cosim.experiment"
NS = {"ssd": "http://ssp-standard.org/SSP1/SystemStructureDescription",
      "ssc": "http://ssp-standard.org/SSP1/SystemStructureCommon",
      "ssv": "http://ssp-standard.org/SSP1/SystemStructureParameterValues"}

def save_ssp(model: Model, path, simulation: SimulationConfig | None = None) -> Path:
    """Write a model of FMU blocks as an SSP.

    The model's top-level blocks must be :class:`~blocks.fmu.FmuBlock` s, scalar Gains
    between two of them (written as linear transformations) and Constants driving FMU inputs
    (written as parameter bindings of those inputs). Each FMU is copied into ``resources/``,
    its start values go to ``resources/<name>.ssv``; the experiment (start, stop, macro step)
    comes from ``simulation`` (default ``model.simulation``).

    Returns
    -------
    Path
        The ``.ssp`` file written.
    """
    import numpy as np

    from blocks.fmu import FmuBlock
    from blocks.math import Gain
    from blocks.sources import Constant
    from cosim.fmi.description import read_fmu

    sim = simulation or model.simulation
    if sim is None:
        raise ModelError(f"save_ssp({model.name!r}): no simulation configuration; pass "
                         "simulation=SimulationConfig(...)")
    blocks = {b.name: b for b in model.blocks}
    bad = [f"{n} ({type(b).__name__})" for n, b in blocks.items()
           if not isinstance(b, (FmuBlock, Gain, Constant))
           or (isinstance(b, Gain) and np.size(b.k) != 1)
           or (isinstance(b, Constant) and b.value.shape != (1,))]
    if bad:
        raise ModelError(f"save_ssp({model.name!r}): an SSP holds FMUs; {', '.join(bad)} "
                         "cannot be written (export a subsystem as an FMU with `cosim "
                         "export-fmu`; scalar Gains and Constants between FMUs are allowed)")
    drives: dict[str, list[str]] = {}
    for c in model.connections:
        drives.setdefault(c.src, []).append(c.dst)
    fmus = {n: b for n, b in blocks.items() if isinstance(b, FmuBlock)}
    starts = {n: dict(b.start_values) for n, b in fmus.items()}
    connections, problems = [], []
    for src, dsts in drives.items():
        block, _, port = src.partition(".")
        for dst in dsts:
            target, _, tport = dst.partition(".")
            if block in fmus and target in fmus:
                connections.append((block, port, target, tport, None))
            elif isinstance(blocks.get(block), Gain) and target in fmus:
                feeds = [c.src for c in model.connections if c.dst == f"{block}.in"]
                if len(feeds) != 1 or feeds[0].partition(".")[0] not in fmus:
                    problems.append(f"gain {block!r} is not between two FMUs")
                    continue
                s, _, sp = feeds[0].partition(".")
                connections.append((s, sp, target, tport, float(np.ravel(blocks[block].k)[0])))
            elif isinstance(blocks.get(block), Constant) and target in fmus:
                starts[target][tport] = float(blocks[block].value[0])
            elif target not in fmus and not isinstance(blocks.get(target), Gain):
                problems.append(f"connection {src} -> {dst}: only FMU inputs can be driven")
    if problems:
        raise ModelError(f"save_ssp({model.name!r}): " + "; ".join(problems))

    out = Path(path)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "resources").mkdir()
        for n, b in fmus.items():
            shutil.copyfile(b.path, root / "resources" / f"{n}.fmu")
            if starts[n]:
                _write_ssv(root / "resources" / f"{n}.ssv", n, starts[n])
        ssd = _ssd(model.name, fmus, {n: read_fmu(b.path) for n, b in fmus.items()}, starts,
                   connections, sim)
        ET.ElementTree(ssd).write(root / "SystemStructure.ssd", encoding="UTF-8",
                                  xml_declaration=True)
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
            for f in sorted(root.rglob("*")):
                if f.is_file():
                    z.write(f, f.relative_to(root).as_posix())
    return out


def _q(prefix: str, name: str) -> str:
    return f"{{{NS[prefix]}}}{name}"


def _ssd(name, fmus, mds, starts, connections, sim) -> ET.Element:
    for prefix, uri in NS.items():
        ET.register_namespace(prefix, uri)
    root = ET.Element(_q("ssd", "SystemStructureDescription"), name=name, version="1.0")
    system = ET.SubElement(root, _q("ssd", "System"), name=name)
    elements = ET.SubElement(system, _q("ssd", "Elements"))
    for n, b in fmus.items():
        comp = ET.SubElement(elements, _q("ssd", "Component"), name=n, type=FMU_TYPE,
                             source=f"resources/{n}.fmu")
        conns = ET.SubElement(comp, _q("ssd", "Connectors"))
        for v in mds[n].modelVariables:
            if v.causality in ("input", "output") and v.type in ("Real", "Float64"):
                c = ET.SubElement(conns, _q("ssd", "Connector"), name=v.name, kind=v.causality)
                ET.SubElement(c, _q("ssc", "Real"))
        if starts[n]:
            binds = ET.SubElement(comp, _q("ssd", "ParameterBindings"))
            ET.SubElement(binds, _q("ssd", "ParameterBinding"), source=f"resources/{n}.ssv")
    if connections:
        wires = ET.SubElement(system, _q("ssd", "Connections"))
        for s, sp, t, tp, k in connections:
            w = ET.SubElement(wires, _q("ssd", "Connection"), startElement=s, startConnector=sp,
                              endElement=t, endConnector=tp)
            if k is not None:
                ET.SubElement(w, _q("ssc", "LinearTransformation"), factor=repr(k), offset="0")
    exp = ET.SubElement(root, _q("ssd", "DefaultExperiment"), startTime=repr(sim.t0),
                        stopTime=repr(sim.t_end))
    notes = ET.SubElement(exp, _q("ssd", "Annotations"))
    note = ET.SubElement(notes, _q("ssc", "Annotation"), type=ANNOTATION)
    H = sim.cosim.H if sim.cosim is not None and sim.cosim.H else sim.dt
    ET.SubElement(note, "{urn:cosim}Experiment", step=repr(float(H)))
    return root


def _write_ssv(path: Path, name: str, values: dict) -> None:
    for prefix, uri in NS.items():
        ET.register_namespace(prefix, uri)
    pset = ET.Element(_q("ssv", "ParameterSet"), version="1.0", name=name)
    params = ET.SubElement(pset, _q("ssv", "Parameters"))
    for k, v in values.items():
        p = ET.SubElement(params, _q("ssv", "Parameter"), name=k)
        if isinstance(v, bool):
            ET.SubElement(p, _q("ssv", "Boolean"), value="true" if v else "false")
        elif isinstance(v, int):
            ET.SubElement(p, _q("ssv", "Integer"), value=str(v))
        elif isinstance(v, str):
            ET.SubElement(p, _q("ssv", "String"), value=v)
        else:
            ET.SubElement(p, _q("ssv", "Real"), value=repr(float(v)))
    ET.ElementTree(pset).write(path, encoding="UTF-8", xml_declaration=True)
