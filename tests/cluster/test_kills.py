"""A unit's process killed at a random moment of each kind — while the units are
initialized, while they step, while a periodic checkpoint is captured (states, logs), while
the logs are collected at the end — on the zmq backend (its server process) and on Ray (its
actor): every run recovers once and ends bit for bit as the run that was never killed. The
40-kill table of the same: tests/benchmarks/test_bench_kills.py."""

import numpy as np
import pytest

from tests.cluster import kills as K

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


@pytest.mark.parametrize("backend", ["zmq", "ray"])
def test_a_kill_of_every_kind_at_a_random_moment_recovers_bit_identical(backend, request):
    if backend == "ray":
        request.getfixturevalue("ray_session")
    ref, _ = K.timed(backend)
    rng = np.random.default_rng(7)
    done = []
    for kind in K.KINDS:
        for _ in range(4):                  # (a late kill, after the unit's last request,
            kill = K.plan(rng)              # is drawn again)
            kill.kind = kind
            logs, _ = K.timed(backend, kill)
            kill.identical = logs is not None and K.same(logs, ref)
            done.append(kill)
            if not kill.late:
                break
    print("\n" + K.table(backend, done, [_wall(backend)]))
    assert {k.kind for k in done if not k.late} == set(K.KINDS)
    for kill in done:
        assert kill.when is not None and not kill.error, kill
        assert kill.identical and kill.recoveries == (0 if kill.late else 1), kill


def _wall(backend: str) -> float:
    return K.timed(backend)[1]


@pytest.mark.parametrize("unit", ["a", "main"])
def test_a_unit_lost_as_the_run_ends_logs_the_end_point_once(unit):
    """Killed after the last checkpoint (taken at the end point), as the master refreshes
    the outputs there: the unit made again logs that point again, where the lost one had
    replaced a sample the master held. The logs hold it once, as the run never killed."""
    ref, _ = K.timed("local")
    kill = K.Kill("final logs", unit, nth=1)        # (nth 1: as the outputs are refreshed)
    logs, _ = K.timed("zmq", kill)
    assert kill.when == K.T_END and kill.recoveries == 1 and not kill.error
    assert K.same(logs, ref)
