"""Writing model files: Model / Subsystem -> YAML text that reads back to the same model."""

from __future__ import annotations

import enum
import os
from dataclasses import MISSING, fields
from pathlib import Path

import numpy as np
import yaml

from cosim.errors import ModelError
from cosim.model import registry as blocktypes
from cosim.model.block import has_spec
from cosim.model.diagram import Diagram, Model, Reference, Subsystem
from cosim.model.events import lifted
from cosim.modelfile.scalars import CoreResolver

__all__ = ["FORMAT_VERSION", "dump_model", "dump_subsystem", "emit", "model_data"]

FORMAT_VERSION = 1


class _Flow(dict):
    """A mapping written on one line."""


class _Dumper(yaml.emitter.Emitter, yaml.serializer.Serializer,
              yaml.representer.SafeRepresenter, CoreResolver):
    """Safe YAML writer whose quoting agrees with the core-schema reader."""

    def __init__(self, stream, **kw):
        yaml.emitter.Emitter.__init__(self, stream, canonical=kw.get("canonical"),
                                      indent=kw.get("indent"), width=kw.get("width"),
                                      allow_unicode=kw.get("allow_unicode"),
                                      line_break=kw.get("line_break"))
        yaml.serializer.Serializer.__init__(self, encoding=kw.get("encoding"),
                                            explicit_start=kw.get("explicit_start"),
                                            explicit_end=kw.get("explicit_end"),
                                            version=kw.get("version"), tags=kw.get("tags"))
        yaml.representer.SafeRepresenter.__init__(
            self, default_style=kw.get("default_style"),
            default_flow_style=kw.get("default_flow_style"),
            sort_keys=kw.get("sort_keys", False))
        CoreResolver.__init__(self)

    def increase_indent(self, flow=False, indentless=False):
        # Indent list items under their key ("connections:\n  - [a.out, b.in]").
        return super().increase_indent(flow, False)


_Dumper.add_representer(_Flow, lambda d, v: d.represent_mapping(
    "tag:yaml.org,2002:map", v, flow_style=True))


class _Writer:
    """Turns model objects into plain data, collecting what cannot be written."""

    def __init__(self, base_dir: Path):
        self.base_dir = base_dir
        self.problems: list[str] = []

    def value(self, v, where: str):
        if v is None or isinstance(v, (bool, str)):
            return v
        if isinstance(v, (np.bool_,)):
            return bool(v)
        if isinstance(v, (int, np.integer)):
            return int(v)
        if isinstance(v, (float, np.floating)):
            return float(v)
        if isinstance(v, enum.Enum):
            return self.value(v.value, where)
        if isinstance(v, np.ndarray):
            if v.dtype.kind not in "biuf":
                self.problems.append(f"{where}: arrays of {v.dtype} cannot be written")
                return None
            return self.value(v.tolist(), where)
        if isinstance(v, (list, tuple)):
            return [self.value(e, f"{where}[{i}]") for i, e in enumerate(v)]
        if isinstance(v, dict):
            bad = [k for k in v if not isinstance(k, str)]
            if bad:
                self.problems.append(f"{where}: keys {bad!r} are not strings")
            return {str(k): self.value(e, f"{where}.{k}") for k, e in v.items()}
        what = "a function" if callable(v) else f"a {type(v).__name__}"
        self.problems.append(f"{where} is {what}; model files hold numbers, strings, lists "
                             "and expressions only (no code)")
        return None

    def diagram(self, d: Diagram, prefix: str) -> dict:
        out: dict = {}
        blocks = {}
        for b in d.blocks:
            blocks[b.name] = self.entry(b, f"{prefix}{b.name}")
        if blocks:
            out["blocks"] = blocks
        wires = []
        for c in d.connections:   # consecutive wires from one source share a line
            if wires and wires[-1][0] == c.src:
                wires[-1].append(c.dst)
            else:
                wires.append([c.src, c.dst])
        if wires:
            out["connections"] = wires
        return out

    def entry(self, b, where: str) -> dict:
        if isinstance(b, Reference):
            src = b.source
            if callable(src) or not isinstance(src, str):
                self.problems.append(f"{where}: reference to a factory function cannot be "
                                     "written; register it (cosim.model.library.register) and "
                                     "reference it by name")
                src = None
            elif src.endswith((".yaml", ".yml")):
                src = self.relative(src)
            out = {"reference": src}
            if b.overrides:
                out["overrides"] = self.value(b.overrides, f"{where}.overrides")
            return _Flow(out) if len(repr(out)) < 70 else out
        if isinstance(b, Subsystem):
            out = {"type": "Subsystem"}
            if b.atomic:
                out["atomic"] = True
            for key in ("dt", "solver"):
                if getattr(b, key) is not None:
                    out[key] = self.value(getattr(b, key), f"{where}.{key}")
            if b.options:
                out["options"] = self.value(b.options, f"{where}.options")
            if b.context:
                out["context"] = self.value(b.context, f"{where}.context")
            out.update(self.diagram(b, f"{where}/"))
            return out
        type_name = blocktypes.name_of(type(b))
        if type_name is None:
            self.problems.append(f"{where}: block class {type(b).__module__}."
                                 f"{type(b).__qualname__} is not a registered block type; "
                                 "call cosim.model.registry.register_block_type(cls) first")
        if not has_spec(b):
            self.problems.append(f"{where}: {type(b).__name__} was not built through its "
                                 "constructor; its parameters are unknown")
            return {"type": type_name}
        params = self.value(b.spec(), f"{where}")
        out = {"type": type_name}
        if params:
            out["params"] = params
        short = len(repr(out)) < 80 and all(not isinstance(v, (list, dict)) or
                                            _flat(v) for v in (params or {}).values())
        return _Flow(out) if short else out

    def relative(self, src: str) -> str:
        try:
            return Path(os.path.relpath(src, self.base_dir)).as_posix()
        except ValueError:   # another drive
            return Path(src).as_posix()

    def config(self, cfg, where: str = "simulation") -> dict:
        """The fields of a SimulationConfig / CosimConfig that differ from the defaults."""
        from cosim.config import CosimConfig
        out = {}
        for f in fields(cfg):
            v = getattr(cfg, f.name)
            default = f.default if f.default is not MISSING else \
                f.default_factory() if f.default_factory is not MISSING else MISSING
            if default is not MISSING and f.name not in ("dt", "t_end") and v == default:
                continue
            out[f.name] = self.config(v, f"{where}.cosim") if isinstance(v, CosimConfig) \
                else self.value(v, f"{where}.{f.name}")
        return out


def _flat(v) -> bool:
    return all(not isinstance(e, (list, dict)) for e in (v.values() if isinstance(v, dict)
                                                          else v))


def emit(data: dict, path=None) -> str:
    """The YAML text of a model file's data (:func:`model_data`), written to ``path`` when
    given."""
    text = yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=None,
                     width=100, allow_unicode=True)
    if path is not None:
        Path(path).write_text(text, encoding="utf-8")
    return text


def dump_model(model: Model, path=None, *, simulation=None) -> str:
    """Write ``model`` as a model file.

    Parameters are written as given (expressions as their ``"=..."`` text, from
    ``block.spec()``); numpy arrays become nested lists, tuples lists.

    Parameters
    ----------
    model : Model
        A model as built (write it before running it: evaluation inlines references).
    path : str or os.PathLike, optional
        Where to write; library file references are written relative to its directory
        (else relative to the working directory).
    simulation : SimulationConfig, optional
        The ``simulation:`` section; defaults to ``model.simulation`` when set.

    Returns
    -------
    str
        The YAML text.

    Raises
    ------
    ModelError
        Listing everything that cannot be written (functions, unregistered block classes,
        references to factory functions, events with callbacks).
    """
    return emit(model_data(model, path, simulation=simulation), path)


def model_data(model: Model, path=None, *, simulation=None) -> dict:
    """What :func:`dump_model` writes, as the plain data (dicts, lists, scalars) before it
    becomes YAML text (:func:`emit`); same parameters, same errors."""
    base = Path(path).resolve().parent if path is not None else Path.cwd()
    w = _Writer(base)
    data: dict = {"version": FORMAT_VERSION, "model": model.name}
    if model.parameters:
        data["parameters"] = w.value(model.parameters, "parameters")
    if model.context:
        data["context"] = w.value(model.context, "context")
    data.update(w.diagram(model, ""))
    events = {}
    for ev in list(model.events) + lifted(model, atomic=True):
        if ev.name in events:
            w.problems.append(f"two events are named {ev.name!r} (a subsystem's events are "
                              "written as the model's, naming 'sub/block'); rename one")
        events[ev.name] = _event_data(w, ev)
    if events:
        data["events"] = events
    cfg = simulation if simulation is not None else getattr(model, "simulation", None)
    if cfg is not None:
        data["simulation"] = w.config(cfg)
    if w.problems:
        raise ModelError(f"model {model.name!r} cannot be written as a model file:\n" +
                         "\n".join(f"  {i + 1}. {p}" for i, p in enumerate(w.problems)))
    return data


def _event_data(w: _Writer, ev) -> dict:
    from cosim.model.events import Scheduled, ZeroCrossing
    where = f"event {ev.name!r}"
    if ev.callback is not None:
        w.problems.append(f"{where} has a callback; model files cannot hold code")
    for block, new in ev.reset.items():
        if callable(new):
            w.problems.append(f"{where}: reset of {block!r} is a function; model files hold "
                              "reset values only")
    out: dict = {"type": type(ev).__name__}
    if isinstance(ev, ZeroCrossing):
        out["watch"] = ev.watch
        out["index"] = ev.index
        out["direction"] = ev.direction.value
        out["tol"] = ev.tol
    elif isinstance(ev, Scheduled):
        out["times"] = list(ev.times)
        if ev.period is not None:
            out["period"] = ev.period
        out["start"] = ev.start
    if ev.reset:
        out["reset"] = {k: w.value(v, f"{where}.reset.{k}") for k, v in ev.reset.items()
                        if not callable(v)}
    out["stop"] = bool(ev.stop)
    return w.value(out, where)


def dump_subsystem(sub: Subsystem, path=None) -> str:
    """Write ``sub`` as a library file (``subsystem: <name>`` at top level).

    Raises
    ------
    ModelError
        Listing everything that cannot be written (see :func:`dump_model`).
    """
    base = Path(path).resolve().parent if path is not None else Path.cwd()
    w = _Writer(base)
    entry = w.entry(sub, sub.name)
    if sub.events or lifted(sub, atomic=True):
        w.problems.append("events: library files carry no events; add them to the model "
                          "that uses the subsystem, naming 'sub/block'")
    data = {"version": FORMAT_VERSION, "subsystem": sub.name}
    data.update((k, v) for k, v in entry.items() if k != "type")
    if w.problems:
        raise ModelError(f"subsystem {sub.name!r} cannot be written as a library file:\n" +
                         "\n".join(f"  {i + 1}. {p}" for i, p in enumerate(w.problems)))
    return emit(data, path)
