"""Reading model files safely: YAML text -> plain data, with the line and column of every value.

Only plain data is built (no tags, no objects); the size of the file, the nesting depth and
the number of values with aliases expanded are bounded as the document is read, so a hostile
file is refused before it costs memory or time. Problems are collected in the :class:`Doc`.
"""

from __future__ import annotations

import copy
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from yaml.events import (AliasEvent, DocumentStartEvent, MappingEndEvent, MappingStartEvent,
                         ScalarEvent, SequenceEndEvent, SequenceStartEvent)

from cosim.errors import CompileError, ModelError
from cosim.modelfile.scalars import YAML_TAG, convert, plain_kind

__all__ = ["Doc", "MAX_BYTES", "MAX_DEPTH", "MAX_VALUES", "compose", "read_text"]

#: Largest file read (bytes).
MAX_BYTES = 10 * 2**20
#: Deepest nesting of mappings and lists.
MAX_DEPTH = 64
#: Most values (scalars, mappings, lists) in a document, aliases expanded.
MAX_VALUES = 1_000_000


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
    short = "!!" + tag[len(YAML_TAG):] if tag.startswith(YAML_TAG) else tag
    return (f"tag {short} is not allowed: model files hold plain data (numbers, strings, "
            "lists, mappings), no tags")


@dataclass
class Doc:
    """One read document: its data, where each value and key is, and the problems found.

    Paths are tuples of mapping keys and list indices from the top level (``("blocks",
    "g", "params", "k")``); positions are 1-based ``(line, column)``; problems are
    ``(line, column, message)``.
    """

    filename: str
    base_dir: Path
    from_file: bool = False
    #: The file is the master's own (a unit file it wrote for a server it started): the
    #: paths of files its blocks write are not limited to the run's folder.
    own_paths: bool = False
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
        return convert(plain_kind(ev.value), ev.value) if ev.implicit[0] and tag is None \
            else ev.value
    kind = tag[len(YAML_TAG):] if tag.startswith(YAML_TAG) else None
    if kind not in ("str", "int", "float", "bool", "null"):
        raise ValueError(_tag_message(tag))
    return convert(kind, ev.value)


def compose(doc: Doc, text: str) -> None:
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
            if ev.tag not in (None, "!", YAML_TAG + want):
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


def read_text(source, what: str) -> tuple[str, str, Path]:
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
