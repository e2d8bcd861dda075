"""A sweep's results directory: the table of finished runs, and what the runs were of.

``results.csv`` holds one row per finished run, appended and synced in batches as runs
finish, so a killed sweep resumes where it stopped (having lost at most the last batch).
``sweep.json`` holds the sweep's fingerprint: digests of the model (with every file it
references: library files, data files, FMUs), the configuration, the design and the
reducers. Resuming into a directory whose
fingerprint differs is refused, naming what changed (or, by explicit choice, goes to a new
directory); a last row torn by a kill during its write is dropped (and re-run) before the
sweep resumes.
"""

from __future__ import annotations

import csv
import hashlib
import inspect
import io
import json
import logging
import os
import time
from pathlib import Path

from cosim.errors import ModelError

__all__ = ["ResultsTable", "fingerprint", "referenced_files", "results_dir", "write_parquet"]

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


def _model_text(model, built=None) -> str:
    """The model as text: a model file's bytes, or the factory's model (``built`` when given)
    written as a model file (its code where the model cannot be written, e.g. with
    Python-only blocks)."""
    if isinstance(model, (str, Path)):
        return Path(model).read_bytes().decode(errors="replace")
    try:
        return (built if built is not None else model()).to_yaml()
    except Exception:  # noqa: BLE001 - any model that cannot be written: fall back to its code
        return _source_of(model)


#: Suffixes of the files a block parameter may name as an input (an output, e.g. a Scope's
#: image, changes with every run and is not part of what a run depends on).
INPUT_SUFFIXES = frozenset({".fmu", ".csv", ".tsv", ".txt", ".dat", ".npy", ".npz", ".mat",
                            ".json", ".h5", ".hdf5", ".parquet", ".yaml", ".yml", ".so",
                            ".dll", ".dylib", ".xml"})


def referenced_files(model, built=None) -> list[Path]:
    """The files the sweep's ``model`` (factory or model file; ``built``: the factory's
    model) references, sorted: library files of its references (and theirs), and every
    block parameter that names an existing file (data files, FMUs), relative to the model
    file's folder or the working directory."""
    from cosim.model.block import Block
    from cosim.model.diagram import Diagram, Reference
    found: set[Path] = set()
    try:
        if isinstance(model, (str, Path)):
            from cosim.modelfile import load
            base, top = Path(model).resolve().parent, load(str(model))
        else:
            base, top = Path.cwd(), built if built is not None else model()
    except Exception:  # noqa: BLE001 - a model that cannot be read: its text alone
        return []

    def named(value, here: Path) -> None:
        if isinstance(value, str) and 0 < len(value) < 4096 and "\n" not in value \
                and Path(value).suffix.lower() in INPUT_SUFFIXES:
            for where in (Path(value),) if Path(value).is_absolute() else \
                    (here / value, Path.cwd() / value):
                try:
                    if where.is_file():
                        found.add(where.resolve())
                except OSError:
                    pass
        elif isinstance(value, (list, tuple)):
            for v in value[:1000]:
                named(v, here)
        elif isinstance(value, dict):
            for v in list(value.values())[:1000]:
                named(v, here)

    def walk(diagram, here: Path, depth: int) -> None:
        for b in getattr(diagram, "blocks", ()):
            if isinstance(b, Reference):
                src = b.source
                if isinstance(src, str) and src.endswith((".yaml", ".yml")):
                    file = Path(src) if Path(src).is_absolute() else here / src
                    if file.is_file() and file.resolve() not in found and depth < 20:
                        found.add(file.resolve())
                        try:
                            from cosim.modelfile import load_subsystem
                            walk(load_subsystem(file, b.name), file.resolve().parent,
                                 depth + 1)
                        except Exception:  # noqa: BLE001 - its bytes are digested all the same
                            pass
                named(b.overrides, here)
            elif isinstance(b, Diagram):
                named(getattr(b, "context", {}), here)
                walk(b, here, depth)
            elif isinstance(b, Block):
                try:
                    named(b.spec(), here)
                except Exception:  # noqa: BLE001 - a block without a spec names no file
                    pass
    walk(top, base, 0)
    if isinstance(model, (str, Path)):
        found.discard(Path(model).resolve())
    return sorted(found)


def fingerprint(model, config, run_ids: list[str], reducers: dict,
                built=None) -> dict[str, str]:
    """Digests of what a sweep's rows depend on.

    Parameters
    ----------
    model : callable or str
        The sweep's model factory or model file.
    config : SimulationConfig or None
    run_ids : list of str
        The design's run ids (they digest each point's parameters).
    reducers : dict of str to callable
    built : Model, optional
        The factory's model, already built (not yet evaluated), to save building it again.

    Returns
    -------
    dict of str to str
        One digest per part of :data:`PARTS` (the model's with the bytes of every file
        it references, :func:`referenced_files`).
    """
    reducer_text = "\n".join(
        f"{name}: {r!r}" if type(r).__module__.startswith("cluster.") else
        f"{name}: {_source_of(r)}" for name, r in sorted(reducers.items()))
    files = "".join(f"\n{path}: {_digest(path.read_bytes())}"
                    for path in referenced_files(model, built))
    return {"model": _digest(_model_text(model, built) + files),
            "config": _digest(repr(config)),
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
    """``results.csv``: one row per finished run, written in batches that are synced.

    Rows wait in memory and are written together, one ``write`` and one ``fsync`` per batch,
    when ``flush_every`` seconds have passed since the last batch (checked as rows arrive)
    and on :meth:`close`. A kill loses at most the rows of the unwritten batch (those runs
    are done again on resume) and can tear only the file's last line, which the next
    sweep drops: every complete line is a whole row, so the resumed table equals an
    uninterrupted sweep's.

    Parameters
    ----------
    path : Path
    columns : list of str
    flush_every : float
        Most seconds a finished run's row waits before it is written (0: at once).

    Attributes
    ----------
    done : dict of str to dict
        Run id -> its row (as text), for every row in the file or waiting to be written.
    torn : bool
        The file ended in a partial row (a kill during a write), now dropped.
    """

    def __init__(self, path: Path, columns: list[str], flush_every: float = 0.5):
        self.path = path
        self.columns = columns
        self.flush_every = flush_every
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
        self._pending: list[dict] = []
        self._last_flush = time.monotonic()
        if new:
            self.write_text(self.encode([dict(zip(columns, columns))]))

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

    def encode(self, rows: list[dict]) -> str:
        """CSV lines of ``rows`` (floats written exactly, by ``repr``)."""
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=self.columns, extrasaction="ignore")
        writer.writerows(rows)
        return buf.getvalue()

    def write_text(self, text: str) -> None:
        """Append ``text`` (whole lines) to the file in one write and sync it to disk."""
        self._fh.write(text)
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def add(self, row: dict) -> None:
        """Record a finished run's row; written with its batch."""
        out = {k: (repr(v) if isinstance(v, float) else v) for k, v in row.items()}
        self._pending.append(out)
        self.done[row["run_id"]] = out
        if time.monotonic() - self._last_flush >= self.flush_every:
            self.flush()

    def flush(self) -> None:
        """Write and sync the rows waiting (one batch)."""
        if self._pending:
            self.write_text(self.encode(self._pending))
            self._pending.clear()
        self._last_flush = time.monotonic()

    def close(self) -> None:
        try:
            self.flush()
        finally:
            self._fh.close()


def write_parquet(rows: list[dict], path: Path, fp: dict[str, str]) -> bool:
    """Write the table as Parquet when pyarrow is installed; the sweep's fingerprint goes in
    the file's metadata under ``cosim.sweep`` (JSON). Returns whether it was written."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return False
    table = pa.Table.from_pylist(rows)
    meta = {**(table.schema.metadata or {}), b"cosim.sweep": json.dumps(fp, sort_keys=True)}
    tmp = path.with_suffix(".tmp")
    pq.write_table(table.replace_schema_metadata(meta), tmp)
    os.replace(tmp, path)
    return True
