"""A unit's process killed at a random moment of each kind — while the units are
initialized, while they step, while a periodic checkpoint is captured (states, logs), while
the logs are collected at the end — on the zmq backend (its server process) and on Ray (its
actor): every run recovers once and ends bit for bit as the run that was never killed. The
40-kill table of the same: tests/benchmarks/test_bench_kills.py. A checkpoint of the end
point, resumed, ends as the run never interrupted."""

import numpy as np
import pytest

from cosim import CoSimulation
from cosim.errors import TransportError
from tests.cluster import kills as K
from tests.cluster.scenarios import three_units

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


@pytest.mark.parametrize("how", ["saved", "left by a failed run"])
def test_a_checkpoint_taken_at_the_end_time_resumes_to_the_uninterrupted_run(tmp_path, how):
    """A checkpoint of the end point itself (before the outputs there are refreshed and
    logged), saved by the user after the last step or left by a run that lost a unit as it
    refreshed them (no restart allowed), then resumed in a new co-simulation: the resumed
    run logs the end point's refreshed sample, once, as the run never interrupted."""
    from dataclasses import replace
    ref, _ = K.timed("local")
    path = tmp_path / "end"
    cfg = K.config("zmq")
    if how == "saved":
        with CoSimulation(three_units(), cfg) as sim:
            while sim.t < K.T_END - 1e-9:
                sim.step()
            sim.save_checkpoint(path)
    else:
        cfg_fail = replace(cfg, cosim=replace(cfg.cosim, max_restarts=0,
                                              checkpoint_path=str(path)))
        with CoSimulation(three_units(), cfg_fail) as sim:
            K.arm(sim, K.Kill("final logs", "a", nth=1))   # as the outputs are refreshed
            with pytest.raises(TransportError, match=r"checkpoint \(t=1\) was saved"):
                sim.run()
    with CoSimulation(three_units(), cfg) as sim:
        sim.load_checkpoint(path)
        assert sim.t == K.T_END
        logs = sim.run()
    assert K.same(logs, ref)
