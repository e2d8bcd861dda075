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
