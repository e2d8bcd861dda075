"""The compile cache of generated code: one code object per structure of plan.

Generated source names every parameter instead of spelling it
(:mod:`cosim.fastpath.params`), so plans that differ only in parameter values (a sweep, a
re-run with a retuned gain) generate the same source. Compiling is the expensive part of
building a fast path (about 5 µs per block); the code object is reused, executed in a fresh
namespace holding the new values.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from types import CodeType

__all__ = ["code_for"]

#: Code objects kept (least recently used dropped first): a 100,000-block plan's code is tens
#: of megabytes, so only a few are kept.
CAPACITY = 8

_codes: OrderedDict[tuple[str, bytes], CodeType] = OrderedDict()


def code_for(source: str, label: str) -> CodeType:
    """The compiled code of ``source`` (``label``: its pseudo file name), from the cache when
    the same source was compiled before.

    Parameters
    ----------
    source : str
        Python source of a module.
    label : str
        File name shown in tracebacks (part of the key: it is in the code object).
    """
    key = (label, hashlib.blake2b(source.encode(), digest_size=20).digest())
    code = _codes.get(key)
    if code is not None:
        _codes.move_to_end(key)
        return code
    code = compile(source, label, "exec")
    _codes[key] = code
    while len(_codes) > CAPACITY:
        _codes.popitem(last=False)
    return code
