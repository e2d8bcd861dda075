"""The dashboard opened in a real browser (Chromium, headless) while a co-simulation runs on
the zmq backend (real server processes on loopback): the diagram shows every unit with where
it runs, the plots advance, a killed and recovered unit shows as a recovery mark, and a
screenshot of it is not blank."""

from __future__ import annotations

import threading
import time

import pytest

from cosim import CosimConfig, SimulationConfig
from cosim.master.cosimulation import CoSimulation
from tests.cluster.scenarios import crashing, three_units
from tests.dashboard.browser import browser_page, non_blank

pytestmark = [pytest.mark.slow, pytest.mark.cluster]

T_CRASH = 0.5       # unit b's server process kills itself here (once): scenarios.crashing
EVERY = 5 * 0.02    # checkpoints: every 5 macro steps


def _config(t_end: float, **cosim) -> SimulationConfig:
    return SimulationConfig(dt=0.002, t_end=t_end, cosim=CosimConfig(
        H=0.02, scheme="gauss-seidel", extrapolation=1, timeout=120.0, **cosim))


def _wait(page, expression: str, timeout: float = 60.0):
    """Poll ``expression`` in the page until it is truthy; its value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = page.evaluate(expression)
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"the page never showed {expression!r} within {timeout:g} s; "
                         f"errors: {page.errors}")


def test_the_dashboard_of_a_zmq_run_with_a_recovery_in_a_real_browser(tmp_path):
    ref = CoSimulation(three_units(), _config(5.0, checkpoint_every=5)).run()
    sim = CoSimulation(crashing(str(tmp_path / "crashed")),
                       _config(5.0, backend="zmq", checkpoint_every=5,
                               units={"main": {"process": "glue"}}), dashboard=True)
    failure = []

    def run():
        try:
            for _ in sim.run_realtime(speed=1.0):   # ~5 s of wall time: the page watches
                pass
            sim.dashboard.update()
        except BaseException as err:  # noqa: BLE001 - reported by the test below
            failure.append(err)

    thread = threading.Thread(target=run)
    try:
        with browser_page() as page:
            page.goto(sim.dashboard.url)
            thread.start()
            page.wait_for_selector("body[data-diagram=ready]", timeout=30_000)

            # Every unit is drawn, labelled with where it runs: the zmq backend, its
            # server's process id and address, as the unit's proxy says.
            _wait(page, "cosimDashboard.state.units.b && cosimDashboard.state.units.b.where"
                        " && cosimDashboard.state.units.b.where.pid")
            page.wait_for_function("document.querySelectorAll('#diagram g.node-unit')"
                                   ".length === 2", timeout=30_000)
            # (Each unit's placement arrives on its own update: wait until every box shows
            # its address, not only b's.)
            page.wait_for_function("[...document.querySelectorAll('#diagram g.node-unit')]"
                                   ".every(e => (e.dataset.where || '').includes('tcp://'))",
                                   timeout=30_000)
            drawn = {el["id"]: el for el in page.eval_on_selector_all(
                "#diagram g.node", "els => els.map(e => ({id: e.dataset.id, "
                "unit: e.dataset.unit, where: e.dataset.where || ''}))")}
            for unit in sim.partition.units:
                name = unit.name
                where = sim.master.proxies[name].where()
                assert where["address"].startswith("tcp://127.0.0.1:")
                if name in drawn:                       # a subsystem unit: its box
                    shown = drawn[name]["where"]
                    if where["address"] not in shown:
                        # (killed and recovered since the page drew it, on a loaded
                        # machine: its box follows it to its new server)
                        shown = page.wait_for_function(
                            "([id, at]) => [...document.querySelectorAll("
                            "'#diagram g.node-unit')].map(e => e.dataset.id === id && "
                            "(e.dataset.where || '').includes(at) && e.dataset.where)"
                            ".find(Boolean)", arg=[name, where["address"]],
                            timeout=30_000).json_value()
                    assert "zmq" in shown and where["address"] in shown, (name, shown)
                # every block of the model, drawn inside its unit's box or as a top-level
                # block of the top-level unit, is marked with its unit
                mine = [d for d in drawn.values() if d["unit"] == name]
                assert mine, f"no block of unit {name} drawn"
            # (the table's rows are rebuilt on the update that brings the units' placements,
            # which may come after the diagram's: wait for it too)
            page.wait_for_function(
                "[...document.querySelectorAll('#units-table tr[data-unit] .where')]"
                ".every(c => c.textContent.includes('pid'))", timeout=30_000)
            table = dict(page.eval_on_selector_all(
                "#units-table tr[data-unit]",
                "rows => rows.map(r => [r.dataset.unit, r.querySelector('.where')"
                ".textContent])"))
            assert set(table) == {u.name for u in sim.partition.units}
            assert all("zmq" in v and "pid" in v for v in table.values()), table

            # The live plot advances between two reads.
            first = _wait(page, "cosimDashboard.lastSignalTime()")
            second = _wait(page, f"cosimDashboard.lastSignalTime() > {first} && "
                                 "cosimDashboard.lastSignalTime()")
            assert second > first

            # A signal logged inside a unit (block x of unit a, not a unit output), found
            # with the filter and ticked on the page: drawn, and its drawn end advances.
            page.fill("#signal-filter", "a/x.")
            page.wait_for_selector('#signal-picker input[value="a/x.out"]', timeout=30_000)
            page.check('#signal-picker input[value="a/x.out"]')
            first = _wait(page, "cosimDashboard.lastPlotted('a/x.out')")
            second = _wait(page, f"cosimDashboard.lastPlotted('a/x.out') > {first} && "
                                 "cosimDashboard.lastPlotted('a/x.out')")
            assert second > first
            assert "a/x.out" in page.eval_on_selector_all(
                "#signal-plot .u-legend .u-series", "els => els.map(e => e.textContent)"
            ).__str__()

            # The killed unit's recovery is a mark where the run went on from (the last
            # checkpoint before the failure), naming the unit, on the page's list.
            page.wait_for_selector("#marks li[data-kind=recovery]", timeout=60_000)
            t_mark = float(page.get_attribute("#marks li[data-kind=recovery]", "data-t"))
            assert T_CRASH - EVERY - 1e-9 <= t_mark < T_CRASH
            assert "unit 'b'" in page.inner_text("#marks li[data-kind=recovery]")
            thread.join(timeout=120)
            assert not failure, failure
            _wait(page, "cosimDashboard.state.progress.status === 'done'")
            assert sim.stats["recoveries"] == 1
            # The recovered unit runs in a new server process: the page says which.
            new_pid = str(sim.master.proxies["b"].where()["pid"])
            _wait(page, "document.querySelector('#units-table tr[data-unit=b] .where')"
                        f".textContent.includes('pid {new_pid}')")
            # The steps replayed after the recovery took the place of those the page held:
            # every plotted signal's times go forward.
            assert page.evaluate("Object.values(cosimDashboard.state.signals).every(([t]) =>"
                                 " t.every((x, i) => i === 0 || x >= t[i - 1]))")
            # ... and the run is the unfailed one, bit for bit.
            logs = sim.logs
            for key in ref:
                assert (logs[key] == ref[key]).all(), key

            page.wait_for_timeout(400)                 # the last render
            shot = tmp_path / "dashboard.png"
            page.screenshot(path=str(shot), full_page=True)
            seen = non_blank(shot)
            assert seen["ink"] > 0.05 and seen["colours"] > 20, seen
            assert page.errors == [], page.errors
    finally:
        thread.join(timeout=120)
        sim.close()


def test_a_sweep_on_the_dashboard_counts_runs_per_worker_and_fills_the_table():
    """A process-pool sweep watched from its start: the page's per-worker counts add up to
    what the sweep returned, each worker a process of the pool, and its table holds every
    row with the metric the sweep computed."""
    import os

    from cluster.sweep import final, grid, sweep
    from cosim.dashboard import Dashboard
    from tests.cluster import sweep_models as sm
    design = grid({"tau": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6], "gain": [1.0, 2.0]})
    with Dashboard() as board, browser_page() as page:
        page.goto(board.url)
        rows = sweep(sm.lag, sm.CONFIG, design, {"y_end": final("plant.out")},
                     backend="process", max_in_flight=2, progress=False, dashboard=board)
        _wait(page, "cosimDashboard.state && cosimDashboard.state.sweep && "
                    "cosimDashboard.state.sweep.status === 'done'")
        page.wait_for_selector("#workers-table tr[data-worker]")
        page.wait_for_timeout(400)
        workers = page.eval_on_selector_all(
            "#workers-table tr[data-worker]",
            "rows => rows.map(r => [...r.children].map(c => c.textContent))")
        assert sum(int(w[1]) for w in workers) == len(rows) == 12
        assert all(w[2] == "0" for w in workers)
        pids = {int(w[0].rsplit(":", 1)[1]) for w in workers}
        assert os.getpid() not in pids and 1 <= len(pids) <= 2
        assert "12 done, 0 failed, 0 pending of 12 runs" in page.inner_text("#sweep-summary")
        header = page.eval_on_selector_all("#rows-table tr:first-child th",
                                           "hs => hs.map(h => h.textContent)")
        col = header.index("y_end")
        shown = page.eval_on_selector_all(
            "#rows-table tr:not(:first-child)",
            f"rs => rs.map(r => [r.children[{header.index('run_id')}].textContent, "
            f"r.children[{col}].textContent])")
        assert len(shown) == 12
        by_id = {r["run_id"]: r["y_end"] for r in rows}
        for run_id, text in shown:
            assert float(text) == pytest.approx(by_id[run_id], rel=1e-4)
        assert all("worker" not in r for r in rows)      # not a column of the results
        assert page.errors == []


def test_a_thousand_block_model_is_drawn_whole(tmp_path):
    """``cosim view``'s static page of a 1,000-block model: its top-level blocks are one box
    (the unit ``main``) that opens to every block, each wired (the first-paint time is
    measured in tests/benchmarks/test_bench_dashboard.py)."""
    from cosim.dashboard.page import render
    from cosim.dashboard.static import view_state
    from tests.dashboard.models import chain
    model, config = chain(1000)
    path = tmp_path / "view.html"
    path.write_text(render(model.name, view_state(model, config)))
    with browser_page() as page:
        page.goto(path.as_uri())
        page.wait_for_selector("body[data-diagram=ready]", timeout=60_000)
        assert page.locator("#diagram g.node").count() == 1
        assert "1000 top-level blocks" in page.text_content('#diagram g.node[data-id="main"]')
        page.click('#diagram g.node[data-id="main"]')
        page.wait_for_function("document.querySelectorAll('#diagram g.node').length > 1",
                               timeout=60_000)
        n = page.eval_on_selector_all("#diagram g.node:not(.cluster)", "els => els.length")
        assert n == 1000
        assert page.locator("#diagram polyline.wire").count() == 999
        page.click('#diagram .group-open[data-id="main"]')          # and closes again
        page.wait_for_function("document.querySelectorAll('#diagram g.node').length === 1")
        assert page.errors == []


def test_the_report_and_view_pages_draw_offline_in_a_browser(tmp_path):
    """``cosim report`` of a zmq run and ``cosim view`` of a model without units: files that
    open with no server (file://), draw their diagram and plots, and raise nothing."""
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]

    def cosim(*args):
        r = subprocess.run([sys.executable, "-m", "cosim.cli", *args], capture_output=True,
                           text=True, timeout=600, cwd=tmp_path)
        assert r.returncode == 0, r.stderr

    cosim("run", str(root / "examples" / "electric_vehicle.yaml"), "--t-end", "2",
          "--backend", "zmq", "--out", "ev.npz")
    cosim("report", "ev.npz", "-o", "ev.html")
    cosim("view", str(root / "examples" / "servo.yaml"), "-o", "servo.html")
    with browser_page() as page:
        page.route("**/*", lambda route: route.abort()
                   if not route.request.url.startswith("file:") else route.continue_())
        page.goto((tmp_path / "ev.html").as_uri())
        page.wait_for_selector("body[data-diagram=ready]", timeout=30_000)
        units = page.eval_on_selector_all("#units-table tr[data-unit]",
                                          "rows => rows.map(r => r.dataset.unit)")
        assert sorted(units) == ["battery", "control", "cycle", "motor", "vehicle"]
        assert "zmq" in page.inner_text("#units-table")
        assert page.locator("#diagram svg.diagram .algebraic").count() >= 1
        assert page.locator("#signal-plot canvas").count() == 1
        assert page.locator("#timing-plot canvas").count() == 1
        assert page.locator("#report #placement-table").count() == 1     # the details
        # Subsystems open and close: the EV's units start closed (too many boxes open).
        assert page.locator('#diagram g.node[data-id^="motor/"]').count() == 0
        page.click('#diagram g.node[data-id="motor"]')
        inner = page.locator('#diagram g.node[data-id^="motor/"]')
        inner.first.wait_for()
        assert inner.count() >= 5
        page.click('#diagram g.cluster[data-id="motor"] .cluster-label')
        page.wait_for_function("!document.querySelector('#diagram g.node[data-id^=\"motor/\"]')")
        page.goto((tmp_path / "servo.html").as_uri())
        page.wait_for_selector("body[data-diagram=ready]", timeout=30_000)
        assert page.locator("#diagram g.node").count() >= 3
        assert page.inner_text("#status") == "not running"
        assert page.errors == []
