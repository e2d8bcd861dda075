"""Results files: :class:`~cosim.run.logs.Logs` written to and read from the formats people
post-process in — CSV, Parquet, HDF5, MATLAB and NumPy — chosen by the file's suffix.

Layouts (every value float64, written so that reading gives back every signal's samples and
time vector exactly; text signals, the String and Binary ports of FMUs, in CSV and HDF5):

- **table** (``.csv``, ``.parquet``): a ``time`` column — the union of the signals' time
  vectors — and one column per signal component; a signal has a value in the rows of its own
  samples and is empty (CSV) or null (Parquet) elsewhere (a multirate run). A signal of shape
  ``(1,)`` is the column ``key``; other shapes give ``key[i]`` / ``key[i,j]`` columns; a text
  signal's columns are named ``key:String`` / ``key:Binary``, their cells a String's JSON
  literal (``"tick 1"``: an empty string is not an empty cell) or ``0x`` and a Binary's hex
  digits. A signal
  sampled twice at one time (before and after an event) does not fit one row per time: such
  logs are refused with a pointer to the formats that keep each signal's own time vector.
- **HDF5** (``.h5``, ``.hdf5``): ``/time`` (the base time vector) and, per signal, the
  datasets ``values`` (``(n, *shape)``) and ``time`` (``(n,)``) in the group named by its key
  (``unit/block.port`` nests ``block.port`` under ``unit``); a text signal's ``values`` are
  variable-length UTF-8 strings or byte sequences, the group's attribute ``kind`` saying
  which (``String`` / ``Binary``).
- **MATLAB** (``.mat``): ``time`` and a struct ``signals`` with one field per signal (its key
  made a MATLAB name: ``motor/w.out`` -> ``motor__w_out``) holding ``key``, ``time``,
  ``values`` (``n x prod(shape)``) and ``shape``.
- **NumPy** (``.npz``): ``time``, ``values/<key>``, ``time/<key>``.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import tempfile
from pathlib import Path

import numpy as np

__all__ = ["FORMATS", "read", "write"]


def _logs(values: dict, times: dict, base: np.ndarray):
    from cosim.run.logs import Logs
    return Logs(values, times, base)


# -- the table layout (CSV, Parquet) ----------------------------------------------------------

def _columns(key: str, shape: tuple[int, ...], kind: str | None = None) -> list[str]:
    """Column names of signal ``key`` of sample shape ``shape`` (``kind``: ``"String"`` or
    ``"Binary"`` for text, marked ``:<kind>`` after the name)."""
    mark = f":{kind}" if kind else ""
    if shape == (1,):
        return [key + mark]
    return [f"{key}[{','.join(map(str, idx))}]{mark}" for idx in np.ndindex(*shape)]


_COLUMN = re.compile(r"^(.*)\[(\d+(?:,\d+)*)\]$")
_KIND = re.compile(r"^(.*):(String|Binary)$")


def text_kind(values: np.ndarray) -> str | None:
    """``"String"`` / ``"Binary"`` for a text signal's samples (an object array of ``str`` /
    ``bytes``), None for numbers."""
    if values.dtype != object:
        return None
    return "Binary" if any(type(x) is bytes for x in values.flat) else "String"


def _text_cell(x) -> str:
    """A text sample in a table cell, exactly: a String as its JSON literal (``"tick 1"``, so
    an empty string is not an empty cell), a Binary as ``0x`` and its hex digits."""
    return "0x" + x.hex() if type(x) is bytes else json.dumps(x, ensure_ascii=False)


def _text_value(cell: str, kind: str):
    return bytes.fromhex(cell[2:]) if kind == "Binary" else json.loads(cell)


def _table(logs) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """``(time, columns)``: the union time vector, shape ``(m,)``, and each column's values
    on it, shape ``(m,)``, NaN where the signal has no sample.

    Raises
    ------
    ValueError
        A signal has two samples at one time.
    """
    times = [logs.time_of(k) for k in logs]
    for key, t in zip(logs, times):
        if len(t) > 1 and not np.all(np.diff(t) > 0):
            raise ValueError(f"signal {key} has two samples at one time (an event): a table "
                             "has one row per time; write .h5, .mat or .npz, which keep each "
                             "signal's own time vector")
    union = np.unique(np.concatenate([logs.time, *times])) if len(logs) else logs.time
    cols = {}
    for key, t in zip(logs, times):
        v = logs[key].reshape(len(t), -1)
        rows = np.searchsorted(union, t)
        shape = logs[key].shape[1:]
        kind = text_kind(v)
        for c, name in enumerate(_columns(key, shape, kind)):
            # (Text: None where no sample.)
            col = np.full(len(union), np.nan) if kind is None else \
                np.full(len(union), None, dtype=object)
            col[rows] = v[:, c]
            cols[name] = col
    return union, cols


def _untable(time: np.ndarray, cols: dict[str, np.ndarray],
             empty: dict[str, np.ndarray]) -> tuple[dict, dict]:
    """Signals from table columns (each shape ``(m,)``); ``empty[name]`` marks the rows where
    column ``name`` has no sample."""
    groups: dict[str, list[tuple[tuple[int, ...], str]]] = {}
    kinds = {}
    for name in cols:
        k = _KIND.match(name)
        bare = k.group(1) if k else name
        m = _COLUMN.match(bare)
        key, idx = (m.group(1), tuple(int(i) for i in m.group(2).split(","))) if m else \
            (bare, (0,))
        groups.setdefault(key, []).append((idx, name))
        if k:
            kinds[key] = k.group(2)
    values, times = {}, {}
    for key, parts in groups.items():
        have = ~empty[parts[0][1]]
        shape = tuple(max(idx[d] for idx, _ in parts) + 1 for d in range(len(parts[0][0])))
        arr = np.empty((int(have.sum()), *shape), dtype=object if key in kinds else float)
        for idx, name in parts:
            arr[(slice(None), *idx)] = cols[name][have]
        values[key], times[key] = arr, time[have]
    return values, times


def _write_csv(logs, path: Path) -> None:
    import csv
    time, cols = _table(logs)
    names = list(cols)
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["time", *names])
        text = [n for n in names if cols[n].dtype == object]
        if text:                        # (text cells: _text_cell; None: no sample)
            cols = dict(cols)
            for n in text:
                cols[n] = np.array(["" if x is None else _text_cell(x) for x in cols[n]],
                                   dtype=object)
        data = np.column_stack([time, *[cols[n] for n in names]]) if names else time[:, None]
        # repr of a Python float: the shortest text that reads back as the same float; empty
        # for no sample (NaN, the one float unequal to itself). Python floats and the csv
        # module's writerows, not a numpy call per cell (4-5x faster).
        w.writerows(["" if x != x else x if type(x) is str else repr(x) for x in row]
                    for row in data.tolist())


def _read_csv(path: Path):
    import csv
    with path.open(newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader)
        rows = list(reader)
    if not header or header[0] != "time":
        raise ValueError(f"{path}: the first column must be 'time' (a cosim results table)")
    cells = np.array(rows, dtype=object).reshape(len(rows), len(header))
    empty = cells == ""
    names = header[1:]
    text = {i: _KIND.match(n).group(2) for i, n in enumerate(names, 1) if _KIND.match(n)}
    numeric = [i for i in range(len(header)) if i not in text]
    data = np.where(empty[:, numeric], "nan", cells[:, numeric]).astype(np.float64)
    columns = dict(zip(numeric, data.T))
    for i, kind in text.items():
        columns[i] = np.array([None if e else _text_value(c, kind)
                               for c, e in zip(cells[:, i], empty[:, i])], dtype=object)
    values, times = _untable(columns[0], {n: columns[i] for i, n in enumerate(names, 1)},
                             {n: empty[:, i] for i, n in enumerate(names, 1)})
    return _logs(values, times, columns[0])


def _write_parquet(logs, path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    time, cols = _table(logs)
    arrays = {"time": pa.array(time)}
    for name, col in cols.items():
        arrays[name] = pa.array(col, mask=np.isnan(col))     # null where no sample
    pq.write_table(pa.table(arrays), path)


def _read_parquet(path: Path):
    import pyarrow.parquet as pq
    table = pq.read_table(path)
    time = table.column("time").to_numpy()
    cols = {name: table.column(name) for name in table.column_names if name != "time"}
    dense = {name: np.asarray(c.to_numpy(zero_copy_only=False), dtype=np.float64)
             for name, c in cols.items()}
    nulls = {name: np.asarray(c.is_null().to_numpy(zero_copy_only=False))
             for name, c in cols.items()}
    values, times = _untable(time, dense, nulls)
    return _logs(values, times, time)


# -- HDF5, MATLAB, NumPy ----------------------------------------------------------------------

def _write_hdf5(logs, path: Path) -> None:
    import h5py
    with h5py.File(path, "w") as f:
        f["time"] = logs.time
        for key in logs:
            g = f.create_group(f"signals/{key}")
            v = logs[key]
            kind = text_kind(v)
            if kind == "String":            # variable-length UTF-8 strings
                g.create_dataset("values", data=v, dtype=h5py.string_dtype())
            elif kind == "Binary":          # variable-length byte sequences
                g.create_dataset("values", data=_byte_arrays(v),
                                 dtype=h5py.vlen_dtype(np.uint8))
            else:
                g["values"] = v
            if kind:
                g.attrs["kind"] = kind
            g["time"] = logs.time_of(key)


def _byte_arrays(v: np.ndarray) -> np.ndarray:
    """An object array of ``bytes`` as one of uint8 arrays (HDF5's variable-length bytes)."""
    out = np.empty(v.shape, dtype=object)
    for idx, x in np.ndenumerate(v):
        out[idx] = np.frombuffer(x, dtype=np.uint8)
    return out


def _read_hdf5(path: Path):
    import h5py
    values, times = {}, {}
    with h5py.File(path, "r") as f:
        def visit(name, obj):
            if isinstance(obj, h5py.Group) and "values" in obj and "time" in obj:
                kind = obj.attrs.get("kind")
                if kind == "String":
                    values[name] = obj["values"].asstr()[()].astype(object)
                elif kind == "Binary":
                    raw = obj["values"][()]
                    values[name] = np.empty(raw.shape, dtype=object)
                    for idx, x in np.ndenumerate(raw):
                        values[name][idx] = bytes(x)
                else:
                    values[name] = obj["values"][()]
                times[name] = obj["time"][()]
        f["signals"].visititems(visit)
        base = f["time"][()]
    return _logs(values, times, base)


def _mat_name(key: str, taken: set[str]) -> str:
    """A MATLAB field name for ``key``: letters, digits, underscores, at most 63 characters."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", key.replace("/", "__"))
    if not name or not name[0].isalpha():
        name = "s_" + name
    name = name[:63]
    base, i = name, 1
    while name in taken:
        suffix = f"_{i}"
        name, i = base[:63 - len(suffix)] + suffix, i + 1
    taken.add(name)
    return name


def _write_mat(logs, path: Path) -> None:
    from scipy.io import savemat
    taken: set[str] = set()
    signals = {}
    for key in logs:
        v = logs[key]
        signals[_mat_name(key, taken)] = {
            "key": key, "time": logs.time_of(key)[:, None],
            "values": v.reshape(len(v), -1), "shape": np.array(v.shape[1:], dtype=np.float64)}
    savemat(path, {"time": logs.time[:, None], "signals": signals}, long_field_names=True)


def _read_mat(path: Path):
    from scipy.io import loadmat
    m = loadmat(path, simplify_cells=True)
    values, times = {}, {}
    for field in (m["signals"] or {}).values():
        shape = tuple(int(d) for d in np.atleast_1d(field["shape"]))
        t = np.atleast_1d(np.asarray(field["time"], dtype=np.float64)).ravel()
        values[field["key"]] = np.asarray(field["values"], dtype=np.float64).reshape(
            (len(t), *shape))
        times[field["key"]] = t
    return _logs(values, times, np.atleast_1d(np.asarray(m["time"], dtype=np.float64)).ravel())


def _write_npz(logs, path: Path) -> None:
    arrays = {"time": logs.time}
    for key in logs:
        arrays[f"values/{key}"] = logs[key]
        arrays[f"time/{key}"] = logs.time_of(key)
    np.savez(path, **arrays)


def _read_npz(path: Path):
    with np.load(path, allow_pickle=False) as z:
        values = {k[7:]: z[k] for k in z.files if k.startswith("values/")}
        times = {k[5:]: z[k] for k in z.files if k.startswith("time/")}
        return _logs(values, times, z["time"])


#: Suffix -> (writer, reader, the package it needs).
FORMATS = {".csv": (_write_csv, _read_csv, None),
           ".parquet": (_write_parquet, _read_parquet, "pyarrow"),
           ".h5": (_write_hdf5, _read_hdf5, "h5py"),
           ".hdf5": (_write_hdf5, _read_hdf5, "h5py"),
           ".mat": (_write_mat, _read_mat, "scipy"),
           ".npz": (_write_npz, _read_npz, None)}


#: The formats that carry text signals (String and Binary samples).
_TEXT_FORMATS = (".csv", ".h5", ".hdf5")


def _format(path: Path):
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise ValueError(f"{path}: unknown results format {path.suffix!r}; use one of "
                         f"{', '.join(FORMATS)}")
    if fmt[2] is not None:
        try:
            __import__(fmt[2])
        except ImportError:
            raise ValueError(f"{path}: writing {path.suffix} needs {fmt[2]} "
                             f"(pip install {fmt[2]}, or the cosim[results] extra)") from None
    return fmt


def write(logs, path) -> Path:
    """Write ``logs`` to ``path`` in the format of its suffix (see the module docstring),
    atomically (:func:`replacing`)."""
    path = Path(path)
    writer = _format(path)[0]
    if path.suffix.lower() not in _TEXT_FORMATS:
        text = [k for k in logs if text_kind(logs[k])]
        if text:
            raise ValueError(f"{path}: {', '.join(text)} hold text (String / Binary "
                             f"samples), which {path.suffix} does not carry here; write "
                             f"{', '.join(_TEXT_FORMATS)}")
    with replacing(path) as tmp:
        writer(logs, tmp)
    return path


@contextlib.contextmanager
def replacing(path):
    """``with replacing(path) as tmp:`` write the file ``tmp`` (same folder and suffix);
    when the block ends without an error it replaces ``path`` whole, otherwise it is
    removed and ``path`` is as it was: a full disk or a crash never leaves half a file."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=path.suffix, dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
        tmp = None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def check_writable(path) -> Path:
    """Raise OSError now (naming ``path``) if results could not be written there: its folder
    missing or not writable, or ``path`` a folder. Called before a run's work."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, "is a directory: give a file name", str(path))
    fd, probe = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".probe", dir=path.parent)
    os.close(fd)
    os.unlink(probe)
    return path


def read(path):
    """Read logs written by :func:`write` (any of :data:`FORMATS`)."""
    path = Path(path)
    return _format(path)[1](path)
