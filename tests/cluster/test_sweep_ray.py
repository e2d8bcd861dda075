"""Sweeps on Ray pullers: chunks, and workers lost in the middle of a chunk."""

import os
import time

import pytest

from cluster.sweep import final, grid, sweep
from cluster.sweep_design import runs_of
from cluster.sweep_ray import chunks
from cosim.errors import ModelError

from tests.cluster import sweep_faults as sf
from tests.cluster import sweep_models as sm

POINTS = grid({"gain": [0.5, 0.8, 1.1, 1.4, 1.7, 2.0], "tau": [0.1, 0.3]})


def test_chunks_cover_the_runs_in_order_and_shrink_to_one():
    for n, pullers in [(1, 2), (7, 2), (400, 2), (1000, 8), (5, 1)]:
        parts = chunks(list(range(n)), pullers)
        assert [x for c in parts for x in c] == list(range(n))
        sizes = [len(c) for c in parts]
        assert sizes == sorted(sizes, reverse=True) and sizes[-1] == 1 and max(sizes) <= 100


@pytest.fixture(scope="module")
def alone():
    """Each point's final plant output, the runs done serially in this process."""
    rows = sweep(sm.lag, sm.CONFIG, POINTS, {"y": final("plant.out")}, backend="serial")
    return [r["y"] for r in rows]


@pytest.mark.cluster
def test_a_worker_lost_once_has_its_chunk_run_again(ray_session, alone, tmp_path):
    marker = tmp_path / "died"
    rows = sweep(sm.lag, sm.CONFIG, POINTS, {"y": sf.DiesOnce(str(marker), os.getpid())},
                 backend="ray", retries=1, out_dir=tmp_path / "out")
    assert marker.exists()                                   # a worker did die
    assert [r["status"] for r in rows] == ["ok"] * len(POINTS)
    assert [r["y"] for r in rows] == alone                   # bit for bit, through the CSV


@pytest.mark.cluster
def test_a_chunk_lost_more_than_retries_times_is_failed_rows(ray_session, alone, tmp_path):
    limit = sorted(alone)[-2]                  # the largest output's run kills its worker
    killer = alone.index(max(alone))
    # The runs that share the killer's chunk are lost with it (as with a task per chunk).
    lost = next({r.index for r in c} for c in chunks(runs_of(POINTS), 2)
                if killer in {r.index for r in c})
    rows = sweep(sm.lag, sm.CONFIG, POINTS, {"y": sf.DiesAbove(limit, os.getpid())},
                 backend="ray", retries=1, max_in_flight=2, out_dir=tmp_path)
    for r, y in zip(rows, alone):
        if r["index"] in lost:
            assert r["status"] == "failed"
            assert "worker lost after 1 retries" in r["error"], r["error"]
        else:
            assert r["status"] == "ok" and r["y"] == y


def cpus_free_within(ray, seconds: float) -> bool:
    """Every CPU of the cluster is free again within ``seconds`` (no puller left running)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if ray.available_resources().get("CPU", 0) == ray.cluster_resources()["CPU"]:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.cluster
def test_pullers_started_before_the_checks_stop_when_a_check_fails(ray_session, alone):
    with pytest.raises(ModelError, match="gian"):
        sweep(sm.lag, sm.CONFIG, [{"gian": 1.0}], {"y": final("plant.out")}, backend="ray")
    assert cpus_free_within(ray_session, 5.0)
    rows = sweep(sm.lag, sm.CONFIG, POINTS, {"y": final("plant.out")}, backend="ray")
    assert [r["y"] for r in rows] == alone


@pytest.mark.cluster
def test_a_finished_study_run_again_starts_no_run_and_leaves_no_puller(ray_session, alone,
                                                                         tmp_path):
    reducers = {"y": final("plant.out")}
    first = sweep(sm.lag, sm.CONFIG, POINTS, reducers, backend="ray", out_dir=tmp_path)
    again = sweep(sm.lag, sm.CONFIG, POINTS, reducers, backend="ray", out_dir=tmp_path)
    assert again == first                           # every row read back, none run again
    assert [r["y"] for r in again] == alone
    assert cpus_free_within(ray_session, 5.0)
