"""The dashboard without a browser: the observer changes no result, the server guards its
token and refuses bad input without harm, the state it serves says what the run did, the
static pages carry their state, and the sweep board counts what the sweep returned."""

from __future__ import annotations

import http.client
import json
import threading
import urllib.error
import urllib.request
from dataclasses import replace
from urllib.parse import urlsplit

import numpy as np
import pytest

from cosim import CosimConfig, SimulationConfig
from cosim.dashboard import Dashboard
from cosim.dashboard.board import Board
from cosim.dashboard.server import parse_address
from cosim.errors import ModelError
from cosim.master.cosimulation import CoSimulation
from cosim.master.observer import Observer
from tests.cluster.scenarios import three_units


def _config(**cosim) -> SimulationConfig:
    return SimulationConfig(dt=0.002, t_end=0.6, cosim=CosimConfig(
        H=0.02, **{"scheme": "gauss-seidel", "extrapolation": 1, **cosim}))


def _state(board: Dashboard) -> dict:
    url = board.url.replace("/?", "/state.json?")
    return json.loads(urllib.request.urlopen(url, timeout=10).read())


class Counting(Observer):
    """Records every call: (T, n) and the master's port values then."""

    stride = 3

    def __init__(self):
        self.calls = []

    def observe(self, master):
        self.calls.append((master.T, master.n, dict(master.values)))


@pytest.mark.parametrize("cfg", [dict(), dict(scheme="jacobi"),
                                 dict(checkpoint_every=4)], ids=["gs", "jacobi", "checkpoints"])
def test_an_observer_changes_no_result_and_sees_every_step(cfg):
    """Bit for bit the run without it; called at least every ``stride`` steps (chunks of the
    compiled exchange are cut to it), with T and n moving forward together."""
    ref_sim = CoSimulation(three_units(), _config(**cfg))
    ref = ref_sim.run()
    sim = CoSimulation(three_units(), _config(**cfg))
    seen = Counting()
    sim.master.observer = seen
    logs = sim.run()
    for key in ref:
        np.testing.assert_array_equal(logs[key], ref[key], err_msg=key)
    ns = [n for _, n, _ in seen.calls]
    assert ns[-1] == sim.master.n == 30
    assert all(0 < b - a <= seen.stride for a, b in zip([0] + ns, ns))
    for T, n, _ in seen.calls:
        assert T == pytest.approx(0.02 * n, abs=1e-12)
    # The values it saw are the logged outputs at those times.
    t_b = logs.time_of("b.y")
    for T, _, values in seen.calls:
        i = int(np.argmin(np.abs(t_b - T)))
        assert t_b[i] == pytest.approx(T, abs=1e-12)
        np.testing.assert_array_equal(values[("b", "y")].ravel(), np.ravel(logs["b.y"][i]))


def test_the_state_a_dashboard_serves_says_what_the_run_did():
    with Dashboard(signals=["a.y", "b.y"]) as board:
        sim = CoSimulation(three_units(), _config(checkpoint_every=5), dashboard=board)
        logs = sim.run()
        state = _state(board)
        s = state["set"]
        assert s["title"] == "three" and s["progress"]["status"] == "done"
        assert s["progress"]["t"] == pytest.approx(0.6)
        assert s["progress"]["stats"] == sim.stats
        assert set(s["units"]) == {"a", "b", "main"}
        assert all(u["kind"] == "in process" for u in s["units"].values())
        assert s["units"]["main"]["feedthrough"] == {"e__out": ["b__y"]}
        assert s["selected"] == ["a.y", "b.y"] and "e.out" in s["signal_keys"]
        # The recorded samples are the logged ones at the macro points.
        t, v = state["signals"]["b.y"]
        assert t[-1] == pytest.approx(0.6)
        ref_t = logs.time_of("b.y")
        for ti, vi in zip(t, v):
            i = int(np.argmin(np.abs(ref_t - ti)))
            assert vi == float(np.ravel(logs["b.y"][i])[0])
        # The link values are the master's.
        assert s["links"]["b.y"] == [float(sim.master.values[("b", "y")].ravel()[0])]
        ids = {n["id"] for n in s["diagram"]["nodes"]}
        assert {"a", "b", "a/x", "b/x", "src", "e"} <= ids
        assert {"src": "a", "sport": "y", "dst": "b", "dport": "u", "parent": None} \
            in s["diagram"]["edges"]
        assert {"src": "a/x", "sport": "out", "dst": "a/k", "dport": "in", "parent": "a"} \
            in s["diagram"]["edges"]
        sim.close()


def test_a_failed_run_shows_failed_with_its_error():
    from cosim.errors import SimulationError
    from tests.cluster.scenarios import failing
    with Dashboard() as board:
        sim = CoSimulation(failing(0.3), _config(), dashboard=board)
        with pytest.raises(SimulationError, match="gave up"):
            sim.run()
        state = _state(board)
        assert state["set"]["progress"]["status"] == "failed"
        assert any(m["kind"] == "error" and "gave up" in m["text"] for m in state["marks"])
        sim.close()
        assert _state(board)["set"]["progress"]["status"] == "failed"   # still, after close


def _request(url: str, method: str = "GET", body: bytes | None = None,
             headers: dict | None = None) -> tuple[int, bytes]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        conn.request(method, parts.path + ("?" + parts.query if parts.query else ""),
                     body=body, headers=headers or {})
        rep = conn.getresponse()
        return rep.status, rep.read()
    finally:
        conn.close()


def test_the_server_wants_its_token_and_survives_bad_requests():
    with Dashboard() as board:
        base = board.url.split("/?")[0]
        token = board.url.split("token=")[1]
        assert base.startswith("http://127.0.0.1:")
        assert len(token) >= 20
        assert _request(f"{base}/")[0] == 403
        assert _request(f"{base}/?token=wrong")[0] == 403
        assert _request(f"{base}/events?token={token[:-1]}")[0] == 403
        assert _request(f"{base}/state.json")[0] == 403
        status, page = _request(board.url)
        assert status == 200 and b'id="cosim-dashboard"' in page
        assert b"http" + b"s://" not in page          # nothing from a CDN
        assert _request(f"{base}/static/uPlot.iife.min.js")[0] == 200
        for bad in ("../server.py", "..%2Fserver.py", ".hidden", "nope.js", "dashboard.py"):
            assert _request(f"{base}/static/{bad}")[0] == 404, bad
        sel = f"{base}/select?token={token}"
        assert _request(f"{base}/select", "POST", b"{}")[0] == 403
        assert _request(sel, "POST", b"not json",
                        {"Content-Length": "8"})[0] == 400
        assert _request(sel, "POST", b'{"signals": [1, 2]}')[0] == 400
        assert _request(sel, "POST", b'{"signals": "a.y"}')[0] == 400
        assert _request(sel, "POST", b"x" * 70_000)[0] == 413
        assert _request(sel, "POST", b'{"signals": ["a.y"]}')[0] == 200   # nothing to watch
        assert _request(f"{base}/nowhere?token={token}")[0] == 404
        # ... and still serves.
        assert _request(board.url)[0] == 200


def test_the_page_can_choose_the_signals_a_running_dashboard_records():
    with Dashboard(signals=["a.y"]) as board:
        sim = CoSimulation(three_units(), _config(), dashboard=board)
        sim.run(t_end=0.2)
        base, token = board.url.split("/?")[0], board.url.split("token=")[1]
        status, body = _request(f"{base}/select?token={token}", "POST",
                                json.dumps({"signals": ["e.out", "nope.x"]}).encode())
        assert status == 200 and json.loads(body) == {"unknown": ["nope.x"]}
        sim.run()
        state = _state(board)
        assert state["set"]["selected"] == ["e.out"]
        t_a, _ = state["signals"]["a.y"]          # recorded until the page chose others
        t_e, _ = state["signals"]["e.out"]        # recorded from then on
        assert t_a[-1] == pytest.approx(0.2)
        assert t_e[0] == pytest.approx(0.22) and t_e[-1] == pytest.approx(0.6)
        sim.close()


def test_an_event_stream_starts_with_the_state_then_brings_every_delta():
    board = Board("t")
    board.publish({"set": {"title": "x"}, "marks": [{"t": 0.0, "kind": "stop", "text": "s"}]})
    first, q = board.subscribe()
    board.publish({"steps": {"t": [1.0], "iterations": [3], "rejected": [0]}})
    assert json.loads(first)["marks"][0]["kind"] == "stop"
    assert json.loads(q.get_nowait())["steps"]["iterations"] == [3]
    assert board.state["steps"]["iterations"] == [3]
    with pytest.raises(ValueError):        # NaN is not JSON a page can read: refused
        board.publish({"set": {"progress": {"t": float("nan")}}})


def test_a_served_stream_sends_the_state_first():
    with Dashboard() as board:
        board.board.publish({"set": {"title": "streamed"}})
        base, token = board.url.split("/?")[0], board.url.split("token=")[1]
        parts = urlsplit(base)
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
        conn.request("GET", f"/events?token={token}")
        rep = conn.getresponse()
        assert rep.status == 200 and rep.getheader("Content-Type") == "text/event-stream"
        assert rep.fp.readline() == b"event: state\n"
        data = rep.fp.readline()
        assert json.loads(data[len(b"data: "):])["set"]["title"] == "streamed"
        threading.Thread(target=board.board.publish,
                         args=({"set": {"title": "later"}},)).start()
        rep.fp.readline()
        assert rep.fp.readline() == b"event: delta\n"
        conn.close()


@pytest.mark.parametrize("text,expected", [(None, ("127.0.0.1", 0)), ("8050", ("127.0.0.1", 8050)),
                                           (":0", ("127.0.0.1", 0)),
                                           ("0.0.0.0:9000", ("0.0.0.0", 9000)),
                                           ("[::1]:80", ("::1", 80))])
def test_addresses(text, expected):
    assert parse_address(text) == expected


@pytest.mark.parametrize("text", ["host:port", "1:99999", "x:-1"])
def test_bad_addresses_say_how_to_write_one(text):
    with pytest.raises(ModelError, match="HOST:PORT"):
        parse_address(text)


@pytest.mark.parametrize("garbage", [b"\x00\xff" * 600 + b"\r\n\r\n", b"GET\r\n\r\n",
                                     b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n",
                                     b"POST /select HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
                                     b"GET /events?token=x HTTP/1.1\r\nHost: y\r\n\r\n"])
def test_garbage_from_the_network_does_not_hurt_the_server(garbage):
    import socket
    with Dashboard() as board:
        parts = urlsplit(board.url)
        with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
            sock.sendall(garbage)
            sock.shutdown(socket.SHUT_WR)
            while sock.recv(4096):
                pass
        assert _request(board.url)[0] == 200


@pytest.mark.cluster
def test_units_on_ray_show_their_node(ray_session):
    """Placement comes from the units' proxies: a Ray actor's node and process (the
    top-level blocks' unit placed in an actor too: by default it runs beside the master)."""
    sim = CoSimulation(three_units(), _config(backend="ray",
                                              units={"main": {"process": "glue"}}),
                       dashboard=True)
    try:
        sim.run()
        state = _state(sim.dashboard)
        units = state["set"]["units"]
        node = ray_session.get_runtime_context().get_node_id()
        for name in ("a", "b", "main"):
            assert units[name]["kind"] == "ray"
            assert units[name]["where"]["node"] == node
            assert f"node {node[:8]}" in units[name]["label"]
            assert units[name]["where"]["pid"] != __import__("os").getpid()
    finally:
        sim.close()


def _children() -> set[int]:
    """This process's live (not zombie) children (Linux /proc)."""
    from pathlib import Path
    pids = set()
    for f in Path("/proc/self/task").glob("*/children"):
        pids.update(int(p) for p in f.read_text().split())
    live = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            continue
        if state != "Z":
            live.add(pid)
    return live


def test_an_address_in_use_is_refused_naming_it_and_starts_nothing():
    with Dashboard() as first:
        port = urlsplit(first.url).port
        with pytest.raises(ModelError, match=f"cannot serve on 127.0.0.1:{port}.*port 0"):
            Dashboard(f"127.0.0.1:{port}")
        before = _children()
        with pytest.raises(ModelError, match="cannot serve"):
            CoSimulation(three_units(), _config(backend="zmq"),
                         dashboard=f"127.0.0.1:{port}")
        assert not _children() - before, "the zmq servers outlived the refused run"
    with pytest.raises(ModelError, match="HOST:PORT"):
        CoSimulation(three_units(), _config(backend="zmq"), dashboard="127.0.0.1:http")


@pytest.mark.parametrize("adaptive", [False, True])
def test_a_stop_event_and_rejected_steps_are_marks_at_their_times(adaptive):
    """Marks say what the master's step log says: the stop at its time (naming the unit),
    each rejected macro step at its start, the iterations per update."""
    from cosim.master.records import StepStatus
    from cosim.model.events import Scheduled
    m = three_units()
    m.add_event(Scheduled("halt", times=[0.374], stop=True))
    with Dashboard() as board:
        sim = CoSimulation(m, _config(adaptive=adaptive, tolerance=1e-7), dashboard=board)
        sim.run()
        state = _state(board)
        log = sim.step_log
        stops = [mk for mk in state["marks"] if mk["kind"] == "stop"]
        assert [(mk["t"], "main" in mk["text"]) for mk in stops] == [(0.374, True)]
        rejected = [r.t for r in log if r.status is StepStatus.REJECTED]
        assert [mk["t"] for mk in state["marks"] if mk["kind"] == "rejected"] == rejected
        assert sum(state["steps"]["rejected"]) == len(rejected) == sim.stats["rejected"]
        assert (len(rejected) > 0) == adaptive
        assert state["set"]["progress"]["t"] == pytest.approx(0.374)
        assert state["set"]["progress"]["status"] == "stopped"
        sim.close()


def test_signals_logged_inside_units_and_at_the_top_level_are_selectable():
    """Every signal of the central logs can be shown, named as the logs name it: a block
    inside unit a (``a/x.out``, chosen before it was ever logged) and a top-level block
    (``src.out``); the page gets real samples of each (the logs' own, to the bit), the
    first and the last, and where there are more than an update carries, the extremes."""
    from cosim.dashboard import monitor
    with Dashboard(signals=["a/x.out", "src.out", "a.y"]) as board:
        sim = CoSimulation(three_units(), _config(log_every=5), dashboard=board)
        logs = sim.run()
        state = _state(board)
        keys = state["set"]["signal_keys"]
        assert {"a/x.out", "a/k.out", "b/x.out", "src.out", "a.y", "e.out"} <= set(keys)
        assert len(keys) == len(set(keys))         # a unit output the top level logs: once
        assert state["set"]["selected"] == ["a/x.out", "src.out", "a.y"]
        for key in ("a/x.out", "src.out"):
            t, v = (np.array(x, dtype=float) for x in state["signals"][key])
            ref_t, ref_v = logs.time_of(key), np.ravel(logs[key])
            assert len(ref_t) > monitor.POINTS      # decimated: more than one update carries
            assert t[0] == ref_t[0] and t[-1] == ref_t[-1]
            assert np.all(np.diff(t) >= 0)
            where = np.searchsorted(ref_t, t)
            np.testing.assert_array_equal(ref_t[where], t)
            np.testing.assert_array_equal(ref_v[where], v)
            # The logs' extremes are shown (a min/max cut draws the same line).
            assert ref_v.max() in v and ref_v.min() in v
        sim.close()


def test_a_vector_signal_logged_in_a_unit_is_offered_element_by_element():
    """A logged vector is offered as ``key[i]``; the element chosen is that element, at
    every logged time."""
    from blocks import Constant, Gain
    from cosim import Model, Outport, Subsystem
    m = Model("vec")
    s = Subsystem("u1", atomic=True, dt=0.01)
    s.add(Constant("c", [1.0, 2.0, 3.0]), Outport("y"))
    s.connect("c.out", "y.in")
    m.add(s, Gain("g", 2.0))
    m.connect("u1.y", "g.in")
    with Dashboard(signals=["u1/c.out[2]"]) as board:
        sim = CoSimulation(m, SimulationConfig(dt=0.01, t_end=0.2, cosim=CosimConfig(H=0.02)),
                           dashboard=board)
        sim.run()
        state = _state(board)
        assert {"u1/c.out[0]", "u1/c.out[1]", "u1/c.out[2]"} <= set(state["set"]["signal_keys"])
        t, v = state["signals"]["u1/c.out[2]"]
        assert len(t) == len(sim.logs.time_of("u1/c.out")) and set(v) == {3.0}
        sim.close()


@pytest.mark.parametrize("compiled", [False, True])
def test_per_unit_step_times_of_an_iterated_coupling_in_process_are_shown(compiled):
    """An iterated coupling in process, through the engine or the compiled exchange (which
    times its units when observed): each unit's wall time per macro step, from the
    master's calls.step_times, one point per update; the run's mean per unit lies within
    the points shown."""
    from tests.cluster.scenarios import algebraic
    config = SimulationConfig(dt=0.01, t_end=3.0, cosim=CosimConfig(
        H=0.01, scheme="gauss-seidel", iterate=True, tolerance=1e-10, compiled=compiled))
    with Dashboard(period=0.01) as board:
        sim = CoSimulation(algebraic(), config, dashboard=board)
        sim.run()
        assert (sim.master.compiled is not None) == compiled
        assert sim.stats["iterations"] > sim.stats["macro_steps"]
        state = _state(board)
        timing = state["timing"]
        assert set(timing["units"]) == set(sim.master.calls.step_times) == {"a", "b"}
        assert timing["t"] == sorted(timing["t"]) and len(timing["t"]) >= 2
        for u, (ts, secs) in sim.master.calls.step_times.items():
            shown = [x for x in timing["units"][u] if x is not None]
            assert shown and all(x > 0 for x in shown)
            mean = 1e3 * sum(secs) / len(set(ts))           # ms per macro step, whole run
            assert min(shown) <= mean * (1 + 1e-9) and mean <= max(shown) * (1 + 1e-9)
        sim.close()


def test_samples_that_go_back_in_time_replace_what_the_board_held_from_then():
    """A recovery replays the steps after its checkpoint: the replayed samples take the
    place of those the board held from their first time on (a late page sees one line)."""
    board = Board("t")
    board.publish({"signals": {"x": [[0.0, 0.1, 0.2, 0.3, 0.4], [0, 1, 2, 3, 4]]}})
    board.publish({"signals": {"x": [[0.2, 0.3], [20, 30]]}})
    board.publish({"signals": {"x": [[0.4, 0.4], [40, 41]]}})     # same time: kept (events)
    assert board.state["signals"]["x"] == [[0.0, 0.1, 0.2, 0.3, 0.4, 0.4], [0, 1, 20, 30, 40, 41]]


def test_an_automatic_splits_logged_signals_keep_the_models_own_names():
    """Units cut by ``partition=k`` log under the model's own keys, and the page offers and
    plots them by those names (the logs' key mapping, not the units' internal names)."""
    from tests.dashboard.models import chain
    model, config = chain(12)
    config = replace(config, t_end=0.3, cosim=CosimConfig(H=0.01, partition=2))
    with Dashboard(signals=["g7.out"]) as board:
        sim = CoSimulation(model, config, dashboard=board)
        logs = sim.run()
        state = _state(board)
        assert "g7.out" in state["set"]["signal_keys"] and "g7.out" in logs
        assert state["set"]["selected"] == ["g7.out"]
        t, v = state["signals"]["g7.out"]
        np.testing.assert_array_equal(t, logs.time_of("g7.out"))
        np.testing.assert_array_equal(v, np.ravel(logs["g7.out"]))
        sim.close()
