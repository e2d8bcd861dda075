"""One FMU instance: the one choke point through which cosim calls an FMU (via fmpy).

:meth:`FmuInstance.call` makes every FMI call: a status worse than warning becomes a
:class:`FmuCallError` naming the FMU, the call and the time, with the messages the FMU logged
through its logger callback (captured here, never printed). Values are read and written per
FMI type with the value references and buffers made once (:meth:`FmuInstance.groups`).
:meth:`FmuInstance.free` terminates the FMU and frees the instance; an FMU file is unpacked once
per process (:func:`unpacked`) and removed when the process exits.
"""

from __future__ import annotations

import atexit
import ctypes
import itertools
import os
import shutil
import tempfile
from collections import deque

import numpy as np

from cosim.errors import SimulationError
from cosim.fmi.pythonfmu_exit import release_at_exit

__all__ = ["FmuCallError", "FmuInstance", "ValueGroup"]

STATUS = ("ok", "warning", "discard", "error", "fatal", "pending")
DISCARD = 2


#: FMI 2.0 logging: fmpy's proxy (which formats the variadic message) keeps ONE Python
#: logger for the whole process, so there is one here, installed once and never freed; it
#: routes each message by the instance's componentEnvironment (an id) to that instance's log,
#: and prints the others as fmpy's own logger does.
_FMI2_LOGS: dict[int, deque] = {}
_ENV_IDS = itertools.count(1)
_FMI2 = {}


def _fmi2_dispatch(env, instance_name, status, category, message) -> None:
    log = _FMI2_LOGS.get(env)
    if log is None:
        from fmpy.fmi1 import printLogMessage
        printLogMessage(env, instance_name, status, category, message)
        return
    text = message.decode("utf-8", "replace") if isinstance(message, bytes) else str(message)
    label = STATUS[status] if 0 <= status < len(STATUS) else str(status)
    log.append(f"[{label}] {text}")


def _fmi2_callbacks():
    """The process's FMI 2.0 callback functions (made and proxied once)."""
    if not _FMI2:
        from fmpy import calloc, fmi2, free
        from fmpy.logging import addLoggerProxy
        cb = fmi2.fmi2CallbackFunctions()
        _FMI2["logger"] = fmi2.fmi2CallbackLoggerTYPE(_fmi2_dispatch)
        cb.logger = _FMI2["logger"]
        cb.allocateMemory = fmi2.fmi2CallbackAllocateMemoryTYPE(calloc)
        cb.freeMemory = fmi2.fmi2CallbackFreeMemoryTYPE(free)
        addLoggerProxy(ctypes.byref(cb))
        _FMI2["callbacks"] = cb
    return _FMI2["callbacks"]


def _needed(name: str) -> bool:
    """True for the files of an FMU archive an instance needs (FMI: the description, the
    binaries, the resources; not the sources and documentation an FMU may carry)."""
    return name == "modelDescription.xml" or name.startswith(("binaries/", "resources/"))


#: FMU files unpacked by this process: (file, size, mtime) -> directory. Each is unpacked
#: once and its directory removed when the process exits: a co-simulation instantiates each
#: FMU for its monolithic check and again as a unit, a sweep once per run, and unpacking and
#: removing cost more than instantiating (instances of one FMU share its directory, which
#: FMI allows: the importer never writes to it).
_UNPACKED: dict[tuple[str, int, int], str] = {}


def unpacked(path) -> str:
    """The directory holding FMU file ``path`` unpacked (made on first use)."""
    from fmpy import extract
    p = os.path.realpath(path)
    st = os.stat(p)
    key = (p, st.st_size, st.st_mtime_ns)
    d = _UNPACKED.get(key)
    if d is None or not os.path.isdir(d):
        d = tempfile.mkdtemp(prefix="cosim-fmu-")
        extract(p, d, include=_needed)
        if not _UNPACKED:
            atexit.register(_remove_unpacked)
        _UNPACKED[key] = d
    return d


def _remove_unpacked() -> None:
    for d in _UNPACKED.values():
        shutil.rmtree(d, ignore_errors=True)
    _UNPACKED.clear()


class FmuCallError(SimulationError):
    """An FMI call returned a status worse than warning.

    Attributes
    ----------
    call : str
        The FMI function.
    status : int
        Its status (2 discard, 3 error, 4 fatal).
    """

    def __init__(self, message: str, call: str, status: int, t: float | None):
        self.call = call
        self.status = status
        super().__init__(message, t=t)


class FmuInstance:
    """An instantiated FMU (FMI 2.0 or 3.0; model exchange or co-simulation).

    Parameters
    ----------
    path : Path
        The ``.fmu`` file.
    md : fmpy ModelDescription
    kind : {"cs", "me"}
        The interface to instantiate.
    name : str
        Instance name (the block or unit), used in errors.
    event_mode : bool
        FMI 3.0 co-simulation: instantiate with event mode (input clocks need it).
    """

    def __init__(self, path, md, kind: str, name: str, event_mode: bool = False):
        self.path = path
        self.md = md
        self.name = name
        self.fmi3 = md.fmiVersion == "3.0"
        self.t = 0.0
        self.log: deque[str] = deque(maxlen=20)
        self.instantiated = False
        self.terminated = False
        self._component: ctypes.c_void_p | None = None
        self._dir = unpacked(path)
        iface = md.coSimulation if kind == "cs" else md.modelExchange
        args = dict(guid=md.guid, unzipDirectory=self._dir,
                    modelIdentifier=iface.modelIdentifier, instanceName=name)
        if self.fmi3:
            from fmpy import fmi3
            cls = fmi3.FMU3Slave if kind == "cs" else fmi3.FMU3Model
        else:
            from fmpy import fmi2
            cls = fmi2.FMU2Slave if kind == "cs" else fmi2.FMU2Model
        self.fmu = cls(**args)
        # A pythonfmu-built library would corrupt the heap at exit (pythonfmu_exit says why).
        release_at_exit()
        self._instantiate(kind, event_mode)

    # -- the choke point -----------------------------------------------------------------------

    def call(self, what: str, fn, *args):
        """Call ``fn(*args)`` (an fmpy method of this FMU) as FMI function ``what``."""
        try:
            return fn(*args)
        except Exception as err:  # noqa: BLE001 - fmpy raises FMICallException and plain ones
            raise self.error(what, err) from err

    def ask(self, fn, *args):
        """``fn(*args)`` for an optional inquiry (an fmpy method of this FMU), or None if
        the FMU fails it (many do not implement the status inquiries); what it logged
        about that failure is dropped, so the error that follows carries only the messages
        that explain it."""
        before = list(self.log)
        try:
            return fn(*args)
        except Exception:  # noqa: BLE001 - fmpy raises FMICallException and plain ones
            self.log.clear()
            self.log.extend(before)
            return None

    def error(self, what: str, err: Exception) -> FmuCallError:
        """The error for a failed call, with the FMU's logged messages."""
        status = getattr(err, "status", 3)
        label = STATUS[status] if 0 <= status < len(STATUS) else "illegal status"
        logged = "; ".join(self.log)
        self.log.clear()
        msg = (f"FMU {self.name!r} ({self.path.name}): {what} failed with status {status} "
               f"({label})" + (f"; the FMU logged: {logged}" if logged else
                               f" ({err})" if not hasattr(err, "status") else ""))
        return FmuCallError(msg, what, status, self.t)

    def _logger(self, env, status, category, message) -> None:
        # FMI 3.0's logMessage callback (one per instance; FMI 2.0: _fmi2_dispatch).
        text = message.decode("utf-8", "replace") if isinstance(message, bytes) else \
            str(message)
        label = STATUS[status] if 0 <= status < len(STATUS) else str(status)
        self.log.append(f"[{label}] {text}")

    def _instantiate(self, kind: str, event_mode: bool) -> None:
        f = self.fmu
        if self.fmi3:
            if kind == "cs":
                self.call("fmi3InstantiateCoSimulation", f.instantiate, False, False,
                          event_mode, False, self._logger)
            else:
                self.call("fmi3InstantiateModelExchange", f.instantiate, False, False,
                          self._logger)
        else:
            cb = _fmi2_callbacks()
            self._env = next(_ENV_IDS)
            _FMI2_LOGS[self._env] = self.log
            own = type(cb)()
            ctypes.memmove(ctypes.byref(own), ctypes.byref(cb), ctypes.sizeof(cb))
            own.componentEnvironment = self._env     # routes this instance's messages
            self._callbacks = own                     # kept alive as long as the instance
            self.call("fmi2Instantiate", f.instantiate, False, own)
        self.instantiated = True
        # Ask for the FMU's warning and error messages where it names categories for them
        # (the standard's logStatus* names): they go into errors, never to the console.
        cats = [c.name for c in (self.md.logCategories or ())
                if c.name in ("logStatusWarning", "logStatusDiscard", "logStatusError",
                              "logStatusFatal")]
        if cats:
            try:
                f.setDebugLogging(True, cats)
            except Exception:  # noqa: BLE001 - optional: an FMU may refuse, it still runs
                self.log.clear()

    def free(self) -> None:
        """Terminate (if initialized and not yet terminated) and free the instance. Safe to
        call twice."""
        try:
            if self.instantiated:
                if not self.terminated:
                    self.terminated = True
                    self.call("terminate", self.fmu.terminate)
        finally:
            if self.instantiated:
                self.instantiated = False
                self.fmu.freeInstance()
            _FMI2_LOGS.pop(getattr(self, "_env", None), None)

    # -- values ----------------------------------------------------------------------------

    def groups(self, variables) -> list[ValueGroup]:
        """The values of ``variables`` as one :class:`ValueGroup` per FMI type (value
        references and buffers resolved once); their order is that of a flat vector holding
        every variable's values in turn."""
        table = _C3 if self.fmi3 else _C2
        members: dict[tuple, list] = {}
        offset = 0
        for v in variables:
            # One call per FMI function: an enumeration is read with the integers of its
            # width (fmi2GetInteger, fmi3GetInt64).
            members.setdefault(table[v.type], []).append((v, offset))
            offset += v.size
        return [ValueGroup(self, m[0][0].type, m) for m in members.values()]

    def raw(self, name: str):
        """The FMI function ``name`` of the FMU's library for the per-step calls, returning
        the status (checked by :meth:`check`) and taking ctypes objects only: the instance
        pointer :attr:`component`, ``c_double`` / ``c_size_t`` objects, arrays. No argument
        types are declared, so a call converts nothing (fmpy's declared ones cost about
        0.5 µs per call). Valid while the instance lives (fmpy unloads the library when
        it frees it)."""
        fn = getattr(self.fmu.dll, name)
        return _BARE(ctypes.cast(fn, ctypes.c_void_p).value)

    @property
    def component(self) -> ctypes.c_void_p:
        """The FMU instance pointer, as the first argument of :meth:`raw` functions."""
        if self._component is None:
            self._component = ctypes.c_void_p(self.fmu.component)
        return self._component

    def check(self, name: str, status: int) -> None:
        """Raise the error of FMI function ``name`` if ``status`` is worse than warning."""
        if status > 1:
            raise self.error(name, _Status(status))

    def read(self, groups, out: np.ndarray) -> None:
        """Read every value of ``groups`` into the flat float64 vector ``out``."""
        for g in groups:
            status = g.get()
            if status > 1:
                raise self.error(g.get_name, _Status(status))
            out[g.pos] = g.view

    def read_new(self, groups, n: int) -> np.ndarray:
        """Every value of ``groups`` as a new flat float64 vector of ``n`` values."""
        if len(groups) == 1 and groups[0].whole:
            g = groups[0]
            status = g.get()
            if status > 1:
                raise self.error(g.get_name, _Status(status))
            return g.view.astype(np.float64)        # a copy: the buffer is reused
        out = np.empty(n)
        self.read(groups, out)
        return out

    def write(self, groups, flat: np.ndarray) -> None:
        """Set every value of ``groups`` from the flat vector ``flat``."""
        for g in groups:
            if g.view is not flat:
                g.view[:] = flat[g.pos]
            status = g.set()
            if status > 1:
                raise self.error(g.set_name, _Status(status))


#: A C function returning an int status, arguments passed as the ctypes objects given
#: (cdecl: ctypes accepts more arguments than the prototype lists).
_BARE = ctypes.CFUNCTYPE(ctypes.c_int)


class _Status(Exception):
    """A bad status of a raw call (carried to :meth:`FmuInstance.error`)."""

    def __init__(self, status: int):
        super().__init__(f"status {status}")
        self.status = status


#: FMI type -> (ctypes type, name of the FMI functions' type part), per version.
_C2 = {"Real": (ctypes.c_double, "Real"), "Integer": (ctypes.c_int, "Integer"),
       "Enumeration": (ctypes.c_int, "Integer"), "Boolean": (ctypes.c_int, "Boolean")}
_C3 = {"Float64": (ctypes.c_double, "Float64"), "Float32": (ctypes.c_float, "Float32"),
       "Int8": (ctypes.c_int8, "Int8"), "UInt8": (ctypes.c_uint8, "UInt8"),
       "Int16": (ctypes.c_int16, "Int16"), "UInt16": (ctypes.c_uint16, "UInt16"),
       "Int32": (ctypes.c_int32, "Int32"), "UInt32": (ctypes.c_uint32, "UInt32"),
       "Int64": (ctypes.c_int64, "Int64"), "UInt64": (ctypes.c_uint64, "UInt64"),
       "Boolean": (ctypes.c_bool, "Boolean"), "Enumeration": (ctypes.c_int64, "Int64")}


class ValueGroup:
    """Variables of one FMI type read or written in one FMI call, through buffers made once.

    Attributes
    ----------
    view : ndarray
        The values as last read / about to be written (a numpy view of the C buffer).
    buf : ctypes array
        That C buffer (an element read or written here is a Python float or int, cheaper
        than numpy's scalars for one value).
    pos : slice or ndarray
        Where those values sit in the flat vector of all variables.
    whole : bool
        True if the group's values are the whole flat vector, in order.
    get, set : callable
        The raw FMI calls with every argument bound; they return the FMI status.
    get_name, set_name : str
        The FMI functions, for errors.
    """

    __slots__ = ("view", "buf", "pos", "whole", "get", "set", "get_name", "set_name",
                 "_vrs")

    def __init__(self, inst: FmuInstance, t: str, members: list):
        import functools
        ctype, part = (_C3 if inst.fmi3 else _C2)[t]
        prefix = "fmi3" if inst.fmi3 else "fmi2"
        vrs = [v.vr for v, _ in members]
        n = sum(v.size for v, _ in members)
        vr_arr = (ctypes.c_uint32 * len(vrs))(*vrs)
        buf = (ctype * max(n, 1))()
        self._vrs, self.buf = vr_arr, buf
        self.view = np.ctypeslib.as_array(buf)[:n]
        positions = np.concatenate([np.arange(o, o + v.size) for v, o in members])
        contiguous = positions.size and np.array_equal(
            positions, np.arange(positions[0], positions[0] + positions.size))
        self.pos = slice(int(positions[0]), int(positions[0]) + positions.size) \
            if contiguous else positions
        #: The group holds every variable of the flat vector, in its order.
        self.whole = bool(contiguous) and self.pos.start == 0
        self.get_name, self.set_name = f"{prefix}Get{part}", f"{prefix}Set{part}"
        raw_get, raw_set = inst.raw(self.get_name), inst.raw(self.set_name)
        extra = (ctypes.c_size_t(n),) if inst.fmi3 else ()
        args = (inst.component, vr_arr, ctypes.c_size_t(len(vrs)), buf, *extra)
        self.get = functools.partial(raw_get, *args)
        self.set = functools.partial(raw_set, *args)
