"""The JSON Schema of model and library files, and its violations as located messages."""

from __future__ import annotations

import difflib
import functools
import json
from pathlib import Path

from cosim.modelfile.reader import Doc

__all__ = ["check_schema", "schema", "suggest"]


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


def suggest(word: str, choices) -> str:
    """The ``; did you mean ...?`` tail of a message about ``word`` ('' when none is close)."""
    close = difflib.get_close_matches(str(word), list(choices), n=3, cutoff=0.6)
    return f"; did you mean {', '.join(map(repr, close))}?" if close else ""


_PATTERNS = {   # what a string failing a pattern of the schema was meant to be
    "name": "is not a valid name (letters, digits and '_', not starting with a digit)",
    "endpoint": "is not a 'block.port' reference",
    "endpointPath": "is not a logged signal 'block.port' or 'path/to/block.port' (or '*')",
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


def _properties(sub: dict) -> dict:
    """The properties an object schema (or a ``$ref`` / ``anyOf`` of one) allows."""
    if "$ref" in sub:
        sub = schema()["$defs"][sub["$ref"].rsplit("/", 1)[1]]
    found = dict(sub.get("properties", {}))
    for alternative in sub.get("anyOf", []) + sub.get("oneOf", []):
        found.update(_properties(alternative))
    return found


def _home(key: str, allowed: dict) -> str | None:
    """The key among ``allowed`` whose section takes ``key`` (``cosim`` -> ``simulation``):
    an unknown key put one level too high."""
    homes = [name for name, sub in allowed.items()
             if isinstance(sub, dict) and key in _properties(sub)]
    return homes[0] if len(homes) == 1 else None


def check_schema(doc: Doc) -> set[tuple]:
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
                    home = _home(key, allowed)
                    hint = (f"; it belongs inside {home!r}: write it as "
                            f"'{home}: {{{key}: ...}}'" if home else suggest(key, allowed))
                    doc.add(path + (key,), f"{_dotted(path)}: unknown key {key!r}"
                            f"{hint} (keys: {', '.join(allowed)})", key=True)
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
