"""Reducers that kill the worker process running them (importable by Ray's workers): a lost
worker in the middle of a sweep's chunk."""

import os
from pathlib import Path


class DiesOnce:
    """The last value of ``plant.out``; the first run to get here outside the driver (no
    file ``marker`` yet) creates ``marker`` and kills its process."""

    signals = ("plant.out",)

    def __init__(self, marker: str, driver: int):
        self.marker, self.driver = marker, driver

    def __repr__(self) -> str:
        return f"DiesOnce({self.marker!r})"

    def __call__(self, logs) -> float:
        if os.getpid() != self.driver and not Path(self.marker).exists():
            Path(self.marker).write_text(str(os.getpid()))
            os._exit(1)
        return float(logs["plant.out"][-1, 0])


class DiesAbove:
    """The last value of ``plant.out``; a run whose value is above ``limit`` kills its
    process (outside the driver), every time it is run."""

    signals = ("plant.out",)

    def __init__(self, limit: float, driver: int):
        self.limit, self.driver = limit, driver

    def __repr__(self) -> str:
        return f"DiesAbove({self.limit!r})"

    def __call__(self, logs) -> float:
        y = float(logs["plant.out"][-1, 0])
        if y > self.limit and os.getpid() != self.driver:
            os._exit(1)
        return y


def _loaded_in(driver: int):
    if os.getpid() != driver:
        raise ImportError("this reducer cannot be loaded outside the driver (as a module "
                          "missing on the workers)")
    return LoadsInTheDriverOnly(driver)


class LoadsInTheDriverOnly:
    """The last value of ``plant.out``; unpickling it outside the driver fails, as a reducer
    from a module the workers do not have: every puller fails before its first chunk."""

    signals = ("plant.out",)

    def __init__(self, driver: int):
        self.driver = driver

    def __reduce__(self):
        return (_loaded_in, (self.driver,))

    def __call__(self, logs) -> float:
        return float(logs["plant.out"][-1, 0])
