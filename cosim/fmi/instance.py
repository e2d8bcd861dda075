"""One FMU instance: the one choke point through which cosim calls an FMU (via fmpy).

:meth:`FmuInstance.call` makes every FMI call: a status worse than warning becomes a
:class:`FmuCallError` naming the FMU, the call and the time, with the messages the FMU logged
through its logger callback (captured here, never printed). Values are read and written per
FMI type with the value references resolved once (:meth:`FmuInstance.accessors`).
:meth:`FmuInstance.free` terminates the FMU, frees the instance and removes the unpacked
directory.
"""

from __future__ import annotations

import ctypes
import shutil
import tempfile
from collections import deque

import numpy as np

from cosim.errors import SimulationError
from cosim.fmi.variables import DTYPES

__all__ = ["FmuCallError", "FmuInstance"]

STATUS = ("ok", "warning", "discard", "error", "fatal", "pending")
DISCARD = 2


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
        from fmpy import extract
        self.path = path
        self.md = md
        self.name = name
        self.fmi3 = md.fmiVersion == "3.0"
        self.t = 0.0
        self.log: deque[str] = deque(maxlen=20)
        self.instantiated = False
        self.terminated = False
        self._dir = tempfile.mkdtemp(prefix="cosim-fmu-")
        extract(str(path), self._dir)
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
        self._instantiate(kind, event_mode)

    # -- the choke point -----------------------------------------------------------------------

    def call(self, what: str, fn, *args):
        """Call ``fn(*args)`` (an fmpy method of this FMU) as FMI function ``what``."""
        try:
            return fn(*args)
        except Exception as err:  # noqa: BLE001 - fmpy raises FMICallException and plain ones
            raise self.error(what, err) from err

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

    def _logger(self, *args) -> None:
        # FMI 2.0: (component, instanceName, status, category, message);
        # FMI 3.0: (instanceEnvironment, status, category, message).
        status, message = (args[1], args[3]) if self.fmi3 else (args[2], args[4])
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
            from fmpy import calloc, free
            from fmpy import fmi2
            from fmpy.logging import addLoggerProxy
            cb = fmi2.fmi2CallbackFunctions()
            cb.logger = fmi2.fmi2CallbackLoggerTYPE(self._logger)
            cb.allocateMemory = fmi2.fmi2CallbackAllocateMemoryTYPE(calloc)
            cb.freeMemory = fmi2.fmi2CallbackFreeMemoryTYPE(free)
            addLoggerProxy(ctypes.byref(cb))
            self._callbacks = cb              # kept alive as long as the instance
            self.call("fmi2Instantiate", f.instantiate, False, cb)
        self.instantiated = True

    def free(self) -> None:
        """Terminate (if initialized and not yet terminated), free the instance, remove the
        unpacked FMU. Safe to call twice."""
        try:
            if self.instantiated:
                if not self.terminated:
                    self.terminated = True
                    self.call("terminate", self.fmu.terminate)
        finally:
            if self.instantiated:
                self.instantiated = False
                self.fmu.freeInstance()
            shutil.rmtree(self._dir, ignore_errors=True)

    # -- values ----------------------------------------------------------------------------

    def accessors(self, variables) -> list:
        """Per FMI type of ``variables``: ``(get, set, vrs, n_values, slices, dtype, name)``
        with value references resolved once; ``slices`` place each variable's values in the
        flat value vector of ``variables``."""
        groups: dict[str, list] = {}
        offset = 0
        for v in variables:
            groups.setdefault(v.type, []).append((v, slice(offset, offset + v.size)))
            offset += v.size
        out = []
        for t, members in groups.items():
            get, set_, name = self._typed(t)
            vrs = [v.vr for v, _ in members]
            n = sum(v.size for v, _ in members)
            dtype = np.dtype(DTYPES.get(t, np.int64 if self.fmi3 else np.int32))
            out.append((get, set_, vrs, n, [s for _, s in members], dtype, name))
        return out

    def _typed(self, t: str):
        f = self.fmu
        if self.fmi3:
            name = "Int64" if t == "Enumeration" else t
            get, set_ = getattr(f, f"get{name}"), getattr(f, f"set{name}")
            return (lambda vrs, n: get(vrs, n)), (lambda vrs, vals: set_(vrs, vals)), name
        name = {"Real": "Real", "Integer": "Integer", "Enumeration": "Integer",
                "Boolean": "Boolean"}[t]
        get, set_ = getattr(f, f"get{name}"), getattr(f, f"set{name}")
        return (lambda vrs, n: get(vrs)), (lambda vrs, vals: set_(vrs, vals)), name

    def get_values(self, acc, n_total: int) -> np.ndarray:
        """All values of one accessor list, as one float64 vector."""
        out = np.empty(n_total)
        for get, _, vrs, n, slices, _, name in acc:
            vals = self.call(f"get{name}", get, vrs, n)
            if len(slices) == 1:
                out[slices[0]] = vals
            else:
                k = 0
                for s in slices:
                    m = s.stop - s.start
                    out[s] = vals[k:k + m]
                    k += m
        return out

    def set_values(self, acc, flat: np.ndarray) -> None:
        """Set all values of one accessor list from the flat vector ``flat``."""
        for _, set_, vrs, _, slices, dtype, name in acc:
            if len(slices) == 1:
                part = flat[slices[0]]
            else:
                part = np.concatenate([flat[s] for s in slices])
            vals = part.tolist() if dtype == np.float64 else part.astype(dtype).tolist()
            self.call(f"set{name}", set_, vrs, vals)
