"""FMU variables as ports: which FMI variables become ports, with which dtype and shape.

Every numeric type is a port of its own dtype: FMI 2.0 ``Real``/``Integer``/``Boolean``/
``Enumeration``; FMI 3.0 ``Float32``/``Float64``, the integer widths, ``Boolean`` and
``Enumeration``. FMI 3.0 arrays are ports of their declared shape; a dimension given by a
structural parameter takes that parameter's value (its start value, or the one the user sets),
which is fixed before initialization (configuration mode). Scalar String and Binary variables
are ports of their own kind where the caller asks for them (``dtype`` object: values ``str``
/ ``bytes``); FMI 3.0 clocks are :class:`Clock` (time-based input clocks with a
constant interval) or refused naming the clock kind.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from cosim.errors import ModelError, SimulationError

__all__ = ["Clock", "FmuVariable", "clocks_of", "exact_cast", "is_text", "number",
           "ports_of", "shape_of", "structural_values", "text_value", "text_variables"]

#: FMI type -> numpy dtype of its port.
DTYPES = {
    "Real": np.float64, "Float64": np.float64, "Float32": np.float32,
    "Integer": np.int32, "Int8": np.int8, "UInt8": np.uint8, "Int16": np.int16,
    "UInt16": np.uint16, "Int32": np.int32, "UInt32": np.uint32, "Int64": np.int64,
    "UInt64": np.uint64, "Boolean": np.bool_,
}

#: FMI types whose values are text (``str``) or bytes, never numeric ports.
TEXT_TYPES = ("String", "Binary")


@dataclass(frozen=True)
class FmuVariable:
    """One FMU variable that is a port.

    Attributes
    ----------
    name : str
    vr : int
        Value reference.
    type : str
        FMI type name (``Real``, ``Float32``, ``Int16``, ``Enumeration``, ...).
    dtype : numpy.dtype
        Dtype of the port's values.
    shape : tuple of int
        ``(1,)`` for a scalar, the declared dimensions for an FMI 3.0 array.
    variability : str
        ``continuous``, ``discrete``, ``tunable``, ``fixed`` or ``constant``.
    """

    name: str
    vr: int
    type: str
    dtype: np.dtype
    shape: tuple[int, ...]
    variability: str
    size: int = field(init=False)         # number of values

    def __post_init__(self):
        object.__setattr__(self, "size", math.prod(self.shape))

    @property
    def discrete(self) -> bool:
        """True if the value may only change at events (FMI's discrete variability)."""
        return self.variability != "continuous"


@dataclass(frozen=True)
class Clock:
    """An FMI 3.0 time-based input clock with a constant interval: it ticks at
    ``shift + k * interval``; cosim schedules its ticks as events."""

    name: str
    vr: int
    interval: float
    shift: float


def structural_values(md, start_values: dict) -> dict[int, int]:
    """Value reference -> value of each FMI 3.0 structural parameter (start, or user-set)."""
    out = {}
    for v in md.modelVariables:
        if v.causality == "structuralParameter" and v.type not in ("String", "Binary"):
            val = start_values.get(v.name, v.start)
            try:
                out[v.valueReference] = number(val, v.type)
            except (TypeError, ValueError):
                raise ModelError(f"structural parameter {v.name!r} ({v.type}) has no "
                                 f"value of its type ({val!r}); set it in start_values"
                                 ) from None
    return out


def number(value, fmi_type: str) -> float | int:
    """A start value as read from a model description (``"false"``, ``"3"``, ``"0.5"``) or
    given by a user, as the number it means for FMI type ``fmi_type``."""
    if isinstance(value, str):
        word = value.strip().lower()
        if fmi_type == "Boolean" and word in ("true", "false"):
            return int(word == "true")
        value = float(word)
    if fmi_type.startswith("Float") or fmi_type == "Real":
        return float(value)
    if float(value) != int(float(value)):
        raise ValueError(value)
    return int(float(value))


def shape_of(v, structural: dict[int, int], where: str) -> tuple[int, ...]:
    """The port shape of model variable ``v``: ``(1,)`` for a scalar, else its dimensions
    (``structural``: value reference -> value of the structural parameters)."""
    if not v.dimensions:
        return (1,)
    dims = []
    for d in v.dimensions:
        if d.start is not None:
            dims.append(int(d.start))
        elif d.valueReference in structural:
            dims.append(structural[d.valueReference])
        else:
            raise ModelError(f"{where}: variable {v.name!r} has a dimension given by value "
                             f"reference {d.valueReference}, which is not a structural "
                             "parameter fixed before initialization")
    return tuple(dims)


def clock_timing(path) -> dict[str, tuple[float | None, float]]:
    """Clock name -> (intervalDecimal, shiftDecimal) from the FMU's model description
    (fmpy does not read these attributes)."""
    import zipfile
    from xml.etree import ElementTree
    with zipfile.ZipFile(path) as z:
        root = ElementTree.fromstring(z.read("modelDescription.xml"))
    out = {}
    for el in root.iter("Clock"):
        interval = el.get("intervalDecimal")
        out[el.get("name")] = (float(interval) if interval is not None else None,
                               float(el.get("shiftDecimal", "0")))
    return out


def ports_of(md, start_values: dict, where: str, path=None, text: bool = False
             ) -> tuple[list[FmuVariable], list[FmuVariable]]:
    """The input and output variables of ``md`` as ports.

    ``text``: String and Binary inputs and outputs are ports too (dtype ``object``: their
    values are arrays of ``str`` / ``bytes``, :func:`is_text`); else they are left out (set
    as start values, read with :func:`~cosim.fmi.description.read_text`).

    Raises
    ------
    ModelError
        Naming every input/output that cannot be a port (strings, binaries, clocks other than
        time-based input clocks), in one error.
    """
    fmi3 = md.fmiVersion == "3.0"
    structural = structural_values(md, start_values) if fmi3 else {}
    ins, outs, problems = [], [], []
    for v in md.modelVariables:
        if v.causality not in ("input", "output") or v.type == "Clock":
            continue
        t = v.type
        if t in TEXT_TYPES:
            if not text:
                continue            # not a port here: text_variables
            if v.dimensions:
                problems.append(f"{v.causality} {v.name!r} is an array of {t}, which cosim "
                                "does not support as a port (scalar String and Binary ports "
                                "are)")
                continue
            dtype = np.dtype(object)
        elif t == "Enumeration":
            dtype = np.dtype(np.int64 if fmi3 else np.int32)
        elif t in DTYPES:
            dtype = np.dtype(DTYPES[t])
        else:
            problems.append(f"{v.causality} {v.name!r} has type {t}, which cosim does not know")
            continue
        fv = FmuVariable(v.name, v.valueReference, t, dtype, shape_of(v, structural, where),
                         v.variability or "continuous")
        (ins if v.causality == "input" else outs).append(fv)
    if fmi3:
        clocks_of(md, path, where, problems)
    if problems:
        raise ModelError(f"{where}: " + "; ".join(problems)
                         + " (cosim supports numeric, boolean, enumeration, string and "
                           "binary variables and time-based input clocks)")
    return ins, outs


def is_text(v) -> bool:
    """True for a String or Binary port (:class:`FmuVariable`)."""
    return v.type in TEXT_TYPES


def text_variables(md, causality: str) -> list:
    """The String and Binary variables of ``md`` of ``causality`` (``"input"``,
    ``"output"``), as fmpy model variables."""
    return [v for v in md.modelVariables
            if v.causality == causality and v.type in TEXT_TYPES]


def text_value(v, value, where: str):
    """``value`` checked for text variable ``v``: a ``str`` for a String, ``bytes`` for a
    Binary."""
    want = str if v.type == "String" else (bytes, bytearray)
    if not isinstance(value, want):
        raise ModelError(f"{where}: {v.name!r} is an FMI {v.type}; its value must be "
                         f"{'a str' if v.type == 'String' else 'bytes'}, got "
                         f"{type(value).__name__} {value!r}")
    return bytes(value) if v.type == "Binary" else value


def clocks_of(md, path, where: str, problems: list | None = None) -> list[Clock]:
    """The time-based input clocks of FMI 3.0 model description ``md`` of FMU file
    ``path``. Other clock kinds are problems (appended to ``problems``; raised at once when
    it is None)."""
    if not any(v.type == "Clock" for v in md.modelVariables):
        return []
    timing = clock_timing(path)
    found, bad = [], []
    for v in md.modelVariables:
        if v.type != "Clock":
            continue
        kind = v.intervalVariability
        interval, shift = timing.get(v.name, (None, 0.0))
        if v.causality == "input" and kind in ("constant", "fixed") and interval is not None:
            found.append(Clock(v.name, v.valueReference, interval, shift))
        else:
            how = ("an output clock" if v.causality == "output" else
                   f"an input clock of interval variability {kind!r}"
                   + (" without intervalDecimal" if kind in ("constant", "fixed") else ""))
            bad.append(f"clock {v.name!r} is {how}; only time-based input clocks (interval "
                       "variability 'constant' or 'fixed' with intervalDecimal) are supported")
    if bad:
        if problems is None:
            raise ModelError(f"{where}: " + "; ".join(bad))
        problems.extend(bad)
    return found


def exact_cast(values: np.ndarray, v, where: str) -> np.ndarray:
    """``values`` as ``v``'s dtype, refusing values that type cannot hold exactly."""
    if v.dtype == np.float64:
        return values
    out = values.astype(v.dtype)
    if not np.array_equal(out.astype(np.float64), values):
        raise SimulationError(f"{where}: input {v.name!r} is an FMI {v.type}; the value "
                              f"{values.tolist()} is not exactly one (convert it upstream)")
    return out
