"""An FMU file before it is a unit or a block: its model description, read with a clear
error for a bad file or a missing interface, and the start values a user sets on it, checked
against the description and applied in FMI's two phases (configuration, initialization).
Shared by FMU units (:mod:`cosim.fmi.unit`) and the FMU blocks of the block library.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from cosim.errors import ModelError
from cosim.fmi.instance import FmuInstance
from cosim.fmi.variables import (FmuVariable, shape_of, structural_values, text_value,
                                 text_variables)

__all__ = ["read_fmu", "read_text", "start_value_setter"]


def read_fmu(path, interface: str = "cs") -> object:
    """The model description of an FMU file; a clear error names a bad file or a missing
    interface (``"cs"`` co-simulation, ``"me"`` model exchange)."""
    p = Path(path)
    if not p.is_file():
        raise ModelError(f"FMU {p} does not exist")
    st = p.stat()
    md = _description(str(p.resolve()), st.st_size, st.st_mtime_ns)
    if md.fmiVersion not in ("2.0", "3.0"):
        raise ModelError(f"{p}: FMI {md.fmiVersion} is not supported (FMI 2.0 and 3.0 are)")
    if md.coSimulation is None and md.modelExchange is None:
        raise ModelError(f"{p} offers only FMI 3.0 Scheduled Execution, an optional interface "
                         "that cosim does not support (docs/fmi.md lists what is supported); "
                         "export the model with a co-simulation or model-exchange interface")
    if interface == "cs" and md.coSimulation is None:
        raise ModelError(f"{p} is not a co-simulation FMU (FMI {md.fmiVersion}); use it as a "
                         "model-exchange block (ModelExchangeFmuBlock) instead")
    if interface == "me" and md.modelExchange is None:
        raise ModelError(f"{p} has no model-exchange interface (FMI {md.fmiVersion}); use "
                         "FmuBlock for co-simulation FMUs")
    return md


@functools.lru_cache(maxsize=64)
def _description(path: str, size: int, mtime_ns: int):
    """The model description of the FMU file at ``path`` as it is now (``size`` and
    ``mtime_ns`` key the cache: reading and validating one costs 10 ms, and a model reads
    each FMU for its block, its unit and its monolithic check). Callers do not modify it."""
    from fmpy import read_model_description
    try:
        return read_model_description(path)
    except Exception as err:  # noqa: BLE001 - zip, XML and schema errors alike
        raise ModelError(f"{path} is not a valid FMU: {type(err).__name__}: {err}") from None


def start_value_setter(inst: FmuInstance, md, start_values: dict, where: str):
    """Check ``start_values`` against ``md`` and return ``apply(phase)`` that sets them:
    phase ``"config"`` the FMI 3.0 structural parameters, ``"init"`` every other one."""
    vars_ = {v.name: v for v in md.modelVariables}
    unknown = sorted(set(start_values) - set(vars_))
    if unknown:
        raise ModelError(f"{where}: {', '.join(unknown)} not variables of the FMU "
                         f"(variables: {', '.join(vars_)})")
    structural = structural_values(md, start_values) if md.fmiVersion == "3.0" else {}
    phases = {"config": [], "init": []}
    texts = {"config": [], "init": []}
    for name, value in start_values.items():
        v = vars_[name]
        if v.type == "Clock":
            raise ModelError(f"{where}: start value of {name!r}: a clock has no value to "
                             "set (it ticks)")
        phase = "config" if v.causality == "structuralParameter" else "init"
        if v.type in ("String", "Binary"):
            texts[phase].append((v, text_value(v, value, f"{where}: start value")))
            continue
        fv = FmuVariable(name, v.valueReference, v.type,
                         np.dtype(np.float64), shape_of(v, structural, where),
                         v.variability or "continuous")
        arr = np.asarray(value, dtype=np.float64).reshape(-1)
        if arr.size != fv.size:
            raise ModelError(f"{where}: start value of {name!r} has {arr.size} values; the "
                             f"variable has shape {fv.shape}")
        phases[phase].append((fv, arr))

    def apply(phase: str) -> None:
        items = phases[phase]
        if items:
            inst.write(inst.groups([fv for fv, _ in items]),
                       np.concatenate([a for _, a in items]))
        f = inst.fmu
        for v, value in texts[phase]:
            if v.type == "String":
                inst.call("setString", f.setString, [v.valueReference], [value])
            else:
                inst.call("fmi3SetBinary", f.setBinary, [v.valueReference], [value])
    return apply


def read_text(inst: FmuInstance, md) -> dict:
    """The String (``str``) and Binary (``bytes``) outputs of instance ``inst`` now."""
    out, f = {}, inst.fmu
    for v in text_variables(md, "output"):
        if v.type == "String":
            (val,) = inst.call("getString", f.getString, [v.valueReference])
            out[v.name] = val.decode("utf-8") if isinstance(val, bytes) else val
        else:
            (val,) = inst.call("fmi3GetBinary", f.getBinary, [v.valueReference])
            out[v.name] = bytes(val)
    return out
