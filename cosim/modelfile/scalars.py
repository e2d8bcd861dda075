"""YAML 1.2 core-schema scalars, shared by reading and writing: which type a plain scalar
is, its Python value, and the resolver that makes the writer quote what would read back as
something else (``yes``, ``1e-3`` as a string, ``null``)."""

from __future__ import annotations

import math
import re

import yaml
from yaml.nodes import ScalarNode

__all__ = ["CoreResolver", "YAML_TAG", "convert", "plain_kind"]

YAML_TAG = "tag:yaml.org,2002:"

_PLAIN = (
    ("null", re.compile(r"^(?:~|null|Null|NULL|)$")),
    ("bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")),
    ("int", re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")),
    ("float", re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                         r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$")),
)


def plain_kind(text: str) -> str:
    """The core-schema type of an untagged plain scalar."""
    for kind, rx in _PLAIN:
        if rx.match(text):
            return kind
    return "str"


def convert(kind: str, text: str):
    """The Python value of scalar ``text`` of core-schema type ``kind`` (ValueError if not)."""
    if kind == "str":
        return text
    if plain_kind(text) != kind and not (kind == "float" and plain_kind(text) == "int"):
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


class CoreResolver(yaml.resolver.BaseResolver):
    """Tells the writer which plain strings would read back as something else (to quote them)."""

    def resolve(self, kind, value, implicit):
        if kind is ScalarNode and implicit[0]:
            return YAML_TAG + plain_kind(value)
        return super().resolve(kind, value, implicit)
