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


class _Socket:
    """The driver's ROUTER socket, replaced: hands over ``frames`` once, keeps what is sent."""

    def __init__(self, frames):
        self.frames, self.sent = frames, []

    def recv_multipart(self):
        return self.frames

    def send_multipart(self, frames):
        self.sent.append(frames)


class _Evil:
    """Unpickling it would write a file: the driver must never unpickle what it receives."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_the_driver_drops_stray_and_malformed_messages_and_never_unpickles(tmp_path):
    import pickle

    from cluster.codec import decode_data, encode_data
    from cluster.sweep_ray import CHUNK, DONE, READY, Pullers
    runs = runs_of(POINTS)
    lost, done = [], []

    def driver():
        p = Pullers(sm.lag, sm.CONFIG, {}, None, True, 1, 1, None, runs)
        p.runs = {0: runs[:2], 1: runs[2:3]}
        p.tasks, p.holding = {"task": b"p0"}, {b"p0": (0, 0)}
        p.finished, p.lost = done.append, lambda chunk, err: lost.append(chunk) or []
        return p

    good = [[{"run_id": r.run_id, "index": r.index, **dict.fromkeys(r.params),
              "status": "ok", "y": 1.5}, "abc"] for r in runs[:2]]
    evil = tmp_path / "unpickled"
    none = encode_data([])              # the chunk's logs: none kept
    stray = [[b"p0"], [b"zz", READY], [b"p0", READY],
             [b"p0", DONE, b"1", encode_data(good), none], [b"p0", DONE, b"0"],
             [b"p0", DONE, b"0", encode_data(good)],
             [b"p0", b"what", b"0", encode_data(good), none]]
    for frames in stray:
        p = driver()
        p.sock = _Socket(frames)
        p.answer()
        assert p.sock.sent == [] and p.holding == {b"p0": (0, 0)} and not done, frames
    for payload, logs in ((b"\xc1", none), (pickle.dumps(_Evil(str(evil))), none),
                          (encode_data([good[0]]), none),
                          (encode_data([good[1], good[0]]), none),
                          (encode_data(good), pickle.dumps(_Evil(str(evil)))),
                          (encode_data(good), encode_data({"not": "a list"}))):
        p = driver()
        p.waiting.append((1, 0))
        p.sock = _Socket([b"p0", DONE, b"0", payload, logs])
        p.answer()                  # rows that do not decode: the chunk is lost once
        assert not evil.exists() and not done
        (name, kind, data), = p.sock.sent
        assert (name, kind) == (b"p0", CHUNK) and decode_data(data)[:2] == [0, [0, 1]]
        assert list(p.waiting) == [(1, 0)]
    p = driver()
    p.sock = _Socket([b"p0", DONE, b"0", encode_data(good), none])
    p.answer()
    (rows,) = done
    assert [row for row, _ in rows] == [{"run_id": r.run_id, "index": r.index, **r.params,
                                         "status": "ok", "y": 1.5} for r in runs[:2]]
    assert [list(row) for row, _ in rows][0][:4] == ["run_id", "index", "gain", "tau"]
    assert p.sock.sent == [[b"p0", b"stop"]] and 0 not in p.runs


@pytest.mark.cluster
def test_pullers_that_fail_as_they_start_end_the_sweep_with_their_error(ray_session,
                                                                         tmp_path):
    # Before pullers, a task per chunk failed its runs; a puller that cannot start must not
    # be started again forever.
    with pytest.raises(ConnectionError, match=r"(?s)pullers in a row ended before they asked the "
                                              r"driver for a chunk; the last failed: .*"
                                              r"cannot be loaded outside the driver"):
        sweep(sm.lag, sm.CONFIG, POINTS, {"y": sf.LoadsInTheDriverOnly(os.getpid())},
              backend="ray", retries=1, max_in_flight=2, out_dir=tmp_path)


@pytest.mark.cluster
def test_a_chunk_held_on_a_node_that_no_longer_answers_runs_again(ray_session):
    # cosim's own check of a puller's node (its raylet), seconds before Ray's verdict.
    from cluster.sweep_ray import Pullers
    runs = runs_of(POINTS)
    p = Pullers(sm.lag, sm.CONFIG, {}, None, True, 1, 2, None, runs)
    p.runs = {0: runs[:2], 1: runs[2:3]}
    live = ray_session.get_runtime_context().get_node_id()
    p.tasks = {"t0": b"p0", "t1": b"p1"}
    p.holding = {b"p0": (0, 0), b"p1": (1, 0)}
    p.node_of = {b"p0": "ff" * 28, b"p1": live}     # p0's node is not (any more) alive
    p.lost_nodes()
    assert p.holding == {b"p1": (1, 0)} and list(p.waiting) == [(0, 1)]
    assert b"p0" in p.stopped                       # a late message from it is dropped
