"""Model files: YAML text carrying what the Python API builds, read safely, every problem located.

A model file holds one model: its name, parameters, blocks, nested subsystems, library
references, connections, events and simulation options. A *library file* holds one subsystem
definition that model files reference by path. ``Model.from_yaml`` / :func:`load_model` read a
model file, ``model.to_yaml()`` / :func:`dump_model` write one, and :func:`load_subsystem` reads
a library file (the evaluation phase calls it for ``reference: something.yaml``).

Format
------
::

    version: 1                      # optional; the format version
    model: servo                    # model name (default: the file name)
    parameters:                     # the model workspace: values or "=expressions"
      kp: 0.8
      wn: =2*pi*0.5                 # a string starting with "=" is an expression
    blocks:                         # name -> entry, in diagram order
      ref:  {type: Sine, params: {frequency: 0.2, sample_time: 0.01}}
      err:  {type: Sum, params: {signs: "+-"}}
      ctrl:                         # a nested diagram
        type: Subsystem
        atomic: true                # default false (virtual)
        dt: 0.05                    # atomic only: dt, solver, options
        context: {k: =kp}           # this diagram's workspace
        blocks:
          e:  {type: Inport}        # Inport/Outport blocks are the subsystem's ports,
          kp: {type: Gain, params: {k: =k}}
          u:  {type: Outport}       # in the order they are listed
        connections:
          - [e.out, kp.in]
          - [kp.out, u.in]
      plant: {reference: motor.yaml, overrides: {R: 2.0}}   # or a registered library name
      send: {type: Goto, params: {tag: y, visibility: global}}
    connections:                    # [source output, destination input, more inputs...]
      - [ref.out, err.in1]
      - [plant.y, err.in2, send.in] # fan-out: one source, several destinations
      - [err.out, ctrl.e]
      - [ctrl.u, plant.u]
    events:                         # name -> event; actions are resets and stop (no code)
      hit:  {type: ZeroCrossing, watch: plant/x.out, direction: rising, stop: true}
      kick: {type: Scheduled, times: [1.0, 2.0], reset: {plant/x: [0.0]}}
    simulation:                     # SimulationConfig fields (dt and t_end required)
      dt: 0.01
      t_end: 10.0
      solver: RK4
      # cosim: {H: 0.05}          # co-simulate the atomic subsystems (CosimConfig fields)

An entry of ``blocks`` is exactly one of: a block (``type:`` a registered block type, see
:mod:`cosim.model.registry` and ``cosim blocks``; ``params:`` its constructor arguments by name,
as ``block.spec()`` gives them); a subsystem (``type: Subsystem`` with ``atomic``, ``context``,
``dt``, ``solver``, ``options``, ``blocks``, ``connections``); or a reference (``reference:``
a name registered with :func:`cosim.model.library.register` or a ``.yaml`` library file path,
relative to the referencing file; ``overrides:`` values for the definition's context).

A library file is a subsystem at top level::

    subsystem: motor                # the definition's name (a reference renames it)
    context: {R: 1.0, L: 0.5}       # defaults the reference's overrides replace
    blocks: {...}
    connections: [...]

Scalars follow the YAML 1.2 core schema: ``1e-3`` is a number, ``yes``/``on`` are strings, only
``true``/``false`` are booleans. Arrays are nested lists; a ``(period, offset)`` sample time is a
two-element list.

Safety and errors
-----------------
Files are read as plain data only: no tags (``!!python/object`` and every other tag is
refused), at most :data:`MAX_BYTES` bytes, :data:`MAX_DEPTH` levels of nesting and
:data:`MAX_VALUES` values with aliases expanded (an alias bomb is refused before it expands).
Block types come from the registry, references from the library registry or ``.yaml`` files:
a file can never name a module to import or run code. The structure is checked against
``cosim/modelfile/model_schema.json``, then the meaning (block types, parameter names, missing
parameters, blocks that cannot be built, expressions, connections, events, simulation options);
every problem found is reported in one :class:`~cosim.errors.CompileError`, each as
``file.yaml:LINE:COL: message``.
"""

from __future__ import annotations

import copy
import difflib
import enum
import functools
import json
import math
import os
import re
import stat
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path

import numpy as np
import yaml
from yaml.events import (AliasEvent, DocumentStartEvent, MappingEndEvent, MappingStartEvent,
                         ScalarEvent, SequenceEndEvent, SequenceStartEvent)
from yaml.nodes import ScalarNode

from cosim.model import registry as blocktypes
from cosim.model.block import NAME_RE, is_deferred
from cosim.errors import CompileError, ModelError
from cosim.model.diagram import Diagram, Model, Reference, Subsystem
from cosim.model.expr import check_expression

__all__ = ["MAX_BYTES", "MAX_DEPTH", "MAX_VALUES", "check_expression", "dump_model",
           "dump_subsystem", "load", "load_model", "load_subsystem", "schema"]

#: Largest file read (bytes).
MAX_BYTES = 10 * 2**20
#: Deepest nesting of mappings and lists.
MAX_DEPTH = 64
#: Most values (scalars, mappings, lists) in a document, aliases expanded.
MAX_VALUES = 1_000_000

FORMAT_VERSION = 1
_YAML_TAG = "tag:yaml.org,2002:"
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


# --- YAML 1.2 core-schema scalars (shared by reading and writing) -----------------------------

_PLAIN = (
    ("null", re.compile(r"^(?:~|null|Null|NULL|)$")),
    ("bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")),
    ("int", re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")),
    ("float", re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                         r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$")),
)


def _plain_kind(text: str) -> str:
    """The core-schema type of an untagged plain scalar."""
    for kind, rx in _PLAIN:
        if rx.match(text):
            return kind
    return "str"


def _convert(kind: str, text: str):
    """The Python value of scalar ``text`` of core-schema type ``kind`` (ValueError if not)."""
    if kind == "str":
        return text
    if _plain_kind(text) != kind and not (kind == "float" and _plain_kind(text) == "int"):
        raise ValueError(f"{text!r} is not a valid {kind}")
    if kind == "null":
        return None
    if kind == "bool":
        return text.lower() == "true"
    if kind == "int":
        if text.startswith(("0o", "0x")):
            return int(text[2:], 8 if text[1] == "o" else 16)
        return int(text)
    low = text.lower().lstrip("+")
    if low in (".inf", "-.inf"):
        return -math.inf if low.startswith("-") else math.inf
    if low == ".nan":
        return math.nan
    return float(text)


class _CoreResolver(yaml.resolver.BaseResolver):
    """Tells the writer which plain strings would read back as something else (to quote them)."""

    def resolve(self, kind, value, implicit):
        if kind is ScalarNode and implicit[0]:
            return _YAML_TAG + _plain_kind(value)
        return super().resolve(kind, value, implicit)


# --- reading: plain data and the position of every value -------------------------------------

class _Refuse(Exception):
    """The document cannot be read any further (hostile or broken); carries the location."""

    def __init__(self, mark, message):
        super().__init__(message)
        self.mark = mark


@dataclass
class _Frame:
    kind: str                   # "map" or "seq"
    value: object
    path: tuple
    anchor: str | None
    count: int = 1
    key: object = None          # map: the pending key (_NO_KEY before it is read)
    skip: bool = False          # map: drop the pending value (duplicate or bad key)


_NO_KEY = object()


def _pos(mark) -> tuple[int, int]:
    return (mark.line + 1, mark.column + 1)


def _tag_message(tag: str) -> str:
    short = "!!" + tag[len(_YAML_TAG):] if tag.startswith(_YAML_TAG) else tag
    return (f"tag {short} is not allowed: model files hold plain data (numbers, strings, "
            "lists, mappings), no tags")


@dataclass
class _Doc:
    """One read document: its data, where each value and key is, and the problems found."""

    filename: str
    base_dir: Path
    from_file: bool = False
    data: object = None
    marks: dict = field(default_factory=dict)       # path -> (line, col) of the value
    key_marks: dict = field(default_factory=dict)   # path -> (line, col) of its mapping key
    problems: list = field(default_factory=list)    # (line, col, message)

    def where(self, path: tuple, key: bool = False) -> tuple[int, int]:
        """Position of ``path`` (of its key with ``key``), else of its nearest ancestor."""
        if key and path in self.key_marks:
            return self.key_marks[path]
        while path not in self.marks and path:
            path = path[:-1]
        return self.marks.get(path, (1, 1))

    def add(self, path: tuple, message: str, key: bool = False) -> None:
        self.problems.append((*self.where(path, key), message))

    def error(self, name: str) -> CompileError:
        lines = [f"{self.filename}:{line}:{col}: {msg}"
                 for line, col, msg in sorted(self.problems, key=lambda p: (p[0], p[1]))]
        return CompileError(lines, name)


def _event_loader():
    return yaml.CBaseLoader if getattr(yaml, "__with_libyaml__", False) else yaml.BaseLoader


def _scalar(ev: ScalarEvent):
    """The value of a scalar event; ValueError for a refused or malformed tagged scalar."""
    tag = ev.tag
    if tag is None or tag == "!":
        return _convert(_plain_kind(ev.value), ev.value) if ev.implicit[0] and tag is None \
            else ev.value
    kind = tag[len(_YAML_TAG):] if tag.startswith(_YAML_TAG) else None
    if kind not in ("str", "int", "float", "bool", "null"):
        raise ValueError(_tag_message(tag))
    return _convert(kind, ev.value)


def _compose(doc: _Doc, text: str) -> None:
    """Read ``text`` into ``doc.data`` event by event: no recursion, no object construction
    beyond plain data, nesting depth and alias expansion bounded as they are read."""
    stack: list[_Frame] = []
    anchors: dict[str, tuple[object, int]] = {}
    open_anchors: set[str] = set()
    total = expanded = 0
    documents = 0
    root = _NO_KEY

    def attach(value, count):
        nonlocal root
        if not stack:
            root = value
            return
        f = stack[-1]
        f.count += count
        if f.kind == "seq":
            f.value.append(value)
        else:
            if not f.skip:
                f.value[f.key] = value
            f.key, f.skip = _NO_KEY, False

    def child_path():
        f = stack[-1] if stack else None
        if f is None:
            return ()
        return f.path + ((len(f.value),) if f.kind == "seq" else (f.key,))

    def count(n, mark, via_alias=False):
        nonlocal total, expanded
        total += n
        if via_alias:
            expanded += n
        if total > MAX_VALUES:
            if expanded:
                raise _Refuse(mark, f"aliases expand the document to more than {MAX_VALUES:,} "
                                    "values (an alias bomb?); write the values out or use "
                                    "parameters")
            raise _Refuse(mark, f"the document has more than {MAX_VALUES:,} values; model files "
                                "describe models, data belongs in data files")

    events = yaml.parse(text, Loader=_event_loader())
    try:
        for ev in events:
            if isinstance(ev, DocumentStartEvent):
                documents += 1
                if documents > 1:
                    raise _Refuse(ev.start_mark, "a model file holds one YAML document; "
                                                 "remove the second '---'")
                continue
            if isinstance(ev, (MappingEndEvent, SequenceEndEvent)):
                f = stack.pop()
                if f.anchor is not None:
                    anchors[f.anchor] = (f.value, f.count)
                    open_anchors.discard(f.anchor)
                attach(f.value, f.count)
                continue
            if not isinstance(ev, (ScalarEvent, AliasEvent, MappingStartEvent,
                                   SequenceStartEvent)):
                continue
            mark = _pos(ev.start_mark)
            f = stack[-1] if stack else None
            if f is not None and f.kind == "map" and f.key is _NO_KEY:
                # A mapping key: must be a plain string.
                count(1, ev.start_mark)
                if not isinstance(ev, ScalarEvent):
                    raise _Refuse(ev.start_mark, "mapping keys must be plain names, not "
                                                 "lists, mappings or aliases")
                try:
                    key = _scalar(ev)
                except ValueError as err:
                    doc.problems.append((*mark, str(err)))
                    key = None
                else:
                    if not isinstance(key, str):
                        doc.problems.append((*mark, f"key {ev.value!r} must be a name (a "
                                                    "string); quote it"))
                if not isinstance(key, str):
                    f.key, f.skip = object(), True
                    continue
                if key in f.value:
                    first = doc.key_marks.get(f.path + (key,), (0, 0))[0]
                    doc.problems.append((*mark, f"duplicate key {key!r} (first given on line "
                                                f"{first}); each key may appear once"))
                    f.key, f.skip = object(), True
                    continue
                f.key = key
                doc.key_marks[f.path + (key,)] = mark
                continue
            path = child_path()
            doc.marks.setdefault(path, mark)
            if isinstance(ev, AliasEvent):
                if ev.anchor in open_anchors:
                    raise _Refuse(ev.start_mark, f"alias *{ev.anchor} refers to a value that "
                                                 "contains it (a recursive alias)")
                if ev.anchor not in anchors:
                    raise _Refuse(ev.start_mark, f"alias *{ev.anchor} has no anchor "
                                                 f"&{ev.anchor} before it")
                value, n = anchors[ev.anchor]
                count(n, ev.start_mark, via_alias=True)
                attach(copy.deepcopy(value), n)
                continue
            count(1, ev.start_mark)
            if isinstance(ev, ScalarEvent):
                try:
                    value = _scalar(ev)
                except ValueError as err:
                    doc.problems.append((*mark, str(err)))
                    value = None
                if ev.anchor is not None:
                    anchors[ev.anchor] = (value, 1)
                attach(value, 1)
                continue
            # A mapping or a list starts.
            want = "map" if isinstance(ev, MappingStartEvent) else "seq"
            if ev.tag not in (None, "!", _YAML_TAG + want):
                doc.problems.append((*mark, _tag_message(ev.tag)))
            if len(stack) >= MAX_DEPTH:
                raise _Refuse(ev.start_mark, f"values are nested more than {MAX_DEPTH} levels "
                                             "deep")
            frame = _Frame(want, {} if want == "map" else [], path, ev.anchor,
                           key=_NO_KEY if want == "map" else None)
            if ev.anchor is not None:
                open_anchors.add(ev.anchor)
            stack.append(frame)
    except _Refuse as err:
        doc.problems.append((*_pos(err.mark), str(err)))
        doc.data = None
        return
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        what = " ".join(p for p in (err.context, err.problem) if p)
        doc.problems.append((*(_pos(mark) if mark else (1, 1)), f"YAML syntax error: {what}"))
        doc.data = None
        return
    except yaml.YAMLError as err:
        doc.problems.append((1, 1, f"YAML error: {err}"))
        doc.data = None
        return
    doc.data = None if root is _NO_KEY else root


def _read(source, what: str) -> tuple[str, str, Path]:
    """``(text, display name, base directory)`` of a path or of YAML text.

    A :class:`pathlib.Path`, or a one-line string that names an existing file, ends in
    ``.yaml``/``.yml`` or has no ``:``, is a path; any other string is YAML text.
    """
    is_path = isinstance(source, os.PathLike) or (
        isinstance(source, str) and source.strip() and "\n" not in source
        and (source.endswith((".yaml", ".yml")) or ":" not in source
             or os.path.isfile(source)))
    if not is_path:
        if not isinstance(source, str):
            raise ModelError(f"{what}: expected a path or YAML text, got "
                             f"{type(source).__name__}")
        if len(source) > MAX_BYTES or len(source.encode("utf-8")) > MAX_BYTES:
            raise CompileError([f"<string>: the text is larger than {MAX_BYTES:,} bytes; model "
                                "files are refused above that size"], "<string>")
        return source, "<string>", Path.cwd()
    path = Path(source)
    name = str(path)
    try:
        st = path.stat()
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError
        if not stat.S_ISREG(st.st_mode):   # a FIFO or device would block or never end
            raise ModelError(f"{what}: {name!r} is not a regular file")
        size = st.st_size
        if size > MAX_BYTES:
            raise CompileError([f"{name}: the file has {size:,} bytes; model files are "
                                f"refused above {MAX_BYTES:,} bytes"], name)
        with open(path, "rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise ModelError(f"{what}: no such file {name!r}") from None
    except IsADirectoryError:
        raise ModelError(f"{what}: {name!r} is a directory, not a model file") from None
    except OSError as err:
        raise ModelError(f"{what}: cannot read {name!r}: {err.strerror or err}") from None
    if len(raw) > MAX_BYTES:   # grew while we looked
        raise CompileError([f"{name}: the file is larger than {MAX_BYTES:,} bytes"], name)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise CompileError([f"{name}: the file is not UTF-8 text (byte {err.start})"],
                           name) from None
    return text, name, path.resolve().parent


# --- the schema ----------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def schema() -> dict:
    """The JSON Schema of model and library files (``cosim/modelfile/model_schema.json``)."""
    return json.loads(Path(__file__).with_name("model_schema.json").read_text("utf-8"))


@functools.lru_cache(maxsize=1)
def _validator():
    import jsonschema
    return jsonschema.Draft202012Validator(schema())


def _dotted(path: tuple) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


def _suggest(word: str, choices) -> str:
    close = difflib.get_close_matches(str(word), list(choices), n=3, cutoff=0.6)
    return f"; did you mean {', '.join(map(repr, close))}?" if close else ""


_PATTERNS = {   # what a string failing a pattern of the schema was meant to be
    "name": "is not a valid name (letters, digits and '_', not starting with a digit)",
    "endpoint": "is not a 'block.port' reference",
    "endpointPath": "is not a logged signal 'block.port' or 'path/to/block.port'",
}


def _schema_errors(err):
    """The errors to report for one schema error: for ``anyOf``/``oneOf``, those of the
    alternative the value was evidently meant to match (not one rejected by its type)."""
    if err.validator not in ("anyOf", "oneOf") or not err.context:
        return [err]
    branches: dict[int, list] = {}
    for sub in err.context:
        branches.setdefault(sub.relative_schema_path[0], []).append(sub)
    meant = [errs for errs in branches.values()
             if not any(e.validator == "type" and not e.relative_path for e in errs)]
    if len(meant) == 1:
        return [e for sub in meant[0] for e in _schema_errors(sub)]
    from jsonschema.exceptions import best_match
    return [best_match(err.context)]


def _check_schema(doc: _Doc) -> set[tuple]:
    """Report every schema violation; return the paths that violate it."""
    defs = schema()["$defs"]
    patterns = {defs[k]["pattern"]: msg for k, msg in _PATTERNS.items()}
    bad: set[tuple] = set()
    for err in (e for top in _validator().iter_errors(doc.data) for e in _schema_errors(top)):
        path = tuple(err.absolute_path)
        if err.validator == "additionalProperties" and isinstance(err.instance, dict):
            allowed = err.schema.get("properties", {})
            for key in err.instance:
                if key not in allowed:
                    bad.add(path + (key,))
                    doc.add(path + (key,), f"{_dotted(path)}: unknown key {key!r}"
                            f"{_suggest(key, allowed)} (keys: {', '.join(allowed)})", key=True)
            continue
        if "propertyNames" in err.schema_path:
            bad.add(path + (err.instance,))
            doc.add(path + (err.instance,), f"{_dotted(path)}: {err.instance!r} is not a valid "
                    "name (letters, digits and '_', not starting with a digit)", key=True)
            continue
        bad.add(path)
        if err.validator == "pattern" and err.validator_value in patterns:
            doc.add(path, f"{_dotted(path)}: {err.instance!r} "
                          f"{patterns[err.validator_value]}")
        else:
            doc.add(path, f"{_dotted(path)}: {err.message}")
    return bad


# --- building the model --------------------------------------------------------------------

@dataclass
class _Ports:
    """What a connection may name on an entry (None: not known before evaluation)."""

    kind: str
    inputs: tuple[str, ...] | None
    outputs: tuple[str, ...] | None


class _Builder:
    """Builds model objects from a checked document, adding every problem it finds."""

    def __init__(self, doc: _Doc, bad: set[tuple]):
        self.doc = doc
        self.bad = bad
        self._outlines: dict[Path, tuple | None] = {}
        self._acyclic: set[Path] = set()

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
        for name, entry in entries.items():
            epath = path + ("blocks", name)
            if not isinstance(entry, dict) or not isinstance(name, str) \
                    or not NAME_RE.match(name):
                continue   # reported by the schema
            obj, ports[name] = self.entry(name, entry, epath, scope, prefix)
            if obj is not None:
                target.add(obj)
        self.connections(target, body, path, ports, prefix)

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
        signature = {p.name: p for p in blocktypes.parameters(cls)}
        for key, value in params.items():
            if key not in signature:
                self.doc.add(path + ("params", key), f"{where}: unknown parameter {key!r}"
                             f"{_suggest(key, signature)} (parameters: "
                             f"{', '.join(signature) or 'none'})", key=True)
                good = False
            else:
                good &= self.expressions(value, path + ("params", key), scope,
                                         f"{where} {key}")
        missing = [p for p, d in signature.items() if d.required and p not in params]
        if missing:
            self.doc.add(path, f"{where}: missing required parameter"
                         f"{'s' if len(missing) > 1 else ''} {', '.join(missing)}", key=True)
            good = False
        fixed = blocktypes.declared(cls)
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
            cycle = self.cycle(file, own)
            if cycle:
                self.doc.add(path + ("reference",), f"{where}: library files reference each "
                             "other in a cycle: " + " -> ".join(p.name for p in cycle) +
                             "; a subsystem cannot contain itself")
                return None, _Ports("reference", None, None)
            outline = self.outline(file)
            ports = _Ports("reference", *outline[:2]) if outline else \
                _Ports("reference", None, None)
            return Reference(name, str(file), overrides), ports
        elif source not in library.registered():
            names = library.registered()
            self.doc.add(path + ("reference",), f"{where}: {source!r} is neither a registered "
                         f"library definition{_suggest(source, names)} (registered: "
                         f"{', '.join(names) or 'none'}) nor a .yaml library file")
            return None, _Ports("reference", None, None)
        return Reference(name, source, overrides), _Ports("reference", None, None)

    def outline(self, file: Path):
        """``(inputs, outputs, referenced files)`` of library file ``file``, read without
        building anything; None when it is not a readable library file (loading it will
        report why)."""
        if file in self._outlines:
            return self._outlines[file]
        self._outlines[file] = None
        try:
            text, _, base = _read(file, "reference")
        except ModelError:
            return None
        doc = _Doc(str(file), base)
        _compose(doc, text)
        data = doc.data
        if not isinstance(data, dict) or "subsystem" not in data:
            return None
        refs: list[Path] = []

        def walk(blocks, depth=0):
            for e in blocks.values() if isinstance(blocks, dict) and depth < MAX_DEPTH else ():
                if not isinstance(e, dict):
                    continue
                r = e.get("reference")
                if isinstance(r, str) and r.endswith((".yaml", ".yml")):
                    refs.append((Path(r) if Path(r).is_absolute() else base / r).resolve())
                if e.get("type") == "Subsystem":
                    walk(e.get("blocks"), depth + 1)

        blocks = data.get("blocks") if isinstance(data.get("blocks"), dict) else {}
        walk(blocks)
        kinds = [(n, e.get("type")) for n, e in blocks.items() if isinstance(e, dict)]
        self._outlines[file] = (tuple(n for n, t in kinds if t == "Inport"),
                                tuple(n for n, t in kinds if t == "Outport"), refs)
        return self._outlines[file]

    def cycle(self, file: Path, chain: tuple) -> list[Path] | None:
        """A cycle of library file references through ``file`` after ``chain``, or None."""
        if file in chain:
            return [*chain[chain.index(file):], file]
        if file in self._acyclic or len(chain) > MAX_DEPTH:
            return None
        outline = self.outline(file)
        for ref in outline[2] if outline else ():
            found = self.cycle(ref, chain + (file,))
            if found:
                return found
        self._acyclic.add(file)
        return None

    def connections(self, target: Diagram, body: dict, path: tuple,
                    ports: dict[str, _Ports], prefix: str) -> None:
        wires = self.get(body, path, "connections", list, [])
        driven: dict[str, tuple[str, int]] = {}
        names = list(ports)
        for i, wire in enumerate(wires):
            wpath = path + ("connections", i)
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
                                 f"{_diagram_name(prefix)}{_suggest(blk, names)} (blocks: "
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
                        hint = _suggest(port, have)
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

    # -- options --------------------------------------------------------------------------

    def solver(self, name: str, path: tuple, where: str) -> None:
        from cosim.solvers import SOLVERS
        if name not in SOLVERS:
            self.doc.add(path, f"{where}: unknown solver {name!r}{_suggest(name, SOLVERS)} "
                               f"(solvers: {', '.join(SOLVERS)})")

    def options(self, options: dict, path: tuple, where: str) -> None:
        from cosim.config import SimulationConfig
        known = [f.name for f in fields(SimulationConfig) if f.name not in ("dt", "solver")]
        for key in options:
            if key not in known:
                self.doc.add(path + (key,), f"{where}: option {key!r} is not a "
                             f"SimulationConfig field{_suggest(key, known)} (options: "
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
        if spec is None or not self.ok(("simulation",)):
            return None
        kwargs = dict(spec)
        if "solver" in kwargs:
            self.solver(kwargs["solver"], ("simulation", "solver"), "simulation")
        try:
            if isinstance(kwargs.get("cosim"), dict):
                kwargs["cosim"] = CosimConfig(**kwargs["cosim"])
            return SimulationConfig(**kwargs)
        except (ModelError, TypeError, ValueError) as err:
            self.doc.add(("simulation",), f"simulation: {err}", key=True)
            return None


def _diagram_name(prefix: str) -> str:
    return f"subsystem {prefix[:-1]!r}" if prefix else "the model"


def _argument(key: str, value):
    """A file value as a constructor argument: a two-element sample time is a tuple."""
    if key == "sample_time" and isinstance(value, list):
        return tuple(value)
    return value


def _parse(source, what: str) -> tuple[_Doc, set]:
    text, filename, base_dir = _read(source, what)
    doc = _Doc(filename, base_dir, from_file=filename != "<string>")
    _compose(doc, text)
    if doc.data is None and not doc.problems:
        doc.add((), "the file is empty; a model file starts with 'model: <name>' and a "
                     "library file with 'subsystem: <name>'")
    if doc.data is None:
        return doc, set()
    if not isinstance(doc.data, dict):
        doc.add((), "the top level must be a mapping ('model: <name>', 'blocks:', ...), not a "
                    f"{type(doc.data).__name__}")
        doc.data = None
        return doc, set()
    return doc, _check_schema(doc)


def load_model(source) -> Model:
    """Read a model file.

    Parameters
    ----------
    source : str or os.PathLike
        A path (a :class:`~pathlib.Path`, or a one-line string that names an existing
        file, ends in ``.yaml``/``.yml`` or has no ``:``), or the YAML text itself.

    Returns
    -------
    Model
        The model, as written (references not yet inlined, expressions not yet evaluated).
        Its ``simulation`` attribute is the file's :class:`~cosim.config.SimulationConfig`,
        or None when the file has no ``simulation:`` section.

    Raises
    ------
    CompileError
        Listing every problem of the file, each as ``file.yaml:LINE:COL: message``.
    ModelError
        When the file cannot be read at all.
    """
    return _model(*_parse(source, "load_model"))


def _model(doc: _Doc, bad: set) -> Model:
    data = doc.data
    if isinstance(data, dict) and "subsystem" in data:
        doc.add(("subsystem",), "this is a library (subsystem) file; reference it from a "
                                "model ('reference: file.yaml') or use load_subsystem()",
                key=True)
        data = None
    if data is None:
        raise doc.error(doc.filename)
    b = _Builder(doc, bad)
    default = Path(doc.filename).stem if doc.filename != "<string>" else "model"
    name = b.get(data, (), "model", str, default)
    model = Model(name)
    model.parameters = {k: v for k, v in b.get(data, (), "parameters", dict, {}).items()
                        if b.ok(("parameters", k))}
    model.context = {k: v for k, v in b.get(data, (), "context", dict, {}).items()
                     if b.ok(("context", k))}
    # Parameters and the top context form one workspace (see cosim.model.evaluate).
    scope = set(model.parameters) | set(model.context)
    for key, values in (("parameters", model.parameters), ("context", model.context)):
        for var, v in values.items():
            b.expressions(v, (key, var), scope, f"{key}.{var}")
    b.diagram(model, data, (), scope, "")
    b.events(model, data)
    model.simulation = b.simulation(data)
    if doc.problems:
        raise doc.error(doc.filename)
    return model


def load_subsystem(path, name: str | None = None) -> Subsystem:
    """Read a library file: a subsystem definition (``subsystem: <name>`` at top level).

    Parameters
    ----------
    path : str or os.PathLike
        The file (or YAML text, as for :func:`load_model`).
    name : str, optional
        Name of the returned subsystem; defaults to the file's ``subsystem:`` name.

    Returns
    -------
    Subsystem

    Raises
    ------
    CompileError
        Listing every problem of the file, each as ``file.yaml:LINE:COL: message``.
    """
    return _subsystem(*_parse(path, "load_subsystem"), name)


def _subsystem(doc: _Doc, bad: set, name: str | None) -> Subsystem:
    data = doc.data
    if isinstance(data, dict) and "subsystem" not in data:
        doc.add((), "a library file starts with 'subsystem: <name>'" +
                (" (this is a model file)" if "model" in data else ""))
        data = None
    if data is None:
        raise doc.error(doc.filename)
    b = _Builder(doc, bad)
    own = b.get(data, (), "subsystem", str, "subsystem")
    entry = dict(data, type="Subsystem")
    entry.pop("subsystem", None)
    entry.pop("version", None)
    sub, _ = b.subsystem(own if name is None else name, entry, (), None, "",
                         f"subsystem {own!r}")
    if doc.problems or sub is None:
        raise doc.error(doc.filename)
    return sub


def load(source) -> Model | Subsystem:
    """Read a model file or a library file, whichever ``source`` is (see :func:`load_model`).

    A file whose top level has ``subsystem:`` is a library file (returns a Subsystem);
    otherwise a model file (returns a Model).
    """
    doc, bad = _parse(source, "load")
    if isinstance(doc.data, dict) and "subsystem" in doc.data:
        return _subsystem(doc, bad, None)
    return _model(doc, bad)


# --- writing -------------------------------------------------------------------------------

class _Flow(dict):
    """A mapping written on one line."""


class _Dumper(yaml.emitter.Emitter, yaml.serializer.Serializer,
              yaml.representer.SafeRepresenter, _CoreResolver):
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
        _CoreResolver.__init__(self)

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
                                 "call cosim.model.registry.register(cls) first")
        if "_spec_init" not in b.__dict__:
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


def _emit(data: dict, path) -> str:
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
    base = Path(path).resolve().parent if path is not None else Path.cwd()
    w = _Writer(base)
    data: dict = {"version": FORMAT_VERSION, "model": model.name}
    if model.parameters:
        data["parameters"] = w.value(model.parameters, "parameters")
    if model.context:
        data["context"] = w.value(model.context, "context")
    data.update(w.diagram(model, ""))
    events = {ev.name: _event_data(w, ev) for ev in model.events}
    if events:
        data["events"] = events
    cfg = simulation if simulation is not None else getattr(model, "simulation", None)
    if cfg is not None:
        data["simulation"] = w.config(cfg)
    if w.problems:
        raise ModelError(f"model {model.name!r} cannot be written as a model file:\n" +
                         "\n".join(f"  {i + 1}. {p}" for i, p in enumerate(w.problems)))
    return _emit(data, path)


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
    data = {"version": FORMAT_VERSION, "subsystem": sub.name}
    data.update((k, v) for k, v in entry.items() if k != "type")
    if w.problems:
        raise ModelError(f"subsystem {sub.name!r} cannot be written as a library file:\n" +
                         "\n".join(f"  {i + 1}. {p}" for i, p in enumerate(w.problems)))
    return _emit(data, path)
