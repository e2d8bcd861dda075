"""Release pythonfmu's interpreter state before the process exits, so a Python process that
loaded a pythonfmu-built FMU does not corrupt its heap at exit (Linux).

Why: a pythonfmu FMU library (pythonfmu 0.7.0 and its current sources; pythonfmu3 has the
same symbol) keeps a ``std::shared_ptr<PyState>`` as a C++ static and resets it in
``finalizePythonInterpreter``, the library's ``__attribute__((destructor))``. The library
cannot be unloaded (it has STB_GNU_UNIQUE symbols: ``dlclose`` keeps it), so both run at
``exit()``: first the static's destructor (a ``__cxa_atexit`` handler) frees the control
block, then ``_dl_fini`` runs ``finalizePythonInterpreter``, which resets the destroyed
pointer and decrements a count inside the freed block. That block sits in a malloc free list
(seen: an unsorted-bin chunk whose ``bk`` link is that count), so a later ``free`` (numpy's
libgfortran) aborts with "corrupted double-linked list" at random, after everything passed.

Calling ``finalizePythonInterpreter`` ourselves while the static is alive (a Python
``atexit`` hook, which runs before ``exit()``'s handlers) resets it properly; the two calls at
``exit()`` then find an empty pointer and do nothing. In a Python process the library never
initialized Python (its worker thread saw it initialized and returned), so the reset only
joins that finished thread.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import sys
import threading

__all__ = ["release_at_exit", "reset_loaded"]

_SYMBOL = "finalizePythonInterpreter"
_registered = False


def release_at_exit() -> None:
    """Make this process reset the state of every loaded pythonfmu FMU library when its
    interpreter exits. Idempotent; call it once an FMU library may be loaded. Linux only
    (elsewhere the library does its clean-up from ``DllMain``/not at all)."""
    global _registered
    if _registered or not sys.platform.startswith("linux"):
        return
    _registered = True
    atexit.register(reset_loaded)


def _loaded_libraries() -> list[str]:
    """Paths of the shared objects mapped into this process (``/proc/self/maps``); removed
    files (fmpy and cosim delete the unpacked FMU) keep their loaded name."""
    names = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(maxsplit=5)
                if len(parts) == 6 and ".so" in parts[5]:
                    names.add(parts[5].strip().removesuffix(" (deleted)"))
    except OSError:
        return []
    return sorted(names)


def reset_loaded() -> list[str]:
    """Reset the state of every loaded pythonfmu FMU library now (the exit hook).

    Returns
    -------
    list of str
        The libraries reset (empty off the process's main thread).
    """
    # Only in an interpreter that the process's main thread runs (a Python program). Where a
    # non-Python host loaded the FMU, pythonfmu itself initialized Python on its worker thread
    # and finalizes it from finalizePythonInterpreter: resetting from inside that
    # finalization would release the state twice.
    if threading.get_native_id() != os.getpid():
        return []
    done = []
    for name in _loaded_libraries():
        try:
            # RTLD_NOLOAD: only a library that is loaded under this name; nothing new is
            # loaded (dlopen matches the loaded name, even of a deleted file).
            lib = ctypes.CDLL(name, mode=os.RTLD_NOLOAD)
            reset = getattr(lib, _SYMBOL)
            # An FMU's library, not some other library that happens to use the name.
            if not any(hasattr(lib, f) for f in ("fmi2Instantiate",
                                                 "fmi3InstantiateCoSimulation")):
                continue
        except (OSError, AttributeError):
            continue
        reset.restype = None
        reset()
        done.append(name)
    return done
