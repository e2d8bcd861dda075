"""Reducers of a parameter study: a run's logs -> one number per metric.

A :class:`Reducer` summarises one logged signal (its first component); any ``f(logs) ->
float`` is a reducer too. :func:`reduce_all` applies every reducer of a sweep to one run's
logs, each on its own: one that fails gives NaN in its own column and a message naming it,
the others keep their values. :func:`check_signals` checks, before the first run, that every
signal a reducer reads is one the model logs, naming the close matches when it is not.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from cosim.errors import ModelError

__all__ = ["KINDS", "Reducer", "check_signals", "final", "integral_abs_error", "maximum", "mean",
           "minimum", "overshoot", "reduce_all", "rms", "settling_time"]


@dataclass(frozen=True)
class Reducer:
    """A named summary of one logged signal (picklable, so process pools can ship it).

    ``kind`` is one of :data:`KINDS`; ``key`` the signal (first component is used); ``a`` and
    ``b`` the kind's arguments (target/reference, band).
    """

    kind: str
    key: str
    a: float = 0.0
    b: float = 0.0

    @property
    def signals(self) -> tuple[str, ...]:
        """The logged signals this reducer reads (checked before a sweep's first run)."""
        return (self.key,)

    def __call__(self, logs) -> float:
        t = logs.time_of(self.key)
        y = logs[self.key].reshape(len(t), -1)[:, 0]
        return float(KINDS[self.kind](t, y, self.a, self.b))


def _settling(t, y, target, band):
    outside = np.nonzero(np.abs(y - target) > band * abs(target))[0]
    if len(outside) == 0:
        return t[0]
    return t[outside[-1] + 1] if outside[-1] + 1 < len(t) else math.nan


#: Reducer kinds: (time, values, a, b) -> number.
KINDS = {
    "final": lambda t, y, a, b: y[-1],
    "max": lambda t, y, a, b: np.max(y),
    "min": lambda t, y, a, b: np.min(y),
    "mean": lambda t, y, a, b: np.mean(y),
    "rms": lambda t, y, a, b: np.sqrt(np.mean(y ** 2)),
    "overshoot": lambda t, y, a, b: max(0.0, (np.max(y) - a) / abs(a)),
    "settling_time": _settling,
    "iae": lambda t, y, a, b: np.trapezoid(np.abs(y - a), t),
}


def final(key: str) -> Reducer:
    """The last logged value of ``key``."""
    return Reducer("final", key)


def maximum(key: str) -> Reducer:
    return Reducer("max", key)


def minimum(key: str) -> Reducer:
    return Reducer("min", key)


def mean(key: str) -> Reducer:
    return Reducer("mean", key)


def rms(key: str) -> Reducer:
    return Reducer("rms", key)


def overshoot(key: str, target: float) -> Reducer:
    """Peak above ``target`` relative to it (0 when it never exceeds it)."""
    return Reducer("overshoot", key, float(target))


def settling_time(key: str, target: float, band: float = 0.02) -> Reducer:
    """First time after which ``key`` stays within ``band`` (relative) of ``target``."""
    return Reducer("settling_time", key, float(target), float(band))


def integral_abs_error(key: str, reference: float) -> Reducer:
    """``∫ |key - reference| dt`` by the trapezoidal rule over its own time vector."""
    return Reducer("iae", key, float(reference))


def reduce_all(logs, reducers: Mapping) -> tuple[dict[str, float], str]:
    """Every reducer applied to ``logs`` on its own.

    Returns
    -------
    values : dict of str to float
        Metric name -> value; NaN for a reducer that raised.
    errors : str
        ``"name: ExceptionType: message"`` of each reducer that raised, joined by ``"; "``
        (empty when none did).
    """
    values, errors = {}, []
    for name, reduce in reducers.items():
        try:
            values[name] = float(reduce(logs))
        except Exception as err:  # noqa: BLE001 - one metric failing leaves the others
            values[name] = math.nan
            errors.append(f"{name}: {type(err).__name__}: {err}")
    return values, "; ".join(errors)


# -- which signals a model logs ---------------------------------------------------------------

def _signals(diagram, prefix: str, outputs: set, recorded: set) -> None:
    from cosim.model.block import Block
    from cosim.model.diagram import Diagram
    for b in diagram.blocks:
        path = f"{prefix}{b.name}"
        # An atomic subsystem's own ports log under its path, a virtual one's do not (they
        # are wires through it: the signal is its driver's); their blocks under path/...
        if not isinstance(b, Diagram) or getattr(b, "atomic", True):
            outputs.update(f"{path}.{p}" for p in getattr(b, "output_names", ()))
        if isinstance(b, Block) and getattr(b, "records_inputs", False):
            recorded.update(f"{path}.{p}" for p in b.input_names)
        if isinstance(b, Diagram):
            _signals(b, path + "/", outputs, recorded)


def _virtual_ports(model) -> dict[str, str]:
    """Each virtual subsystem port of ``model`` -> the block output logged for its signal."""
    from cosim.compile.flatten import flatten
    return flatten(model, virtual=True).virtual


def check_signals(model, config, reducers: Mapping) -> None:
    """Check that every signal a reducer reads is logged by runs of ``model`` under ``config``.

    Reducers other than :class:`Reducer` are checked when they have a ``signals`` attribute
    (a tuple of ``"block.port"``); others cannot be checked before they run.

    Parameters
    ----------
    model : Model
        The model, evaluated (library references resolved).
    config : SimulationConfig or None
        Its ``log`` selection, when given, limits what a run logs (co-simulated too).
    reducers : dict of str to callable

    Raises
    ------
    ModelError
        Naming each reducer, the signal it reads and the closest signals the model has.
    """
    outputs: set[str] = set()
    recorded: set[str] = set()      # inputs of blocks that record them: always logged
    _signals(model, "", outputs, recorded)
    signals = outputs | recorded
    logged = getattr(config, "log", None)
    if logged is not None:
        known = (set(logged) & outputs) | recorded
    else:
        known = signals
    problems, virtual = [], None
    for name, reduce in reducers.items():
        for key in getattr(reduce, "signals", ()):
            if key in known:
                continue
            if key in signals:
                problems.append(f"reducer {name!r} reads {key!r}, which is not logged: add it "
                                f"to SimulationConfig.log")
                continue
            if virtual is None:         # flattened only when a name is not found
                virtual = _virtual_ports(model)
            if key in virtual:
                sub = key.rpartition(".")[0]
                problems.append(f"reducer {name!r} reads {key!r}, a port of virtual subsystem "
                                f"{sub!r}, which runs do not log under that name: the signal "
                                f"it carries is logged as {virtual[key]!r}; read that")
                continue
            close = difflib.get_close_matches(key, sorted(signals), n=3, cutoff=0.6)
            hint = f"did you mean {', '.join(map(repr, close))}?" if close else \
                f"its signals are {', '.join(sorted(signals)[:12])}" + \
                (" ..." if len(signals) > 12 else "")
            problems.append(f"reducer {name!r} reads {key!r}, which is not a signal of model "
                            f"{model.name!r}; {hint}")
    if problems:
        raise ModelError("; ".join(problems) + " (checked before the first run)")
