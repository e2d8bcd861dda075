"""Helpers of the block tests: feed a block recorded inputs, run it, compare runs bit for bit."""

from __future__ import annotations

import numpy as np

from cosim import Block, Model, SimulationConfig, Simulator


class Feed(Block):
    """Test source: ``values[k]`` at tick ``k`` (``t = t0 + k*dt``), the last value after.

    It has no kernel, so a model containing it runs in the reference interpreter.
    """

    input_ports = ()
    direct_feedthrough = False

    def __init__(self, name, values, t0=0.0, **kw):
        super().__init__(name, **kw)
        self.values = np.asarray(values, dtype=np.float64)
        self.t0 = t0

    def output_update(self, t, dt):
        k = min(int(round((t - self.t0) / dt)), len(self.values) - 1)
        self.outputs["out"] = np.atleast_1d(self.values[k]).copy()


def run_block(block, inputs=None, *, dt=0.1, n=None, t0=0.0, fast=False):
    """Run ``block`` fed by ``inputs`` (port -> array of per-tick values, ``(n,)`` or
    ``(n, m)``) for ``n`` ticks; return ``(logs, sim)``."""
    inputs = inputs or {}
    m = Model("under_test")
    m.add(block)
    for port, values in inputs.items():
        m.add(Feed(f"feed_{port}", values, t0=t0))
        m.connect(f"feed_{port}.out", f"{block.name}.{port}")
        n = len(values) if n is None else n
    cfg = SimulationConfig(dt=dt, t0=t0, t_end=t0 + (n - 1) * dt, fast=fast)
    sim = Simulator(m, cfg)
    return sim.run(), sim


def output(block, inputs=None, port="out", **kw) -> np.ndarray:
    """The logged output ``port`` of ``block`` run by :func:`run_block`."""
    logs, _ = run_block(block, inputs, **kw)
    return logs[f"{block.name}.{port}"]


def bits(a) -> np.ndarray:
    """The IEEE bit patterns of ``a`` (so signed zeros and NaN payloads compare too)."""
    return np.ascontiguousarray(a, dtype=np.float64).view(np.uint64)


def assert_same_bits(a, b, what=""):
    assert np.shape(a) == np.shape(b), what
    assert np.array_equal(bits(a), bits(b)), f"{what}: {a!r} != {b!r}"


def count_calls(block) -> dict[str, int]:
    """Count calls of ``block``'s ``output_update`` / ``state_update`` from now on.

    The generated fast path never calls a block's methods in its step loop, so the counts
    show — through the public block API alone — which path ran the block.
    """
    calls = {"output_update": 0, "state_update": 0}
    for meth in calls:
        orig = getattr(block, meth)

        def wrapper(t, dt, _orig=orig, _meth=meth):
            calls[_meth] += 1
            return _orig(t, dt)

        setattr(block, meth, wrapper)
    return calls
