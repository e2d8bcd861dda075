"""One ``cosim serve`` and many clients at once: a request queued behind a long step is
answered (it used to end the server), one master drives a unit at a time (the others are
told who, and their read-only requests are answered), a silent master's unit is taken over
after the lease, and a multi-client fuzz — 2 to 50 clients reading, intruding, leaving in
the middle of steps, flooding and sending garbage — leaves the server alive and a
legitimate master's results bit for bit those of a run alone."""

import json
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from cluster.codec import decode_batch, encode_batch
from cluster.server import UnitServer
from cosim.master import protocol as P
from tests.cluster.served import ROOT, ask, client, run, serve, start, stop, unit_file

pytestmark = pytest.mark.cluster


def test_a_second_clients_request_queued_behind_a_long_step_is_answered(tmp_path):
    """The request that used to end the server (TypeError taking it off the queue)."""
    proc, address = serve(unit_file(tmp_path))
    try:
        a, other = client(address), client(address)
        start(a, "a", "m1")
        a.send_multipart([b"a", encode_batch([P.DoStep(0.0, 200.0)])])   # offloaded
        time.sleep(0.2)
        (desc,) = ask(other, "a", [P.GetState()])     # queued behind the step, then served
        assert isinstance(desc, P.UnitState)
        (done,) = decode_batch(a.recv_multipart()[0])
        assert isinstance(done, P.StepDone) and done.t_reached == pytest.approx(200.0)
        assert desc.t == pytest.approx(200.0)         # (answered after the step)
        assert proc.poll() is None
        (alive,) = ask(other, "a", [P.Heartbeat()])
        assert isinstance(alive, P.Alive) and not alive.stepping
        assert alive.t == pytest.approx(200.0)
    finally:
        stop(proc)


def test_one_master_drives_a_unit_the_others_are_told_who_and_may_read(tmp_path):
    proc, address = serve(unit_file(tmp_path))
    try:
        first, second = client(address), client(address)
        start(first, "a", "first-master")
        (done,) = ask(first, "a", [P.DoStep(0.0, 0.02)])
        assert isinstance(done, P.StepDone)
        for requests in ([P.Hello(P.PROTOCOL_VERSION, "second")], [P.Initialize(0.0)],
                         [P.DoStep(0.02, 0.02)], [P.Terminate()],
                         [P.Describe(), P.SetInputs({"u": np.zeros(1)})]):
            replies = ask(second, "a", requests)
            assert len(replies) == 1 and isinstance(replies[0], P.ErrorReply), replies
            assert "unit 'a' is busy" in replies[0].message
            assert "session 'first-master'" in replies[0].message
        # Read-only requests are answered; the unit is where its master left it.
        desc, state, outs, beat = ask(second, "a", [P.Describe(), P.GetState(),
                                                    P.GetOutputs(), P.Heartbeat()])
        assert isinstance(desc, P.UnitDescription) and isinstance(beat, P.Alive)
        assert state.t == pytest.approx(0.02) and isinstance(outs, P.Outputs)
        # A message naming a free unit and a driven one is refused whole: b stays free.
        second.send_multipart([b"b", encode_batch([P.Initialize(0.0)]),
                               b"a", encode_batch([P.Initialize(0.0)])])
        replies = [decode_batch(f) for f in second.recv_multipart()]
        assert len(replies) == 2 and all(isinstance(r, P.ErrorReply) for (r,) in replies)
        start(second, "b", "second")                  # another unit: free
        # The first master's run goes on undisturbed, and ends: then a is free.
        (done,) = ask(first, "a", [P.DoStep(0.02, 0.02)])
        assert isinstance(done, P.StepDone) and done.t_reached == pytest.approx(0.04)
        (ok,) = ask(first, "a", [P.Terminate()])
        assert isinstance(ok, P.Ok)
        start(second, "a", "second")
    finally:
        stop(proc)


def test_readers_of_a_driven_unit_are_answered_at_their_pace_the_master_at_once(tmp_path):
    proc, address = serve(unit_file(tmp_path))
    try:
        master, reader = client(address), client(address)
        start(master, "a", "master")
        interval = UnitServer.read_interval
        n = 12
        t0 = time.monotonic()
        for _ in range(n):                  # a reader in a closed loop
            (desc,) = ask(reader, "a", [P.Describe()])
            assert isinstance(desc, P.UnitDescription) and desc.name == "a"
        # Its replies at most one per interval (a slow machine makes them only later).
        assert time.monotonic() - t0 >= (n - 1) * interval * 0.9
        # A message that reads a driven unit and a free one is answered (at the reader's
        # pace); the master is answered as ever.
        desc_a, desc_b = (decode_batch(f) for f in _both(reader))
        assert isinstance(desc_a[0], P.UnitDescription) and isinstance(desc_b[0],
                                                                        P.UnitDescription)
        (state,) = ask(master, "a", [P.GetState()])
        assert isinstance(state, P.UnitState)
        (done,) = ask(master, "a", [P.DoStep(0.0, 0.02)])
        assert isinstance(done, P.StepDone)
    finally:
        stop(proc)


@pytest.mark.slow
def test_ten_readers_in_a_closed_loop_leave_a_masters_run_bit_identical(tmp_path):
    proc, address = serve(unit_file(tmp_path))
    try:
        alone = run(address)
        done = threading.Event()
        answered = [0] * 10

        def read(i):
            sock = client(address)
            while not done.is_set():
                (desc,) = ask(sock, "a", [P.Describe()])
                assert isinstance(desc, P.UnitDescription)
                answered[i] += 1
            sock.close()
        readers = [threading.Thread(target=read, args=(i,)) for i in range(10)]
        for r in readers:
            r.start()
        try:
            crowded = run(address)
        finally:
            done.set()
            for r in readers:
                r.join(timeout=60)
        assert all(answered), answered
        assert sorted(alone) == sorted(crowded)
        for key in alone:
            np.testing.assert_array_equal(alone[key], crowded[key], err_msg=key)
            np.testing.assert_array_equal(alone.time_of(key), crowded.time_of(key))
    finally:
        stop(proc)


def _both(sock) -> list[bytes]:
    sock.send_multipart([b"a", encode_batch([P.Describe()]), b"b", encode_batch([P.Describe()])])
    return sock.recv_multipart()


def test_a_master_that_leaves_frees_its_units_at_once(tmp_path):
    proc, address = serve(unit_file(tmp_path))          # (a lease of 60 s)
    try:
        for i in range(3):
            leaving = client(address)
            start(leaving, "a", f"leaving-{i}")
            (done,) = ask(leaving, "a", [P.DoStep(0.0, 0.02)])
            assert isinstance(done, P.StepDone)
            leaving.close(linger=0)                     # crashed, or left without Terminate
        start(client(address), "a", "next")             # at once
    finally:
        stop(proc)


def test_a_silent_masters_unit_is_taken_over_after_the_lease(tmp_path):
    proc, address = serve(unit_file(tmp_path), "--owner-lease", "1")
    try:
        gone, other = client(address), client(address)
        start(gone, "a", "crashed")
        (refused,) = ask(other, "a", [P.Initialize(0.0)])
        assert isinstance(refused, P.ErrorReply) and "busy" in refused.message
        time.sleep(1.5)
        start(other, "a", "next")                      # the lease has passed
        (refused,) = ask(gone, "a", [P.DoStep(0.0, 0.02)])
        assert isinstance(refused, P.ErrorReply) and "taken over" in refused.message
        (done,) = ask(other, "a", [P.DoStep(0.0, 0.02)])
        assert isinstance(done, P.StepDone)
    finally:
        stop(proc)


@pytest.mark.slow
@pytest.mark.parametrize("clients", [2, 10, 50])
def test_many_clients_leave_a_legitimate_master_bit_identical(tmp_path, clients):
    # A lease long beside a loaded machine's stalls: with 0.5 s, a master whose steps were
    # held up that long (50 clients, load 10-18) had its units taken over, as the lease
    # says; a client that leaves frees its units at once anyway.
    proc, address = serve(unit_file(tmp_path), "--owner-lease", "5")
    try:
        # (a run of seconds: an intruder's Hello is refused only after a quarter second)
        alone = run(address, t_end=10.0)
        done = tmp_path / "done"
        rogues = subprocess.Popen([sys.executable, "-m", "tests.cluster.rogues", address,
                                   str(clients), str(clients), str(done)],
                                  stdout=subprocess.PIPE, text=True, cwd=ROOT)
        assert rogues.stdout.readline().strip() == "ready"     # the clients at work first
        try:
            crowded = run(address, t_end=10.0, done=done)
        finally:
            done.touch()
            out, _ = rogues.communicate(timeout=300)
        counts = json.loads(out.strip().splitlines()[-1])
        print(f"{clients} clients: {counts}")
        assert proc.poll() is None, "the server exited"
        bad = {k: v for k, v in counts.items()
               if k.startswith(("hang", "client", "change ACCEPTED", "read refused",
                                "leaver error"))}
        assert not bad, bad
        assert counts.get("read answered", 0) > 0 and counts.get("change refused", 0) > 0
        assert sorted(alone) == sorted(crowded)
        for key in alone:
            np.testing.assert_array_equal(alone[key], crowded[key], err_msg=key)
            np.testing.assert_array_equal(alone.time_of(key), crowded.time_of(key))
        # The server still serves a master alone, the same way (the clients' last claims,
        # made as the run ended, freed as they left).
        again = run(address, t_end=0.4)
        for key in again:
            np.testing.assert_array_equal(again[key], alone[key][:len(again[key])])
    finally:
        stop(proc)


def test_only_the_master_that_drove_the_units_reloads_them(tmp_path):
    path = unit_file(tmp_path)
    proc, address = serve(path, "--reloadable")
    try:
        master, other = client(address), client(address)
        start(master, "a", "the-run")
        (refused,) = ask(other, "a", [P.Reload(path.read_text())])
        assert isinstance(refused, P.ErrorReply) and "only its master may reload" in \
            refused.message
        (ok,) = ask(master, "a", [P.Terminate()])          # the run ends: a is free
        assert isinstance(ok, P.Ok)
        (refused,) = ask(other, "a", [P.SetParameters({})])
        assert isinstance(refused, P.ErrorReply) and "only that master may reload" in \
            refused.message
        (ok,) = ask(master, "a", [P.Reload(path.read_text())])
        assert isinstance(ok, P.Ok), ok
    finally:
        stop(proc)
