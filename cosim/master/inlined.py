"""A unit's generated step function written into the compiled exchange's loop.

The compiled exchange's loop (:mod:`cosim.master.exchange_source`) calls each in-process
unit's generated step function once per step or refresh. A call of a small unit costs about
as much as its ticks: ten arguments, its values loaded from the run state's lists into
locals and stored back, the ``try`` around its loop. Inlined, the unit's statements are the
loop's own: its values stay locals of the loop for a whole chunk of macro steps (loaded once
before it, stored back once after it, as one call of the function would), and a step is the
function's tick loop over them. A live input the function reads into locals once per call
(:func:`cosim.fastpath.frame.hoisted`) is read at each step, as the exchange writes it
between steps. The statements are the function's very source, its names made the unit's own
(``u<i>_s3``, its constants ``u<i>g_k4``), so every value is the one the call computes, in
the same order: bit for bit the same run. Only small units are inlined (:data:`SMALL`); the
loop holding them is compiled through the code cache and specialized by
:func:`~cosim.fastpath.runtime.warm` before its chunk, as any loop
(:meth:`CompiledExchange.run <cosim.master.compiled.CompiledExchange.run>`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["InlinedUnit"]

#: A string literal (left as it is), or a name: not an attribute (``.append``) nor part of
#: a number (``1e-05``).
_NAME = re.compile(r"""('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")|(?<![.\w])([A-Za-z_]\w*)""")

#: The lines framing the tick loop of a generated step function (see
#: :func:`cosim.fastpath.frame.single` and :func:`cosim.fastpath.chunked.loop_end`).
_LOOP = ("    try:", "        while k < k_stop:")
#: A prologue line unpacking a list into locals (``a_0, a_1, = a``).
_LIVE = re.compile(r"^    [\w, ]+, = (\w+)$")
_EXCEPT = "    except Exception as err:"
_FINALLY = "    finally:"
_RETURN = "    return k, last_logged"
#: Stands for ``u<i>`` in a :func:`_template` (a character no generated source holds).
_ME = "\0"
#: Statements a unit's macro step runs (its tick loop's lines times its ticks per macro step)
#: beyond which it is called, not inlined. A call costs about as much as ten simple
#: statements: a larger step saves a few percent inlined (a fan of units integrated by RK4,
#: measured: 50 µs per macro step either way) while its statements, compiled a second time
#: into the loop, cost the first run more (7.7 ms against 2.2 for that fan's loop).
SMALL = 32
#: Characters of step-function source beyond which a unit is called, not inlined: a large
#: plan's function is chunked anyway, and the templates cached hold their sources.
LARGEST = 50_000


@dataclass(frozen=True)
class InlinedUnit:
    """The statements of one unit's step function, renamed for unit ``i`` of the exchange.

    Attributes
    ----------
    i : int
        The unit's index in the exchange.
    load : list of str
        The function's loads of its values into locals (indent 4).
    reads : list of str
        Its reads of live inputs into locals (indent 0), once per call.
    body : list of str
        One tick of its loop (indent 4, inside ``while u<i>_k < u<i>_k_stop:``).
    store : list of str
        Its stores of the locals back into the run state (indent 4).
    constants : dict
        Its globals under their names in the exchange.
    """

    i: int
    load: list
    reads: list
    body: list
    store: list
    constants: dict

    @classmethod
    def of(cls, i: int, unit, direct, ticks: int) -> InlinedUnit | None:
        """Unit ``unit``'s step function (``direct.bound``) as the exchange's unit ``i``, or
        None when it is not the plain one-function source of a scalar plan (chunked, vector
        or hand-written steps are called) or its macro step of ``ticks`` ticks is not small
        (:data:`SMALL`)."""
        sim = getattr(unit, "sim", None)
        fast = getattr(sim, "fast_path", None)
        fn = direct.bound[0]
        if fast is None or fast.fn is not fn or fast.vector or len(fast.source) > LARGEST:
            return None
        glob = {k: v for k, v in fn.__globals__.items() if k != "__builtins__"}
        parts = _template(fast.source, fn.__code__.co_varnames, frozenset(glob), SMALL // ticks)
        if parts is None:
            return None
        me = f"u{i}"
        load, reads, body, store = ([ln.replace(_ME, me) for ln in part] for part in parts)
        return cls(i, load, reads, body, store, {f"{me}g{k}": v for k, v in glob.items()})

    def prologue(self, values: str) -> list[str]:
        """Lines (indent 4) loading the unit's values from ``values`` (the exchange's names
        of the function's ``S, D, C, rows, ticks``)."""
        i = self.i
        return [f"    u{i}_S, u{i}_D, u{i}_C, u{i}_rows, u{i}_ticks = {values}",
                f"    u{i}_k = k{i}", *self.load]

    def run(self, k: str, k_stop: str, k_full: str, k_log: str) -> list[str]:
        """Lines of one call ``fn(k, k_stop, l<i>, ..., k_full, k_log)`` (its last logged
        tick into ``l<i>``; ``u<i>_k`` is where it got, also when it raised)."""
        i = self.i
        return [f"u{i}_k = {k}; u{i}_k_stop = {k_stop}; u{i}_last_logged = l{i}; "
                f"u{i}_k_full = {k_full}; u{i}_k_log = {k_log}", *self.reads,
                f"while u{i}_k < u{i}_k_stop:", *self.body,
                f"l{i} = u{i}_last_logged"]


@lru_cache(maxsize=64)
def _template(source: str, names: tuple, glob: frozenset, most: int) -> tuple | None:
    """The parts ``(load, reads, body, store)`` of :class:`InlinedUnit` for the step function
    of ``source`` (its locals ``names``, its globals ``glob``) with :data:`_ME` for the
    unit's prefix, or None when the source is not of the one plain function inlined or its
    tick loop has more than ``most`` lines (checked before anything is renamed).

    Cached: the renaming costs about 1 µs per name, and the units of a co-simulation, a
    sweep's or a re-run's, share their sources (the code caches give each structure one
    string, :mod:`cosim.fastpath.cache`): a fan of equal units renames once.
    """
    lines = source.rstrip("\n").split("\n")
    if not lines[0].startswith("def advance(") or \
            sum(ln.startswith("def ") for ln in lines) != 1 or lines[-1] != _RETURN:
        return None
    try:
        start = next(n for n in range(len(lines) - 1) if lines[n:n + 2] == list(_LOOP))
        end = lines.index(_EXCEPT)
    except (StopIteration, ValueError):
        return None
    store = lines[lines.index(_FINALLY) + 1:-1] if _FINALLY in lines else []
    body = lines[start + 2:end]
    if len(body) > most or any(ln.strip() and not ln.startswith(" " * 12) for ln in body) or \
            any(not ln.startswith(" " * 8) for ln in store):
        return None
    # A prologue line unpacking a global (a live input's list) reads what the exchange
    # writes between calls: once per call, not once per chunk like the run state.
    head = lines[1:start]
    live = [ln for ln in head if (m := _LIVE.match(ln)) is not None and m.group(1) in glob]
    local = set(names)

    def one(m):
        name = m.group(2)
        if name is None:
            return m.group(1)
        if name in local:
            return f"{_ME}_{name}"
        if name in glob:
            return f"{_ME}g{name}"
        return name

    def rename(lines: list, cut: int) -> list:
        return [_NAME.sub(one, ln[cut:]) for ln in lines]

    return (rename([ln for ln in head if ln not in live], 0), rename(live, 4), rename(body, 8),
            rename(store, 4))
