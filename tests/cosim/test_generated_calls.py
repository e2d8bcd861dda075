"""The calls of generated code: live inputs read once a call, the warm-up before a long
call, and the code caches' bounds (a run's many small plans stay, a huge one displaces)."""

import re

import numpy as np
import pytest

from blocks import Gain, Integrator, Sum
from cosim import (CoSimulation, CosimConfig, Inport, Outport, SimulationConfig, Simulator,
                   Subsystem)
from cosim.fastpath import cache
from cosim.fastpath.runtime import WARMUP_CALLS, warm
from tests.benchmarks.rings import ring


def unit():
    """A unit whose input drives an RK4 integrator and a feedthrough path: its input
    polynomial is read by every Runge–Kutta stage of every tick."""
    s = Subsystem("u", atomic=True)
    s.add(Inport("u"), Gain("k", 0.7), Integrator("x", 0.2), Sum("y", "++"), Outport("y_"))
    s.connect("u.out", "k.in", "x.in")
    s.connect("k.out", "y.in1")
    s.connect("x.out", "y.in2")
    s.connect("y.out", "y_.in")
    return s


def stepped(fast: bool):
    """The unit stepped 5 ticks a call, its input set anew between calls as a master sets
    it (value, first and second derivative at the call's start)."""
    sim = Simulator(unit(), SimulationConfig(dt=0.01, t_end=1.0, solver="RK4", fast=fast))
    sim.initialize()
    inport = sim.plan.blocks[sim.plan.index["u"]]
    for c in range(8):
        t = sim.t
        inport.set(np.array([np.sin(3.0 * t)]),
                   (np.array([3.0 * np.cos(3.0 * t)]), np.array([-9.0 * np.sin(3.0 * t)])), t)
        sim.advance_to(sim.k + 5, outputs=True)
    sim.state.blocks_current()
    return sim


def test_an_input_read_by_every_stage_is_read_once_a_call_and_matches_the_interpreter():
    fast, ref = stepped(True), stepped(False)
    assert fast.fast_path is not None and ref.fast_path is None
    # The live values are unpacked into locals at the call, read from there by the stages.
    assert re.search(r"\n    (_k\d+)_0, \1_1, \1_2, \1_3, \1_4, = \1\n",
                     fast.fast_path.source.split("while")[0])
    np.testing.assert_array_equal(fast.state.X, ref.state.X)
    logs, want = fast.logs, ref.logs
    assert sorted(logs) == sorted(want)
    for key in want:
        np.testing.assert_array_equal(logs[key], want[key], err_msg=key)
        np.testing.assert_array_equal(logs.time_of(key), want.time_of(key))


def test_warm_calls_a_new_function_until_specialized_once_per_code_object():
    calls = []
    namespace = {"note": calls.append}
    exec(compile("def f(x):\n    note(x)\n", "<test>", "exec"), namespace)
    f = namespace["f"]
    warm(f, 1)
    assert calls == [1] * WARMUP_CALLS
    warm(f, 2)
    # Another function of the same code object is warm already.
    warm(type(f)(f.__code__, namespace), 3)
    assert calls == [1] * WARMUP_CALLS


def test_a_cosimulation_of_many_units_keeps_its_code_for_the_next_run():
    """Twelve units (a plan each, named apart) and the exchange: a second run of the same
    structure takes every code object from the cache."""
    def run():
        cs = CoSimulation(ring(12), SimulationConfig(dt=0.01, t_end=0.2,
                                                     cosim=CosimConfig(H=0.01)))
        try:
            cs.run()
            units = cs.master.compiled.units
            return ([u.sim.fast_path.fn.__code__ for u in units.values()],
                    cs.master.compiled.fn)
        finally:
            cs.close()
    (first, exchange), (second, again) = run(), run()
    assert len(first) == 12 and all(a is b for a, b in zip(first, second))
    assert exchange.__code__ is again.__code__


def test_a_source_over_the_budget_displaces_the_others_but_stays(monkeypatch):
    monkeypatch.setattr(cache, "BUDGET", 2000)
    small = [f"x{i} = {i}\n" for i in range(3)]
    codes = [cache.code_for([piece], "<test small>") for piece in small]
    assert all(cache.code_for([piece], "<test small>") is c for piece, c in zip(small, codes))
    big = "".join(f"y{i} = {i}\n" for i in range(400))
    (code,) = cache.code_for([big], "<test big>")
    assert cache.code_for([big], "<test big>") == (code,)
    assert cache.code_for([small[0]], "<test small>") is not codes[0]


@pytest.mark.parametrize("rows", ["several", "one"])
def test_generated_rows_hold_each_value_once(rows):
    """A row of several values is appended flat, a row of one value as the value: the
    log store reads both back (the interpreter's logs are the oracle)."""
    log = ("k.out", "x.out", "y.out", "y_.in") if rows == "several" else ("x.out",)

    def run(fast):
        sim = Simulator(unit(), SimulationConfig(dt=0.01, t_end=0.3, solver="RK4",
                                                 fast=fast, log=log))
        return sim, sim.run()
    sim, logs = run(True)
    _, want = run(False)
    text = sim.fast_path.source
    assert (".extend((" in text) is (rows == "several")
    for key in log:
        np.testing.assert_array_equal(logs[key], want[key], err_msg=key)
