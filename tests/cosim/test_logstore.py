"""Sample lists and the log store against plain Python lists (the oracle)."""

import numpy as np
import pytest

from cosim.run.logs import SampleList


@pytest.mark.parametrize("seed", range(40))
def test_sample_list_slices_equal_a_plain_list(seed):
    rng = np.random.default_rng(seed)
    samples, ref = SampleList((2,)), []
    for _ in range(rng.integers(0, 15)):
        if rng.random() < 0.5:
            v = rng.random(2)
            samples.append(v)
            ref.append(v)
        else:
            chunk = rng.random((rng.integers(0, 6), 2))
            samples.add_chunk(chunk)
            ref.extend(chunk)
    n = len(ref)
    assert samples.length() == n
    for _ in range(10):
        a = int(rng.integers(0, n + 1))
        b = int(rng.integers(a, n + 1))
        want = np.array(ref[a:b]).reshape(-1, 2)
        got = samples.array(a, b)
        assert got.shape == want.shape and np.array_equal(got, want)
    cut = int(rng.integers(0, n + 1))
    samples.truncate(cut)
    assert np.array_equal(samples.array(), np.array(ref[:cut]).reshape(-1, 2))


def test_flat_rows_flush_to_their_columns():
    """The fast path appends a task's logged values one after the other (a row of one value
    is the value): the store reads them back as rows of the task's width."""
    from blocks import Gain, Sine
    from cosim import Model, SimulationConfig, Simulator

    m = Model("m")
    m.add(Sine("s", frequency=2.0), Gain("g", 3.0))
    m.connect("s.out", "g.in")
    sim = Simulator(m, SimulationConfig(dt=0.01, t_end=0.1, log=("s.out", "g.out")))
    sim.initialize()
    store = sim.store
    (task,) = [n for n, cols in enumerate(store.columns) if cols]
    cols = dict(store.columns[task])
    assert store.width(task) == 2 and sorted(cols.values()) == [0, 1]
    rows = np.arange(14.0).reshape(7, 2) - 3.5
    store.rows[task][:] = rows.reshape(-1).tolist()
    store.task_ticks[task][:] = range(7)
    store.last = 6
    logs = store.logs(0.0, 0.01)
    for key, c in cols.items():
        assert np.array_equal(logs[key], rows[:, c:c + 1])
        assert np.array_equal(logs.time_of(key), np.arange(7) * 0.01)


@pytest.mark.parametrize("fast", [True, False])
def test_signals_of_one_value_are_logged_once_and_owned_apart(fast):
    """An Outport's recorded input is the output driving it: the generated row holds the
    value once (one column for both keys), and each key still owns its array, equal to the
    interpreter's logs (the oracle)."""
    from blocks import Gain, Sine
    from cosim import Inport, Outport, SimulationConfig, Simulator, Subsystem

    def unit():
        s = Subsystem("u", atomic=True)
        s.add(Inport("u"), Sine("w", frequency=3.0), Gain("g", 2.0), Outport("y"))
        s.connect("w.out", "g.in")
        s.connect("g.out", "y.in")
        return s

    cfg = dict(dt=0.01, t_end=0.2, log=("w.out", "g.out", "y.in"))
    sim = Simulator(unit(), SimulationConfig(fast=fast, **cfg))
    logs = sim.run()
    want = Simulator(unit(), SimulationConfig(fast=False, **cfg)).run()
    for key in ("g.out", "y.in", "w.out"):
        assert np.array_equal(logs[key], want[key])
        assert np.array_equal(logs.time_of(key), want.time_of(key))
    if fast:
        columns = {key: c for cols in sim.store.columns for key, c in cols}
        assert columns["g.out"] == columns["y.in"]
    assert not np.shares_memory(logs["g.out"], logs["y.in"])
    logs["g.out"][:] = 0.0
    assert np.array_equal(logs["y.in"], want["y.in"])
