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


@pytest.mark.parametrize("bare", ["none", "all", "mixed"])
def test_rows_of_one_value_flush_as_one_tuples_do(bare):
    """An inlined plan logs a row of one value as the value itself, its own step function
    as a 1-tuple, into the same list: every spelling flushes to the same samples and
    times."""
    from blocks import Gain, Sine
    from cosim import Model, SimulationConfig, Simulator

    m = Model("m")
    m.add(Sine("s", frequency=2.0), Gain("g", 3.0))
    m.connect("s.out", "g.in")
    sim = Simulator(m, SimulationConfig(dt=0.01, t_end=0.1, log=("g.out",)))
    sim.initialize()
    store = sim.store
    (task,) = [n for n, cols in enumerate(store.columns) if cols]
    values = [0.5 * j - 1.0 for j in range(7)]
    spell = {"none": lambda j, v: (v,), "all": lambda j, v: v,
             "mixed": lambda j, v: v if j % 3 else (v,)}[bare]
    store.rows[task][:] = [spell(j, v) for j, v in enumerate(values)]
    store.task_ticks[task][:] = range(7)
    store.last = 6
    logs = store.logs(0.0, 0.01)
    assert np.array_equal(logs["g.out"], np.array(values).reshape(7, 1))
    assert np.array_equal(logs.time_of("g.out"), np.arange(7) * 0.01)
