"""Checkpoints and snapshots of a simulator.

A *snapshot* is the full state of a simulator as one nested dict of plain values and arrays:
every block's discrete ``state`` and held ``outputs``, the continuous state vector, the
solver's controller and caches, the clock, the event detector, the log positions, and the
same for every atomic subsystem inside. Restoring it and continuing is bit for bit the same as
never stopping, with every solver of :data:`cosim.solvers.SOLVERS` (the scipy ones included:
their step history is part of the solver's state). A solver of your own that declares
``checkpoint_exact = False`` is named in a warning when a checkpoint is saved (the resumed run
continues, but not bit for bit). Snapshots are what units return for rollback
(``UnitState.data``; they travel over the wire as they are).

A *checkpoint file* is one ``.npz`` file (:func:`write_file`, :func:`read_file`): the arrays,
and the JSON of everything else (structure, scalars, versions — Python's float repr
round-trips exactly) as one array of bytes. It is written under a temporary name beside its
place, flushed to disk and renamed over the previous one, so a checkpoint on disk is always
whole: a crash, a full disk or an I/O error while writing leaves the previous checkpoint as
it was. It carries its model's :func:`identity` — a fingerprint of the structure (blocks,
wires, steps), the blocks' parameter values and the id of the run that wrote it — and a
model whose identity differs is refused, naming what differs. A damaged file is refused with
an error naming it. A simulator's checkpoint also carries the logs so far, so a run resumed
from it has its logs from the start.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import uuid
import warnings
import weakref
from pathlib import Path

import numpy as np

from cosim.errors import ModelError

__all__ = ["check_identity", "check_writable", "checkpoint_file", "identity",
           "inexact_solvers", "join_tree", "load", "mismatch", "read_file", "restore_snapshot",
           "run_id", "save", "snapshot", "split_tree", "warn_inexact", "write_file"]

#: Format 3: one file (format 2 was ``path.json`` + ``path.npz``).
FORMAT = 3
#: The name of the JSON entry of a checkpoint file.
_META = "__meta__"
#: Key suffix of a text array (String / Binary values, object dtype) in a checkpoint file: its
#: elements as JSON (bytes as ``{"hex": ...}``) in uint8, since an object array would be
#: pickled and a checkpoint is read without unpickling anything.
_TEXT = "::text"


# -- nested dicts <-> (arrays, JSON scalars) -------------------------------------------------

def _esc(key: str) -> str:
    """A key as one path segment ('/' and '%' escaped)."""
    return str(key).replace("%", "%25").replace("/", "%2F")


def _unesc(seg: str) -> str:
    return seg.replace("%2F", "/").replace("%25", "%")


def _jsonable(v) -> bool:
    if v is None or isinstance(v, (bool, int, float, str)):
        return True
    if isinstance(v, (list, tuple)):
        return all(_jsonable(e) for e in v)
    return False


def _with_bytes(v) -> bool:
    """A (nested) list of plain values and bytes (e.g. text samples a unit logged)."""
    if isinstance(v, (bytes, bytearray)) or _jsonable(v):
        return True
    return isinstance(v, (list, tuple)) and all(_with_bytes(e) for e in v)


def _hexed(v):
    if isinstance(v, (bytes, bytearray)):
        return {"hex": bytes(v).hex()}
    if isinstance(v, (list, tuple)):
        return [_hexed(e) for e in v]
    return v


def _unhexed(v):
    if isinstance(v, dict):
        return bytes.fromhex(v["hex"])
    if isinstance(v, list):
        return [_unhexed(e) for e in v]
    return v


def split_tree(tree: dict, prefix: str, arrays: dict, scalars: dict) -> None:
    """Split a nested dict into ``arrays`` (ndarrays) and ``scalars`` (JSON values), keyed by
    ``prefix/key/...`` (keys escaped, so they may contain '/')."""
    scalars[prefix] = {"__dict__": True}
    for key, v in tree.items():
        name = f"{prefix}/{_esc(key)}"
        if isinstance(v, dict):
            split_tree(v, name, arrays, scalars)
        elif isinstance(v, np.ndarray):
            arrays[name] = v
        elif isinstance(v, (bytes, bytearray)):     # e.g. an FMU's serialized state
            arrays[name] = np.frombuffer(bytes(v), dtype=np.uint8)
            scalars[name] = {"__bytes__": True}
        elif isinstance(v, (np.floating, np.integer, np.bool_)):
            scalars[name] = v.item()
        elif v is None or isinstance(v, (bool, int, float, str)):
            scalars[name] = v
        elif isinstance(v, (list, tuple)) and _jsonable(v):
            scalars[name] = {"__list__": list(v)}
        elif isinstance(v, (list, tuple)) and _with_bytes(v):
            scalars[name] = {"__hexed__": _hexed(v)}
        else:
            raise ModelError(f"checkpoint: cannot save {name} of type {type(v).__name__}; "
                             "block state must be arrays, bytes or plain numbers")


def join_tree(prefix: str, arrays, scalars: dict) -> dict:
    """Inverse of :func:`split_tree`: the nested dict stored under ``prefix``."""
    root: dict = {}
    plen = len(prefix) + 1

    def put(name, value):
        node = root
        segs = [_unesc(s) for s in name[plen:].split("/")]
        for seg in segs[:-1]:
            node = node.setdefault(seg, {})
        if isinstance(value, dict):
            node.setdefault(segs[-1], {})      # an empty dict marker, never a clobber
        else:
            node[segs[-1]] = value

    as_bytes = set()
    for name, v in scalars.items():
        if name.startswith(prefix + "/"):
            if isinstance(v, dict) and v.get("__dict__"):
                put(name, {})
            elif isinstance(v, dict) and v.get("__bytes__"):
                as_bytes.add(name)              # (its bytes are an array)
            elif isinstance(v, dict) and "__hexed__" in v:
                put(name, _unhexed(v["__hexed__"]))
            else:
                put(name, v["__list__"] if isinstance(v, dict) and "__list__" in v else v)
    for name, a in arrays.items():
        if name.startswith(prefix + "/"):
            put(name, a.tobytes() if name in as_bytes else np.array(a))
    return root


# -- snapshots -------------------------------------------------------------------------------

def snapshot(sim) -> dict:
    """The full state of an initialized simulator as one nested dict (see module doc)."""
    if not sim.initialized:
        raise ModelError("snapshot of a simulator that was not initialized")
    pos = sim.store.position()
    solver = sim.solver.get_state() if sim.solver is not None else None
    values = sim.state.snapshot()
    monitor = sim.monitor
    plan = sim.plan
    return {
        "meta": {
            "blocks": [[n, type(b).__name__] for b, n in zip(plan.blocks, plan.names)],
            "dt": sim.config.dt, "t0": sim.config.t0, "k": values["k"], "t": sim.t,
            "t_cont": values["t_stop"], "last_logged": pos["last_logged"],
            "events": [ev.name for ev in sim.events],
            "g_prev": list(monitor.g_prev) if monitor is not None else [],
            # The run's own (an atomic subsystem's travel in its own snapshot).
            "event_log": [list(e) for e in (monitor.log if monitor is not None else [])],
            "stats": values["stats"],
            "log_lengths": pos["log_lengths"], "task_ticks": pos["task_ticks"],
            "solver_exact": sim.solver is None or bool(type(sim.solver).checkpoint_exact),
        },
        "X": values["X"],
        "blocks": values["blocks"],
        "solver": {} if solver is None else solver,
        "atomic": {path: snapshot(blk.inner) for path, blk in sim.atomics},
    }


def inexact_solvers(tree: dict, path: str = "") -> list[str]:
    """``"path: solver"`` of every plan in snapshot ``tree`` (atomic subsystems included)
    whose solver does not continue bit for bit from a restored state."""
    found = [] if tree["meta"].get("solver_exact", True) else \
        [f"{path or 'the model'}: {tree['solver']['solver']}"]
    for sub, inner in tree["atomic"].items():
        found += inexact_solvers(inner, f"{path}/{sub}" if path else sub)
    return found


def warn_inexact(found: list[str], where) -> None:
    """Warn that the checkpoint ``where`` resumes inexactly because of solvers ``found``."""
    if found:
        warnings.warn(f"checkpoint {where}: solver(s) declaring checkpoint_exact=False "
                      f"({'; '.join(found)}) cannot export their step history, so a run "
                      f"resumed from it continues to the solvers' tolerances, not bit for bit; "
                      f"use a solver of cosim.solvers.SOLVERS for an exact resume",
                      RuntimeWarning, stacklevel=3)


def mismatch(sim, tree: dict) -> list[str]:
    """Why snapshot ``tree`` does not fit simulator ``sim`` (empty if it does)."""
    meta = tree["meta"]
    mine = [[n, type(b).__name__] for b, n in zip(sim.plan.blocks, sim.plan.names)]
    problems = []
    if meta["blocks"] != mine:
        have = {tuple(x) for x in meta["blocks"]}
        want = {tuple(x) for x in mine}
        problems.append(f"blocks differ: only in checkpoint {sorted(have - want)}, only in "
                        f"model {sorted(want - have)}" if have != want else
                        "blocks are in a different order")
    if meta["dt"] != sim.config.dt or meta["t0"] != sim.config.t0:
        problems.append(f"dt/t0 differ: checkpoint {meta['dt']}/{meta['t0']}, config "
                        f"{sim.config.dt}/{sim.config.t0}")
    if meta["events"] != [ev.name for ev in sim.events]:
        problems.append(f"events differ: {meta['events']} vs {[ev.name for ev in sim.events]}")
    for path, blk in sim.atomics:
        if path in tree["atomic"]:
            problems += [f"{path}: {p}" for p in mismatch(blk.inner, tree["atomic"][path])]
    return problems


def _apply(sim, tree: dict, rollback: bool, saved=None, prefix: str = "") -> None:
    """Put ``sim`` in the state of ``tree``; ``rollback`` keeps the logs, cut back to the
    snapshot (in-memory rollback), otherwise logs restart there (a run resumed from a file),
    with ``saved`` (``(arrays, logs)`` of a checkpoint file) the logs before it."""
    if not sim.initialized:
        sim.initialize()
    meta = tree["meta"]
    X = np.asarray(tree["X"], dtype=np.float64)
    if X.shape != sim.state.X.shape:
        raise ModelError(f"checkpoint: continuous state has {X.size} entries, the model "
                         f"{sim.state.X.size}")
    sim.state.restore({"X": X, "blocks": tree["blocks"], "k": meta["k"],
                       "t_stop": meta["t_cont"], "stats": meta["stats"]})
    if sim.solver is not None:
        sim.solver.set_state(tree["solver"])
    for path, blk in sim.atomics:
        _apply(blk.inner, tree["atomic"][path], rollback, saved, f"{prefix}/{path}")
    if rollback:
        sim.store.cut({"log_lengths": meta["log_lengths"], "task_ticks": meta["task_ticks"],
                       "last_logged": meta["last_logged"]})
    elif saved is not None and prefix in saved[1]:
        _seed_logs(sim, prefix, *saved, meta["last_logged"])
    else:
        sim.restart_logs(meta["last_logged"] + 1, meta["last_logged"])
    if sim.monitor is not None:
        sim.monitor.g_prev[:] = meta["g_prev"]
        sim.monitor.log[:] = [tuple(e) for e in meta["event_log"]]


def restore_snapshot(sim, tree: dict) -> None:
    """Roll ``sim`` back to a :func:`snapshot`; logs after it are discarded."""
    problems = mismatch(sim, tree)
    if problems:
        raise ModelError("state does not match this simulator: " + "; ".join(problems))
    _apply(sim, tree, rollback=True)


# -- checkpoint files ------------------------------------------------------------------------

def checkpoint_file(path) -> Path:
    """The file of checkpoint ``path``: ``path.npz`` (``path`` may end in ``.npz``, or in
    ``.json`` as format 2's names did)."""
    p = Path(path)
    base = p.with_suffix("") if p.suffix in (".json", ".npz") else p
    return base.with_name(base.name + ".npz")


def paths(path) -> tuple[Path, Path]:
    """Format 2's ``(json, npz)`` file paths of checkpoint ``path`` (to name them when a
    checkpoint of that format is found)."""
    npz = checkpoint_file(path)
    return npz.with_suffix(".json"), npz


def check_writable(path) -> Path:
    """Raise ModelError now, naming ``path`` and why, if checkpoint ``path`` could not be
    written (its folder missing or not writable), rather than when the first checkpoint is
    due; the checkpoint file otherwise."""
    target = checkpoint_file(path)
    folder = target.parent
    if not folder.is_dir():
        raise ModelError(f"checkpoint path {path}: folder {folder} does not exist; create it "
                         "or choose another checkpoint path")
    try:
        fd, probe = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".probe", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise ModelError(f"checkpoint path {path}: cannot write in {folder} ({err.strerror}); "
                         "choose a writable checkpoint path") from err
    if target.exists() and not os.access(target, os.W_OK):
        raise ModelError(f"checkpoint path {path}: {target} exists and is not writable")
    return target


def write_file(path, meta: dict, arrays: dict) -> Path:
    """Write one checkpoint file atomically (see the module notes); its path.

    Raises
    ------
    ModelError
        It could not be written (the reason, e.g. no space left); the previous checkpoint
        at ``path``, if any, is unchanged and no temporary file is left.
    """
    target = checkpoint_file(path)
    data = {}
    for key, a in arrays.items():
        a = np.asarray(a)
        if a.dtype == object:
            data[key + _TEXT] = _text_to_bytes(a)
        else:
            data[key] = a
    data[_META] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp",
                                   dir=target.parent)
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, **data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
        tmp = None
        _sync_folder(target.parent)
    except OSError as err:
        raise ModelError(f"cannot write checkpoint {target}: {err.strerror or err}; the "
                         "previous checkpoint there (if any) is unchanged") from err
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
    return target


def _text_to_bytes(a: np.ndarray) -> np.ndarray:
    """A text array (str / bytes elements, object dtype) as JSON in uint8 (shape kept)."""
    items = [{"hex": x.hex()} if isinstance(x, (bytes, bytearray)) else str(x)
             for x in a.ravel()]
    blob = json.dumps({"shape": list(a.shape), "items": items}).encode()
    return np.frombuffer(blob, dtype=np.uint8)


def _text_from_bytes(data: np.ndarray) -> np.ndarray:
    """The text array :func:`_text_to_bytes` wrote."""
    doc = json.loads(data.tobytes().decode())
    items = [bytes.fromhex(x["hex"]) if isinstance(x, dict) else x for x in doc["items"]]
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out.reshape(doc["shape"])


def _sync_folder(folder: Path) -> None:
    """Make a rename in ``folder`` durable (where the platform allows)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def read_file(path, kind: str) -> tuple[dict, dict]:
    """``(meta, arrays)`` of the checkpoint file at ``path`` written for ``kind``
    (``"simulation"`` or ``"co-simulation"``).

    Raises
    ------
    ModelError
        No such file, a file of format 2 (two files), of another kind or format, or a
        damaged one (naming it and why).
    """
    target = checkpoint_file(path)
    if not target.exists():
        if target.with_suffix(".json").exists():
            _format_2(target.with_suffix(".json"))
        raise ModelError(f"no checkpoint at {target}")
    try:
        with np.load(target, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        for key in [k for k in arrays if k.endswith(_TEXT)]:
            arrays[key[:-len(_TEXT)]] = _text_from_bytes(arrays.pop(key))
        if _META not in arrays and target.with_suffix(".json").exists():
            return _format_2(target.with_suffix(".json"))
        meta = json.loads(arrays.pop(_META).tobytes().decode())
        if not isinstance(meta, dict):
            raise ValueError("its description is not a JSON object")
    except ModelError:
        raise
    except Exception as err:  # noqa: BLE001 - zip, npy, JSON or I/O: all mean damaged
        raise ModelError(f"checkpoint {target} is damaged or not a checkpoint "
                         f"({type(err).__name__}: {err}); use another checkpoint or run "
                         "from the start") from None
    if meta.get("format") != FORMAT:
        raise ModelError(f"checkpoint {target} has format {meta.get('format')!r}; this cosim "
                         f"reads format {FORMAT}")
    if meta.get("kind") != kind:
        raise ModelError(f"checkpoint {target} is of a {meta.get('kind')}, not of a {kind}")
    return meta, arrays


def _format_2(old: Path):
    raise ModelError(f"checkpoint {old} has format 2 (path.json + path.npz, which a crash "
                     f"could tear or mix); this cosim reads format {FORMAT} (one file): run "
                     "again to write a new checkpoint")


# -- the identity of a checkpoint's model ------------------------------------------------

_RUN_IDS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def run_id(owner) -> str:
    """The id of the run of ``owner`` (a simulator or a master), made on first use."""
    rid = _RUN_IDS.get(owner)
    if rid is None:
        rid = _RUN_IDS[owner] = uuid.uuid4().hex
    return rid


def identity(sim, run: str) -> dict:
    """What a checkpoint of simulator ``sim``'s model must match: ``structure`` (a hash of
    its flattened blocks and their types, wires, base steps, atomic subsystems inside),
    ``parameters`` (the model's parameters, each subsystem's context and each block's
    construction values as written: together they fix every evaluated value; large arrays
    by hash) and the ``run`` id."""
    structure: list = []
    _structure(sim, "", structure)
    digest = hashlib.sha256(json.dumps(structure).encode()).hexdigest()[:32]
    model = sim.model
    parameters = {"(model parameters)": {str(k): _plain(v) for k, v in
                                         (getattr(model, "parameters", None) or {}).items()}}
    _parameters(model, "", parameters)
    return {"run": run, "structure": digest, "parameters": parameters}


def _structure(sim, prefix: str, out: list) -> None:
    plan = sim.plan
    names = [prefix + n for n in plan.names]
    out.append([prefix, sim.config.dt, sim.config.t0,
                [[n, type(b).__name__] for n, b in zip(names, plan.blocks)],
                sorted([names[w.src], str(w.src_port), names[w.dst], str(w.dst_port)]
                       for w in plan.wires)])
    for path, blk in sim.atomics:
        _structure(blk.inner, f"{prefix}{path}/", out)


def _parameters(diagram, prefix: str, out: dict) -> None:
    """Each block's construction values and each subsystem's context, by path."""
    from cosim.model.diagram import Diagram
    for b in diagram.blocks:
        path = f"{prefix}{b.name}"
        if isinstance(b, Diagram):
            context = getattr(b, "context", None) or {}
            if context:
                out[f"{path} (context)"] = {str(k): _plain(v) for k, v in context.items()}
            _parameters(b, path + "/", out)
            continue
        try:
            spec = b.spec()
        except Exception:  # noqa: BLE001 - a block without a recoverable spec: by type only
            spec = {}
        out[path] = {str(k): _plain(v) for k, v in spec.items()}


def _plain(v):
    """A parameter value as JSON (arrays of more than 16 values by their hash)."""
    if isinstance(v, (bool, int, str)) or v is None:
        return v
    if isinstance(v, float):
        return v if np.isfinite(v) else repr(v)
    if isinstance(v, (np.ndarray, list, tuple, np.generic)):
        try:
            a = np.asarray(v, dtype=np.float64)
        except (TypeError, ValueError):
            return [_plain(e) for e in v] if isinstance(v, (list, tuple)) else repr(v)
        if a.size > 16:
            return {"shape": list(a.shape),
                    "sha256": hashlib.sha256(a.tobytes()).hexdigest()[:16]}
        return [_plain(float(x)) for x in a.reshape(-1)] if a.ndim else _plain(float(a))
    if isinstance(v, dict):
        return {str(k): _plain(e) for k, e in v.items()}
    return f"<{type(v).__name__}>"


def check_identity(saved: dict | None, mine: dict, where) -> None:
    """Raise ModelError naming what differs between checkpoint ``where``'s model
    (``saved``) and this one (``mine``)."""
    if saved is None:
        raise ModelError(f"checkpoint {where} does not say which model it is of")
    problems = []
    if saved.get("structure") != mine["structure"]:
        problems.append("the model's structure differs (blocks, their types, wires or "
                        "steps)")
    theirs, ours = saved.get("parameters", {}), mine["parameters"]
    for block in sorted(set(theirs) | set(ours)):
        a, b = theirs.get(block), ours.get(block)
        if a == b:
            continue
        if a is None or b is None:
            where = "model" if a is None else "checkpoint"
            problems.append(f"block {block} is only in the {where}")
            continue
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                problems.append(f"{block}.{key} = {_short(a.get(key))} in the checkpoint, "
                                f"{_short(b.get(key))} in the model")
    if problems:
        more = f" (and {len(problems) - 8} more)" if len(problems) > 8 else ""
        raise ModelError(f"checkpoint {where} (run {saved.get('run', '?')}) is of another "
                         f"model: {'; '.join(problems[:8])}{more}; load it into the model "
                         "that wrote it, or run this one from the start")


def _short(v) -> str:
    text = json.dumps(v)
    return text if len(text) <= 60 else text[:57] + "..."


# -- a simulator's checkpoint ---------------------------------------------------------------

def save(sim, path) -> None:
    """Write the checkpoint of ``sim`` (its state, identity and logs so far) to
    ``path.npz``."""
    import cosim

    arrays: dict[str, np.ndarray] = {}
    scalars: dict = {}
    tree = snapshot(sim)
    target = checkpoint_file(path)
    warn_inexact(inexact_solvers(tree), target)
    split_tree(tree, "sim", arrays, scalars)
    logs: dict = {}
    _save_logs(sim, "", arrays, logs)
    meta = {"format": FORMAT, "kind": "simulation", "cosim": cosim.__version__,
            "numpy": np.__version__, "model": sim.plan.name, "scalars": scalars,
            "identity": identity(sim, run_id(sim)), "logs": logs}
    write_file(target, meta, arrays)


def _save_logs(sim, prefix: str, arrays: dict, logs: dict) -> None:
    """The log store of ``sim`` (and of its atomic subsystems) into ``arrays``; what they
    hold into ``logs`` (per simulator path: k0, per signal its task)."""
    store = sim.store
    store.flush()
    tasks = store.task_ticks
    signals = []
    for i, (key, (samples, ticks)) in enumerate(store.lists.items()):
        task = next(n for n, t in enumerate(tasks) if t is ticks)
        arrays[f"log{prefix}/v{i}"] = samples.array(0, samples.length())
        signals.append([key, task])
    for n, ticks in enumerate(tasks):
        arrays[f"log{prefix}/t{n}"] = np.asarray(ticks, dtype=np.int64)
    logs[prefix] = {"k0": store.k0, "signals": signals, "tasks": len(tasks)}
    for path, blk in sim.atomics:
        _save_logs(blk.inner, f"{prefix}/{path}", arrays, logs)


def _seed_logs(sim, prefix: str, arrays: dict, logs: dict, last: int) -> None:
    """Restart the logs of ``sim`` (restored) with those :func:`_save_logs` saved."""
    held = logs[prefix]
    sim.restart_logs(held["k0"], last)
    store = sim.store
    for n in range(held["tasks"]):
        store.task_ticks[n].extend(int(k) for k in arrays[f"log{prefix}/t{n}"])
    for i, (key, _) in enumerate(held["signals"]):
        store.lists[key][0].add_chunk(arrays[f"log{prefix}/v{i}"])


def load(sim, path) -> None:
    """Restore ``sim`` (the model that wrote it, same parameter values) and its logs from a
    checkpoint written by :func:`save`."""
    target = checkpoint_file(path)
    meta, arrays = read_file(target, "simulation")
    check_identity(meta.get("identity"), identity(sim, ""), target)
    try:
        logs = meta["logs"]
        tree = join_tree("sim", {k: v for k, v in arrays.items() if not k.startswith("log")},
                         meta["scalars"])
    except (KeyError, TypeError, ValueError) as err:
        raise ModelError(f"checkpoint {target} is damaged ({type(err).__name__}: {err})") \
            from None
    problems = mismatch(sim, tree)
    if problems:
        raise ModelError(f"checkpoint {target} does not match model {sim.plan.name!r}: "
                         + "; ".join(problems))
    try:
        _apply(sim, tree, rollback=False, saved=(arrays, logs))
    except (KeyError, ValueError) as err:
        raise ModelError(f"checkpoint {target} is damaged ({type(err).__name__}: {err})") \
            from None
