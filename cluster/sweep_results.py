"""A sweep's results directory: the table of finished runs, and what the runs were of.

``results.csv`` holds one row per finished run, appended and synced as runs finish, so a
killed sweep resumes where it stopped. ``sweep.json`` holds the sweep's fingerprint: digests
of the model, the configuration, the design and the reducers. Resuming into a directory whose
fingerprint differs is refused, naming what changed (or, by explicit choice, goes to a new
directory); a last row torn by a kill during its write is dropped (and re-run) before the
sweep resumes.
"""

from __future__ import annotations

import csv
import hashlib
import inspect
import json
import logging
import os
from pathlib import Path

from cosim.errors import ModelError

__all__ = ["ResultsTable", "fingerprint", "results_dir"]

log = logging.getLogger("cosim.sweep")

#: The parts of a fingerprint, in the order messages name them.
PARTS = ("model", "config", "design", "reducers")


def _digest(text: str | bytes) -> str:
    data = text.encode() if isinstance(text, str) else text
    return hashlib.sha256(data).hexdigest()[:16]


def _source_of(obj) -> str:
    """Where ``obj`` (a function or class) is defined and its source, when Python has it."""
    name = f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', repr(obj))}"
    try:
        return name + "\n" + inspect.getsource(obj)
    except (OSError, TypeError):
        return name


def _model_text(model) -> str:
    """The model as text: a model file's bytes, or the factory's model written as a model
    file (its code where the model cannot be written, e.g. with Python-only blocks)."""
    if isinstance(model, (str, Path)):
        return Path(model).read_bytes().decode(errors="replace")
    try:
        return model().to_yaml()
    except Exception:  # noqa: BLE001 - any model that cannot be written: fall back to its code
        return _source_of(model)


def fingerprint(model, config, run_ids: list[str], reducers: dict) -> dict[str, str]:
    """Digests of what a sweep's rows depend on.

    Parameters
    ----------
    model : callable or str
        The sweep's model factory or model file.
    config : SimulationConfig or None
    run_ids : list of str
        The design's run ids (they digest each point's parameters).
    reducers : dict of str to callable

    Returns
    -------
    dict of str to str
        One digest per part of :data:`PARTS`.
    """
    reducer_text = "\n".join(
        f"{name}: {r!r}" if type(r).__module__.startswith("cluster.") else
        f"{name}: {_source_of(r)}" for name, r in sorted(reducers.items()))
    return {"model": _digest(_model_text(model)), "config": _digest(repr(config)),
            "design": _digest("\n".join(run_ids)), "reducers": _digest(reducer_text)}


def results_dir(out: Path, fp: dict[str, str], if_changed: str) -> Path:
    """The directory to write a sweep with fingerprint ``fp`` into, given ``out``.

    A new or matching directory is ``out``. One written by a sweep with another fingerprint
    is refused (``if_changed="refuse"``) naming the parts that changed, or replaced by the
    sibling ``out-<digest>`` (``if_changed="new"``; resumed there if it exists).

    Raises
    ------
    ModelError
        The directory holds another sweep's results and ``if_changed="refuse"``.
    """
    if if_changed not in ("refuse", "new"):
        raise ModelError(f"if_changed={if_changed!r}: use 'refuse' or 'new'")
    manifest = out / "sweep.json"
    if manifest.exists():
        old = json.loads(manifest.read_text())
        changed = [p for p in PARTS if old.get(p) != fp[p]]
        if not changed:
            return out
        if if_changed == "new":
            other = out.with_name(f"{out.name}-{_digest(json.dumps(fp, sort_keys=True))[:8]}")
            log.warning("%s holds a sweep of another %s: writing to %s", out,
                        ", ".join(changed), other)
            return results_dir(other, fp, "refuse")
        raise ModelError(f"{out} holds the results of a sweep with another "
                         f"{', '.join(changed)} (its rows would not be this sweep's); use "
                         f"another out_dir, or if_changed='new' to write beside it")
    out.mkdir(parents=True, exist_ok=True)
    if (out / "results.csv").exists():
        log.warning("%s has results but no sweep.json (an older sweep): resuming without "
                    "checking that they are this sweep's", out)
    tmp = manifest.with_suffix(".tmp")
    tmp.write_text(json.dumps(fp, indent=1, sort_keys=True))
    os.replace(tmp, manifest)                   # atomically: never a half-written manifest
    return out


class ResultsTable:
    """``results.csv``: one row per finished run, appended and synced as runs finish.

    Parameters
    ----------
    path : Path
    columns : list of str

    Attributes
    ----------
    done : dict of str to dict
        Run id -> its row (as text), for every complete row in the file.
    torn : bool
        The file ended in a partial row (a kill during a write), now dropped.
    """

    def __init__(self, path: Path, columns: list[str]):
        self.path = path
        self.columns = columns
        self.done: dict[str, dict] = {}
        self.torn = self._drop_torn_row()
        if path.exists():
            with path.open(newline="") as fh:
                reader = csv.DictReader(fh)
                if reader.fieldnames and reader.fieldnames != columns:
                    raise ModelError(f"{path} was written by a different sweep (columns "
                                     f"{reader.fieldnames}); use another output directory")
                for row in reader:
                    if row.get("run_id"):
                        self.done[row["run_id"]] = row
        new = not path.exists() or path.stat().st_size == 0
        self._fh = path.open("a", newline="")
        self._writer = csv.DictWriter(self._fh, fieldnames=columns, extrasaction="ignore")
        if new:
            self._writer.writeheader()
            self._sync()

    def _drop_torn_row(self) -> bool:
        """Cut a last row without its line end (written when the sweep was killed)."""
        if not self.path.exists():
            return False
        data = self.path.read_bytes()
        if not data or data.endswith(b"\n"):
            return False
        keep = data.rfind(b"\n") + 1
        with self.path.open("r+b") as fh:
            fh.truncate(keep)
            fh.flush()
            os.fsync(fh.fileno())
        log.warning("%s: dropped a torn last row (%d bytes; the sweep was stopped while "
                    "writing it); that run is done again", self.path, len(data) - keep)
        return True

    def _sync(self) -> None:
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def add(self, row: dict) -> None:
        out = {k: (repr(v) if isinstance(v, float) else v) for k, v in row.items()}
        self._writer.writerow(out)
        self._sync()
        self.done[row["run_id"]] = out

    def close(self) -> None:
        self._fh.close()
