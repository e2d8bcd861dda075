"""Building models from a checked document: file tree -> Model / Subsystem, collecting every
problem (block types, parameters, expressions, references, connections, events, options)."""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from pathlib import Path, PurePosixPath, PureWindowsPath

from cosim.errors import ModelError
from cosim.model import declarations, registry as blocktypes
from cosim.model.block import NAME_RE, is_deferred
from cosim.model.diagram import Diagram, Model, Reference, Subsystem
from cosim.model.expr import check_expression
from cosim.modelfile.reader import Doc
from cosim.modelfile.references import LibraryFiles
from cosim.modelfile.schema import suggest

__all__ = ["Builder"]

_ENDPOINT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)$")
_ENTRY_KEYS = {
    "block": ("type", "params"),
    "subsystem": ("type", "atomic", "context", "dt", "solver", "options", "blocks",
                  "connections"),
    "reference": ("reference", "overrides"),
}
_EVENT_KEYS = {
    "ZeroCrossing": ("type", "watch", "index", "direction", "tol", "reset", "stop"),
    "Scheduled": ("type", "times", "period", "start", "reset", "stop"),
}


@dataclass
class _Ports:
    """What a connection may name on an entry (None: not known before evaluation)."""

    kind: str
    inputs: tuple[str, ...] | None
    outputs: tuple[str, ...] | None


class Builder:
    """Builds model objects from a checked document, adding every problem it finds.

    Parameters
    ----------
    doc : Doc
        The read document; problems are added to it.
    bad : set of tuple
        Paths that violate the schema (reported already): what they hold is not built.
    """

    def __init__(self, doc: Doc, bad: set[tuple]):
        self.doc = doc
        self.bad = bad
        self.files = LibraryFiles()
        # What later phases need to point at the file: each block's position by path, the
        # blocks that had problems here, and the endpoints of connections that were not made
        # (so a compile of the rest does not report their inputs as merely undriven).
        self.origins: dict[str, tuple[int, int]] = {}
        self.faulty: set[str] = set()
        self.loose: set[tuple[str, str]] = set()

    def ok(self, path: tuple) -> bool:
        """No schema violation at ``path`` or inside it."""
        n = len(path)
        return not any(b[:n] == path for b in self.bad)

    def get(self, mapping, path: tuple, key: str, types, default=None):
        """``mapping[key]`` if present, of ``types`` and not itself in violation of the schema
        (what it contains may be: containers are walked item by item), else ``default``."""
        if not isinstance(mapping, dict) or key not in mapping or path + (key,) in self.bad:
            return default
        v = mapping[key]
        allowed = types if isinstance(types, tuple) else (types,)
        if not isinstance(v, allowed) or isinstance(v, bool) and bool not in allowed:
            return default
        return v

    # -- values ---------------------------------------------------------------------------

    def expressions(self, value, path: tuple, scope: set[str] | None, where: str) -> bool:
        """Check every expression in ``value``; True if all are fine."""
        good = True
        if isinstance(value, str) and value.startswith("="):
            problem = check_expression(value, scope)
            if problem is not None:
                self.doc.add(path, f"{where} = {value!r}: {problem}")
                good = False
        elif isinstance(value, list):
            for i, v in enumerate(value):
                good &= self.expressions(v, path + (i,), scope, f"{where}[{i}]")
        elif isinstance(value, dict):
            for k, v in value.items():
                good &= self.expressions(v, path + (k,), scope, f"{where}.{k}")
        return good

    def variables(self, mapping, path: tuple, key: str, scope: set[str] | None,
                  where: str) -> dict:
        """A workspace mapping (context, overrides), its expressions checked in ``scope``
        and the mapping's own names (None: syntax only)."""
        values = {k: v for k, v in self.get(mapping, path, key, dict, {}).items()
                  if self.ok(path + (key, k))}
        inner = None if scope is None else scope | set(values)
        for name, v in values.items():
            self.expressions(v, path + (key, name), inner, f"{where}.{name}")
        return dict(values)

    # -- diagrams -------------------------------------------------------------------------

    def diagram(self, target: Diagram, body: dict, path: tuple, scope: set[str] | None,
                prefix: str) -> None:
        """Add ``body``'s blocks and connections to ``target``."""
        entries = self.get(body, path, "blocks", dict, {})
        # Every listed name counts for connections, even an entry with problems of its own.
        ports = {name: _Ports("?", None, None) for name in entries}
        missing = set()
        for name, entry in entries.items():
            epath = path + ("blocks", name)
            if isinstance(name, str):
                self.origins[prefix + name] = self.doc.where(epath, key=True)
            if not isinstance(entry, dict) or not isinstance(name, str) \
                    or not NAME_RE.match(name):
                missing.add(name)
                continue   # reported by the schema
            before = len(self.doc.problems)
            obj, ports[name] = self.entry(name, entry, epath, scope, prefix)
            if obj is not None:
                target.add(obj)
            else:
                missing.add(name)
            if obj is None or (len(self.doc.problems) > before and
                               not isinstance(obj, Subsystem)):
                self.faulty.add(prefix + name)
        self.connections(target, body, path, ports, prefix, missing)

    def entry(self, name: str, entry: dict, path: tuple, scope, prefix: str):
        where = f"block '{prefix}{name}'"
        has_type, has_ref = "type" in entry, "reference" in entry
        if has_type == has_ref:
            self.doc.add(path, f"{where}: give either 'type:' (a block type or Subsystem) or "
                               "'reference:' (a library definition)" +
                         (", not both" if has_type else ""), key=True)
            return None, _Ports("?", None, None)
        kind = "reference" if has_ref else \
            "subsystem" if entry.get("type") == "Subsystem" else "block"
        allowed = _ENTRY_KEYS[kind]
        for key in entry:
            if key not in allowed and self.ok(path + (key,)):
                what = {"block": f"a {entry.get('type')} block",
                        "subsystem": "a subsystem", "reference": "a reference"}[kind]
                self.doc.add(path + (key,), f"{where}: '{key}' does not apply to {what} "
                                            f"(its keys: {', '.join(allowed)})", key=True)
        if kind == "reference":
            return self.reference(name, entry, path, where)
        if kind == "subsystem":
            return self.subsystem(name, entry, path, scope, prefix, where)
        return self.block(name, entry, path, scope, where)

    def block(self, name, entry, path, scope, where):
        type_name = self.get(entry, path, "type", str)
        params = self.get(entry, path, "params", dict)
        if type_name is None or ("params" in entry and params is None):
            return None, _Ports("?", None, None)
        params = params or {}
        good = self.ok(path + ("params",))   # else some parameter name is invalid (reported)
        params = {k: v for k, v in params.items() if self.ok(path + ("params", k))}
        try:
            cls = blocktypes.lookup(type_name)
        except ModelError as err:
            self.doc.add(path + ("type",), f"{where}: {err}")
            return None, _Ports(type_name, None, None)
        where = f"{where} ({type_name})"
        signature = {p.name: p for p in declarations.parameters(cls)}
        for key, value in params.items():
            if key not in signature:
                self.doc.add(path + ("params", key), f"{where}: unknown parameter {key!r}"
                             f"{suggest(key, signature)} (parameters: "
                             f"{', '.join(signature) or 'none'})", key=True)
                good = False
            elif key in getattr(cls, "output_files", ()) and not self.doc.own_paths:
                why = _outside(value)
                if why:
                    self.doc.add(path + ("params", key), f"{where}: {key} {value!r} {why}; a "
                                 "model file writes only inside the run's folder (give "
                                 "another place from the command line or from Python)",
                                 key=True)
                    good = False
            else:
                good &= self.expressions(value, path + ("params", key), scope,
                                         f"{where} {key}")
        missing = [p for p, d in signature.items() if d.required and p not in params]
        if missing:
            self.doc.add(path, f"{where}: missing required parameter"
                         f"{'s' if len(missing) > 1 else ''} {', '.join(missing)}", key=True)
            good = False
        fixed = declarations.declared(cls)
        declared = _Ports(type_name, fixed.inputs, fixed.outputs)
        if not good:
            return None, declared
        kwargs = {k: _argument(k, v) for k, v in params.items()}
        try:
            blk = cls(name, **kwargs)
        except Exception as err:   # the constructor is the block author's code
            msg = str(err) if isinstance(err, ModelError) else f"{type(err).__name__}: {err}"
            self.doc.add(path, f"{where} cannot be built from its parameters: {msg}", key=True)
            return None, declared
        if is_deferred(blk):
            return blk, declared
        return blk, _Ports(type_name, tuple(blk.input_names), tuple(blk.output_names))

    def subsystem(self, name, entry, path, scope, prefix, where):
        context = self.variables(entry, path, "context", scope, f"{where} context")
        inner = None if scope is None else scope | set(context)
        atomic = self.get(entry, path, "atomic", bool, False)
        dt = self.get(entry, path, "dt", (int, float))
        solver = self.get(entry, path, "solver", str)
        options = self.get(entry, path, "options", dict, {})
        if solver is not None:
            self.solver(solver, path + ("solver",), where)
        self.options(options, path + ("options",), where)
        try:
            sub = Subsystem(name, atomic=atomic, context=context, dt=dt, solver=solver,
                            options=options)
            built = True
        except ModelError as err:
            self.doc.add(path, f"{where}: {err}", key=True)
            sub, built = Subsystem(name, context=context), False
        self.diagram(sub, entry, path, inner, f"{prefix}{name}/")
        body = self.get(entry, path, "blocks", dict, {})
        ins = tuple(n for n, e in body.items() if isinstance(e, dict) and e.get("type") == "Inport")
        outs = tuple(n for n, e in body.items()
                     if isinstance(e, dict) and e.get("type") == "Outport")
        return (sub if built else None), _Ports("Subsystem", ins, outs)

    def reference(self, name, entry, path, where):
        from cosim.model import library
        source = self.get(entry, path, "reference", str)
        overrides = self.variables(entry, path, "overrides", None, f"{where} overrides")
        if source is None:
            return None, _Ports("reference", None, None)
        if source.endswith((".yaml", ".yml")):
            file = Path(source)
            file = (file if file.is_absolute() else self.doc.base_dir / file).resolve()
            if not file.is_file():
                self.doc.add(path + ("reference",), f"{where}: library file {source!r} not "
                             f"found (looked for {file})")
                return None, _Ports("reference", None, None)
            own = (Path(self.doc.filename).resolve(),) if self.doc.from_file else ()
            cycle = self.files.cycle(file, own)
            if cycle:
                self.doc.add(path + ("reference",), f"{where}: library files reference each "
                             "other in a cycle: " + " -> ".join(p.name for p in cycle) +
                             "; a subsystem cannot contain itself")
                return None, _Ports("reference", None, None)
            outline = self.files.outline(file)
            ports = _Ports("reference", *outline[:2]) if outline else \
                _Ports("reference", None, None)
            return Reference(name, str(file), overrides), ports
        elif source not in library.registered():
            names = library.registered()
            self.doc.add(path + ("reference",), f"{where}: {source!r} is neither a registered "
                         f"library definition{suggest(source, names)} (registered: "
                         f"{', '.join(names) or 'none'}) nor a .yaml library file")
            return None, _Ports("reference", None, None)
        return Reference(name, source, overrides), _Ports("reference", None, None)


    def connections(self, target: Diagram, body: dict, path: tuple,
                    ports: dict[str, _Ports], prefix: str, missing: set) -> None:
        wires = self.get(body, path, "connections", list, [])
        driven: dict[str, tuple[str, int]] = {}
        names = list(ports)
        for i, wire in enumerate(wires):
            wpath = path + ("connections", i)
            if isinstance(wire, list):
                ends = [_ENDPOINT.match(r) if isinstance(r, str) else None for r in wire]
                if any(m is None or m.group(1) in missing for m in ends) \
                        or not self.ok(wpath):
                    self.loose.update((prefix + m.group(1), m.group(2)) for m in ends[1:]
                                      if m is not None)
            if not self.ok(wpath) or not isinstance(wire, list):
                continue
            good = True
            for j, ref in enumerate(wire):
                m = _ENDPOINT.match(ref) if isinstance(ref, str) else None
                if m is None:
                    good = False
                    continue
                blk, port = m.groups()
                role = "outputs" if j == 0 else "inputs"
                epath = wpath + (j,)
                if blk not in ports:
                    self.doc.add(epath, f"connection {ref!r}: no block {blk!r} in "
                                 f"{_diagram_name(prefix)}{suggest(blk, names)} (blocks: "
                                 f"{', '.join(names) or 'none'})")
                    good = False
                    continue
                info = ports[blk]
                have = getattr(info, role)
                if have is not None and port not in have:
                    other = info.inputs if role == "outputs" else info.outputs
                    if other is not None and port in other:
                        hint = (f"; {port!r} is an input: a connection starts at an output"
                                if j == 0 else f"; {port!r} is an output: only the first "
                                "element of a connection is a source")
                    else:
                        hint = suggest(port, have)
                    self.doc.add(epath, f"connection {ref!r}: {prefix}{blk} ({info.kind}) has "
                                 f"no {role[:-1]} {port!r}{hint} ({role}: "
                                 f"{', '.join(have) or 'none'})")
                    good = False
                    continue
                if j > 0:
                    if ref in driven:
                        src, line = driven[ref]
                        self.doc.add(epath, f"connection {wire[0]} -> {ref}: {ref} is already "
                                     f"driven by {src} (line {line}); an input takes one "
                                     "signal")
                        good = False
                    else:
                        driven[ref] = (wire[0], self.doc.where(epath)[0])
            if good:
                target.connect(wire[0], *wire[1:])
            else:
                self.loose.update((prefix + m.group(1), m.group(2)) for m in ends[1:]
                                  if m is not None)

    # -- options --------------------------------------------------------------------------

    def solver(self, name: str, path: tuple, where: str) -> bool:
        """Report an unknown solver ``name`` at ``path``; True when it is known."""
        from cosim.solvers import SOLVERS
        if name not in SOLVERS:
            self.doc.add(path, f"{where}: unknown solver {name!r}{suggest(name, SOLVERS)} "
                               f"(solvers: {', '.join(SOLVERS)})")
            return False
        return True

    def options(self, options: dict, path: tuple, where: str) -> None:
        from cosim.config import SimulationConfig
        known = [f.name for f in fields(SimulationConfig) if f.name not in ("dt", "solver")]
        for key in options:
            if key not in known:
                self.doc.add(path + (key,), f"{where}: option {key!r} is not a "
                             f"SimulationConfig field{suggest(key, known)} (options: "
                             f"{', '.join(known)})", key=True)

    def events(self, model: Model, data: dict) -> None:
        from cosim.model.events import Scheduled, ZeroCrossing
        classes = {"ZeroCrossing": ZeroCrossing, "Scheduled": Scheduled}
        for name, spec in self.get(data, (), "events", dict, {}).items():
            path = ("events", name)
            if not self.ok(path) or not isinstance(spec, dict):
                continue
            kind = spec["type"]
            keys = _EVENT_KEYS[kind]
            wrong = [k for k in spec if k not in keys]
            for k in wrong:
                self.doc.add(path + (k,), f"event {name!r}: '{k}' does not apply to a {kind} "
                             f"event (its keys: {', '.join(keys)})", key=True)
            if wrong:
                continue
            kwargs = {k: v for k, v in spec.items() if k != "type"}
            for k in ("tol", "period", "start"):
                if isinstance(kwargs.get(k), int):
                    kwargs[k] = float(kwargs[k])
            try:
                model.add_event(classes[kind](name, **kwargs))
            except (ModelError, TypeError, ValueError) as err:
                self.doc.add(path, f"event {name!r}: {err}", key=True)

    def simulation(self, data: dict):
        from cosim.config import CosimConfig, SimulationConfig
        spec = self.get(data, (), "simulation", dict)
        if spec is None:
            return None
        # The solver is checked even when another field of the section is wrong (one pass
        # reports both).
        if isinstance(spec.get("solver"), str) and self.ok(("simulation", "solver")):
            if not self.solver(spec["solver"], ("simulation", "solver"), "simulation"):
                return None     # reported with its line: not again by the config
        if not self.ok(("simulation",)):
            return None
        kwargs = dict(spec)
        try:
            if isinstance(kwargs.get("cosim"), dict):
                kwargs["cosim"] = CosimConfig(**kwargs["cosim"])
            return SimulationConfig(**kwargs)
        except (ModelError, TypeError, ValueError) as err:
            self.doc.add(("simulation",), f"simulation: {err}", key=True)
            return None


def _diagram_name(prefix: str) -> str:
    return f"subsystem {prefix[:-1]!r}" if prefix else "the model"


def _outside(value) -> str | None:
    """Why ``value``, a file a block writes, would land outside the run's folder, or None:
    it must be a relative path that stays inside (no ``..``, no drive or home)."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        return "is not a file name"
    if value.startswith(("=", "~")):
        return "must be a plain relative path (not an expression or a home path)"
    posix, windows = PurePosixPath(value), PureWindowsPath(value)
    if posix.is_absolute() or windows.is_absolute() or windows.drive:
        return "is an absolute path"
    if ".." in posix.parts or ".." in windows.parts:
        return "leaves the run's folder (..)"
    return None


def _argument(key: str, value):
    """A file value as a constructor argument: a two-element sample time is a tuple."""
    if key == "sample_time" and isinstance(value, list):
        return tuple(value)
    return value
