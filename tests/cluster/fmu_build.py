"""Builds test FMUs (FMI 2.0 or 3.0, model exchange and co-simulation in one) from a model
written in C against ``fmu_sources/c/model.h`` and a variable spec given here in Python: the
spec becomes the model description and the C header ``vars.h``; the shim of the FMI version
(``shim2.c`` / ``shim3.c``) is compiled with the model by the system C compiler."""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import quoteattr

C_DIR = Path(__file__).with_name("fmu_sources") / "c"

#: Spec kinds -> (FMI 2.0 causality, variability, initial), FMI 3.0 the same; model.h letter.
KINDS = {
    "input": ("input", "continuous", None, "c"),
    "discrete_input": ("input", "discrete", None, "d"),
    "parameter": ("parameter", "fixed", "exact", "p"),
    "tunable": ("parameter", "tunable", "exact", "t"),
    "structural": ("structuralParameter", "fixed", "exact", "s"),
    "state": ("local", "continuous", "exact", "x"),
    "state_output": ("output", "continuous", "exact", "x"),
    "output": ("output", "continuous", "calculated", "o"),
    "discrete_output": ("output", "discrete", "calculated", "o"),
    "local": ("local", "continuous", "calculated", "o"),
    "clock": ("input", "discrete", None, "o"),       # FMI 3.0 clocks, described by Spec.clocks
}

FMI2_TYPES = {"Float64": "Real", "Float32": "Real", "Int32": "Integer", "Boolean": "Boolean",
              "Enumeration": "Enumeration", "String": "String"}


@dataclass
class Var:
    """One variable: ``dims`` holds ints or the name of a structural parameter (FMI 3.0)."""
    name: str
    kind: str
    type: str = "Float64"
    start: float | None = None
    dims: tuple = ()
    derivative_of: str | None = None
    max_size: int = 1            # slots reserved (arrays sized by a structural parameter)


@dataclass
class Spec:
    name: str
    source: str                  # C file in fmu_sources/c
    variables: list[Var]
    states: tuple[str, ...] = ()
    indicators: tuple[str, ...] = ()
    step_size: float = 0.01
    stop_time: float = 1.0
    cs_h: float = 1e-3           # the shims' internal co-simulation step
    clocks: tuple = ()           # FMI 3.0 clocks: (name, causality, intervalVariability,
    #                              intervalDecimal or None)
    enumerations: dict = field(default_factory=dict)   # type name -> item names (values 1..)


def _layout(spec: Spec) -> dict:
    vr, out = 0, {}
    for v in spec.variables:
        out[v.name] = vr
        fixed = 1
        for d in v.dims:
            fixed *= d if isinstance(d, int) else v.max_size
        vr += max(fixed, 1)
    out["_n"] = vr
    return out


def _header(spec: Spec, vrs: dict) -> str:
    n = vrs["_n"]
    kind, start, names, slots = ["'o'"] * n, ["0.0"] * n, ['"?"'] * n, ["1"] * n
    text, text_len = ['""'] * n, ["0"] * n
    sizes = []
    for v in spec.variables:
        i = vrs[v.name]
        slots[i] = str(_size_slots(v))
        for j in range(i, i + (_size_slots(v))):
            kind[j] = f"'{KINDS[v.kind][3]}'"
            names[j] = f'"{v.name}"'
            if v.type in TEXT:
                raw = _text_bytes(v)
                text[j] = '"' + "".join(f"\\x{b:02x}" for b in raw) + '"'
                text_len[j] = str(len(raw))
            else:
                start[j] = repr(float(v.start or 0.0))
        if v.dims:
            expr = " * ".join(str(d) if isinstance(d, int) else f"(int)m->v[VR_{d}]"
                              for d in v.dims)
            sizes.append(f"case {i}: return {expr};")
    lines = [f"#define NV {n}"]
    lines += [f"#define VR_{v.name} {vrs[v.name]}" for v in spec.variables]
    by_name = {v.name: v for v in spec.variables}
    nx = sum(_size_slots(by_name[x]) for x in spec.states)     # array states count elements
    lines += [f"#define NX {nx}", f"#define NZ {len(spec.indicators)}",
              f"#define CS_H {spec.cs_h!r}",
              f"static const char KIND[NV] = {{{', '.join(kind)}}};",
              f"static const double START[NV] = {{{', '.join(start)}}};",
              f"static const char *NAMES[NV] = {{{', '.join(names)}}};",
              f"static const int SLOTS[NV] = {{{', '.join(slots)}}};",
              f"static const char *START_TEXT[NV] = {{{', '.join(text)}}};",
              f"static const size_t START_TEXT_LEN[NV] = {{{', '.join(text_len)}}};",
              "struct Model;",
              "static int var_size(const struct Model *m, unsigned vr);"]
    lines.append(f"#define VAR_SIZE_BODY switch (vr) {{ {' '.join(sizes)} default: return 1; }}")
    return "\n".join(lines) + "\n"


#: Types whose values are text or bytes (held by the shims beside the numbers).
TEXT = ("String", "Binary")


def _text_bytes(v: Var) -> bytes:
    """The start value of a String (str) or Binary (bytes) variable as bytes."""
    if v.start is None:
        return b""
    return v.start.encode("utf-8") if isinstance(v.start, str) else bytes(v.start)


def _size_slots(v: Var) -> int:
    n = 1
    for d in v.dims:
        n *= d if isinstance(d, int) else v.max_size
    return max(n, 1)


def _fmi2_xml(spec: Spec, vrs: dict, guid: str) -> str:
    index = {v.name: n + 1 for n, v in enumerate(spec.variables)}
    rows = []
    for v in spec.variables:
        causality, variability, initial, _ = KINDS[v.kind]
        t = FMI2_TYPES[v.type]
        attrs = {"name": v.name, "valueReference": vrs[v.name], "causality": causality,
                 "variability": "discrete" if t != "Real" and variability == "continuous"
                 else variability}
        if initial:
            attrs["initial"] = initial
        inner = {}
        if v.derivative_of:
            inner["derivative"] = index[v.derivative_of]
        if t == "Enumeration":
            inner["declaredType"] = next(iter(spec.enumerations))
        if v.start is not None and initial != "calculated":
            inner["start"] = (("true" if v.start else "false") if t == "Boolean"
                              else int(v.start) if t in ("Integer", "Enumeration") else v.start)
        rows.append(f"    <ScalarVariable {_attrs(attrs)}><{t} {_attrs(inner)}/></ScalarVariable>")
    types = "".join(
        f'  <TypeDefinitions><SimpleType name="{k}"><Enumeration>'
        + "".join(f'<Item name="{item}" value="{n + 1}"/>' for n, item in enumerate(items))
        + "</Enumeration></SimpleType></TypeDefinitions>\n"
        for k, items in spec.enumerations.items())
    outputs = [v for v in spec.variables if KINDS[v.kind][0] == "output"]
    ders = [v for v in spec.variables if v.derivative_of]
    init = outputs + ders
    st = ("    <Outputs>" + "".join(f'<Unknown index="{index[v.name]}"{_no_deps(v)}/>'
                                      for v in outputs)
          + "</Outputs>\n" if outputs else "")
    st += ("    <Derivatives>" + "".join(f'<Unknown index="{index[v.name]}"/>' for v in ders)
           + "</Derivatives>\n" if ders else "")
    st += ("    <InitialUnknowns>" + "".join(f'<Unknown index="{index[v.name]}"/>' for v in init)
           + "</InitialUnknowns>\n" if init else "")
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<fmiModelDescription fmiVersion="2.0" modelName="{spec.name}" guid="{guid}"
  numberOfEventIndicators="{len(spec.indicators)}">
  <ModelExchange modelIdentifier="{spec.name}" completedIntegratorStepNotNeeded="false"
    canGetAndSetFMUstate="true" canSerializeFMUstate="true"/>
  <CoSimulation modelIdentifier="{spec.name}" canHandleVariableCommunicationStepSize="true"
    canGetAndSetFMUstate="true" canSerializeFMUstate="true"/>
{types}  <DefaultExperiment startTime="0" stopTime="{spec.stop_time}" stepSize="{spec.step_size}"/>
  <ModelVariables>
{chr(10).join(rows)}
  </ModelVariables>
  <ModelStructure>
{st}  </ModelStructure>
</fmiModelDescription>
"""


def _fmi3_xml(spec: Spec, vrs: dict, guid: str) -> str:
    rows = ['    <Float64 name="time" valueReference="999999" causality="independent" '
            'variability="continuous"/>']
    for v in spec.variables:
        if v.kind == "clock":
            continue
        causality, variability, initial, _ = KINDS[v.kind]
        t = v.type
        attrs = {"name": v.name, "valueReference": vrs[v.name], "causality": causality,
                 "variability": "discrete" if not t.startswith("Float") and
                 variability == "continuous" else variability}
        if t == "Enumeration":
            attrs["declaredType"] = next(iter(spec.enumerations))
        if initial:
            attrs["initial"] = initial
        if v.derivative_of:
            attrs["derivative"] = vrs[v.derivative_of]
        inner = ""
        if t in TEXT and v.start is not None and initial != "calculated":
            value = v.start if t == "String" else _text_bytes(v).hex()
            inner = f"<Start value={quoteattr(value)}/>"
        elif v.start is not None and initial != "calculated":
            n = _size_slots(v) if all(isinstance(d, int) for d in v.dims) else v.max_size
            val = ("true" if v.start else "false") if t == "Boolean" else \
                str(int(v.start)) if not t.startswith("Float") else repr(float(v.start))
            attrs["start"] = " ".join([val] * (n if v.dims else 1))
        dims = "".join(f'<Dimension start="{d}"/>' if isinstance(d, int) else
                       f'<Dimension valueReference="{vrs[d]}"/>' for d in v.dims)
        rows.append(f"    <{t} {_attrs(attrs)}>{dims}{inner}</{t}>")
    for name, causality, kind, interval in spec.clocks:
        decimal = f' intervalDecimal="{interval}"' if interval is not None else ""
        rows.append(f'    <Clock name="{name}" valueReference="{vrs[name]}" '
                    f'causality="{causality}" variability="discrete" '
                    f'intervalVariability="{kind}"{decimal}/>')
    types = ""
    if spec.enumerations:
        types = "  <TypeDefinitions>" + "".join(
            f'<EnumerationType name="{k}">'
            + "".join(f'<Item name="{item}" value="{n + 1}"/>' for n, item in enumerate(items))
            + "</EnumerationType>" for k, items in spec.enumerations.items()) \
            + "</TypeDefinitions>\n"
    outputs = [v for v in spec.variables if KINDS[v.kind][0] == "output"]
    ders = [v for v in spec.variables if v.derivative_of]
    st = "".join(f'    <Output valueReference="{vrs[v.name]}"{_no_deps(v)}/>\n'
                 for v in outputs)
    st += "".join(f'    <ContinuousStateDerivative valueReference="{vrs[v.name]}"/>\n'
                  for v in ders)
    st += "".join(f'    <InitialUnknown valueReference="{vrs[v.name]}"/>\n'
                  for v in outputs + ders)
    st += "".join(f'    <EventIndicator valueReference="{vrs[z]}"/>\n' for z in spec.indicators)
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<fmiModelDescription fmiVersion="3.0" modelName="{spec.name}" instantiationToken="{guid}">
  <ModelExchange modelIdentifier="{spec.name}" needsCompletedIntegratorStep="true"
    canGetAndSetFMUState="true" canSerializeFMUState="true"/>
  <CoSimulation modelIdentifier="{spec.name}" canHandleVariableCommunicationStepSize="true"
    canGetAndSetFMUState="true" canSerializeFMUState="true" hasEventMode="true"/>
{types}  <DefaultExperiment startTime="0" stopTime="{spec.stop_time}" stepSize="{spec.step_size}"/>
  <ModelVariables>
{chr(10).join(rows)}
  </ModelVariables>
  <ModelStructure>
{st}  </ModelStructure>
</fmiModelDescription>
"""


def _no_deps(v: Var) -> str:
    """A state as output depends on no input (declared, or importers assume feedthrough)."""
    return ' dependencies=""' if v.kind == "state_output" else ""


def _attrs(d: dict) -> str:
    return " ".join(f"{k}={quoteattr(str(v))}" for k, v in d.items())


def build_fmu(spec: Spec, version: str, out_dir: Path) -> Path:
    """Compile ``spec`` as an FMI ``version`` ("2.0" or "3.0") FMU in ``out_dir``."""
    import fmpy
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise RuntimeError("a C compiler (cc or gcc) is needed to build the test FMUs")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    vrs = _layout(spec)
    (out_dir / "vars.h").write_text(_header(spec, vrs))
    guid = f"{{cosim-test-{spec.name}-{version}}}"
    xml = _fmi2_xml(spec, vrs, guid) if version == "2.0" else _fmi3_xml(spec, vrs, guid)
    (out_dir / "modelDescription.xml").write_text(xml)
    binary = "linux64" if version == "2.0" else "x86_64-linux"
    so = out_dir / "binaries" / binary / f"{spec.name}.so"
    so.parent.mkdir(parents=True, exist_ok=True)
    shim = "shim2.c" if version == "2.0" else "shim3.c"
    headers = Path(fmpy.__file__).parent / "c-code"
    subprocess.run([cc, "-shared", "-fPIC", "-O2", "-std=gnu11", f"-I{headers}",
                    f"-I{out_dir}", f"-I{C_DIR}", f'-DMODEL="{spec.source}"', str(C_DIR / shim),
                    "-o", str(so), "-lm"], check=True, capture_output=True, text=True)
    fmu = out_dir / f"{spec.name}.fmu"
    with zipfile.ZipFile(fmu, "w") as z:
        z.writestr("modelDescription.xml", xml)
        z.write(so, f"binaries/{binary}/{spec.name}.so")
    return fmu
