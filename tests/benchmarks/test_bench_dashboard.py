"""Benchmark: what the dashboard costs a run, and how fast its page paints.

1. The same co-simulation with and without a dashboard (its server up, the observer
   sampling, a page subscribed to the event stream), interleaved, best of repeats: the
   wall time of ``run()``, and the ratio. Run on the zmq backend (two units in two server
   processes: about 1,000 macro steps per second here, the issue's rate) and in process
   (the compiled exchange: far more steps per second, the observer's cost per step at its
   most visible). Target: <= 5 % at 1,000 macro steps/s.
2. The page in headless Chromium: first paint and diagram drawn for a 1,000-block model's
   ``cosim view`` page (target: first paint <= 1 s), and one redraw of the signal plot
   holding 100,000 samples per signal (decimated to the plot's width).

Run: python -m pytest -m bench -s tests/benchmarks/test_bench_dashboard.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from cosim.dashboard import Dashboard
from cosim.master.cosimulation import CoSimulation
from tests.dashboard.models import chain, two_lags

pytestmark = pytest.mark.bench


def _ev(t_end: float, backend: str):
    from dataclasses import replace
    from pathlib import Path

    from cosim import Model
    model = Model.from_yaml(Path(__file__).resolve().parents[2] / "examples" /
                            "electric_vehicle.yaml")
    return model, replace(model.simulation, t_end=t_end,
                          cosim=replace(model.simulation.cosim, backend=backend))


def _timed_run(backend: str, t_end: float, with_board: bool, model_of=two_lags) \
        -> tuple[float, int]:
    model, config = model_of(t_end=t_end, backend=backend)
    board = Dashboard() if with_board else None
    reader = None
    try:
        sim = CoSimulation(model, config, dashboard=board)
        if board is not None:           # a page listening all along, in a process of its own
            reader = subprocess.Popen(
                [sys.executable, "-c", "import sys, urllib.request\n"
                 "for _ in urllib.request.urlopen(sys.argv[1], timeout=60): pass",
                 board.url.replace("/?", "/events?")], stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + 30
            while not board.board.subscribers and time.monotonic() < deadline:
                time.sleep(0.01)
        sim.initialize()
        t0 = time.perf_counter()
        sim.run()
        seconds = time.perf_counter() - t0
        steps = sim.master.n
        sim.close()
        return seconds, steps
    finally:
        if board is not None:
            board.close()
        if reader is not None:
            reader.kill()
            reader.wait()


@pytest.mark.parametrize("name,backend,t_end", [
    ("two lags", "zmq", 5.0), ("two lags", "local", 20.0), ("EV (iterated)", "local", 4.0)])
def test_dashboard_overhead(name, backend, t_end):
    """Two lags: the pipeline (zmq) and the compiled exchange (local), the observer called
    per chunk; the EV in process: the protocol path (an iterated coupling), called every
    macro step."""
    model_of = two_lags if name == "two lags" else _ev
    times = {False: [], True: []}
    steps = 0
    for i in range(8):                          # interleaved, in both orders: load drifts
        for with_board in ((False, True) if i % 2 else (True, False)):
            seconds, steps = _timed_run(backend, t_end, with_board, model_of)
            times[with_board].append(seconds)
    best = {k: min(v) for k, v in times.items()}
    rate = steps / best[False]
    ratio = best[True] / best[False]
    pairs = sorted(a / b for a, b in zip(times[True], times[False]))
    print(f"\ndashboard overhead, {name}, {backend} backend, {steps} macro steps: without "
          f"{best[False]:.3f} s ({rate:,.0f} steps/s), with {best[True]:.3f} s (best of 8): "
          f"x{ratio:.3f} ({100 * (ratio - 1):+.1f} %); median of the paired ratios "
          f"x{pairs[len(pairs) // 2]:.3f}; load {os.getloadavg()[0]:.1f}")


def test_first_paint_of_a_thousand_block_model_and_a_100k_sample_plot(tmp_path):
    from cosim.dashboard.page import render
    from cosim.dashboard.static import view_state
    from tests.dashboard.browser import browser_page
    model, config = chain(1000)
    path = tmp_path / "view.html"
    path.write_text(render(model.name, view_state(model, config)))
    paints, diagrams, layouts = [], [], []
    with browser_page() as page:
        for _ in range(3):
            page.goto(path.as_uri())
            page.wait_for_selector("body[data-diagram=ready]", timeout=60_000)
            fp = page.evaluate("performance.getEntriesByName('first-contentful-paint')"
                               ".map(e => e.startTime)[0]")
            paints.append(fp)
            diagrams.append(page.evaluate("performance.now()"))
            layouts.append(page.evaluate("cosimDashboard.layoutMs"))
        # Opening the top-level box: all 1,000 blocks laid out and drawn.
        opened = page.evaluate("""() => new Promise(done => {
            const t0 = performance.now();
            document.querySelector('#diagram g.node[data-id="main"]')
              .dispatchEvent(new MouseEvent('click', {bubbles: true}));
            const wait = () => document.querySelectorAll('#diagram g.node').length >= 1000
              ? done(performance.now() - t0) : setTimeout(wait, 5);
            wait();
        })""")
        layouts.append(page.evaluate("cosimDashboard.layoutMs"))
        # 100k samples per signal, three signals: the time of one redraw of the plot.
        redraw = page.evaluate("""() => {
            const n = 100000, t = [], a = [], b = [], c = [];
            for (let i = 0; i < n; i++) { t.push(i * 1e-3); a.push(Math.sin(i * 1e-3));
              b.push(Math.cos(i * 7e-4)); c.push(((i * 7919) % 1000) / 1000); }
            const D = cosimDashboard;
            D.apply({set: {selected: ["a", "b", "c"], signal_keys: ["a", "b", "c"]},
                     signals: {a: [t, a], b: [t.slice(), b], c: [t.slice(), c]}});
            const tick = () => new Promise(r => setTimeout(r, 0));
            return tick().then(async () => {
              await new Promise(r => setTimeout(r, 500));
              const times = [];
              for (let k = 0; k < 5; k++) {
                const t0 = performance.now();
                D.apply({signals: {a: [[n * 1e-3 + k * 1e-3], [0]]}});
                D.render_now();
                await tick();           // uPlot draws in a microtask: include it
                times.push(performance.now() - t0);
              }
              return Math.min(...times);
            });
        }""")
    # The live page of the same model co-simulated (one unit): served, scripts from /static.
    from dataclasses import replace

    from cosim import CosimConfig
    live_paint, live_diagram = [], []
    with Dashboard() as board, browser_page() as page:
        sim = CoSimulation(model, replace(config, cosim=CosimConfig(H=0.01)), dashboard=board)
        for _ in range(3):
            page.goto(board.url)
            page.wait_for_selector("body[data-diagram=ready]", timeout=60_000)
            live_paint.append(page.evaluate(
                "performance.getEntriesByName('first-contentful-paint')"
                ".map(e => e.startTime)[0]"))
            live_diagram.append(page.evaluate("performance.now()"))
        sim.close()
    print(f"\n1,000-block model, live page (served): first contentful paint "
          f"{min(live_paint):.0f} ms, diagram drawn by {min(live_diagram):.0f} ms")
    print(f"1,000-block model, cosim view page in Chromium: first contentful paint "
          f"{min(paints):.0f} ms (runs {', '.join(f'{p:.0f}' for p in paints)}), diagram "
          f"drawn by {min(diagrams):.0f} ms (dagre layout {min(layouts):.0f} ms), its "
          f"1,000 blocks opened and drawn in {opened:.0f} ms (layout {layouts[-1]:.0f} ms); "
          f"a plot of "
          f"3 x 100,000 samples redrawn in {redraw:.1f} ms; load {os.getloadavg()[0]:.1f}")


def test_the_observers_cost_per_call():
    """What the master pays per macro step: RunMonitor.observe with the default signals
    recorded, against an observer that does nothing (both called as the master calls them);
    and what the monitor's thread spends per snapshot (10 a second) on the EV model (5
    units, 30 ports): a delta made and published (RunMonitor.flush does what the thread
    does)."""
    from cosim.master.observer import Observer
    ev, ev_config = _ev(1.0, "local")
    with Dashboard() as board:
        sim = CoSimulation(ev, ev_config, dashboard=board)
        sim.run(t_end=0.5)
        monitor = sim.master.observer
        t0 = time.perf_counter()
        for _ in range(50):
            monitor.flush()
        per_snapshot = (time.perf_counter() - t0) / 50
        sim.close()
    print(f"\nmonitor thread, EV: {1e3 * per_snapshot:.2f} ms per snapshot = "
          f"{100 * per_snapshot / monitor.period:.1f} % of one CPU at {1 / monitor.period:g} "
          f"snapshots/s")
    model, config = two_lags(t_end=1.0)
    with Dashboard(signals=None) as board:
        sim = CoSimulation(model, config, dashboard=board)
        sim.run(t_end=0.1)                  # the monitor knows the ports now
        monitor, master, n = sim.master.observer, sim.master, 200_000
        nothing = Observer()
        best = {}
        for name, obs in (("nothing", nothing), ("monitor", monitor)):
            times = []
            for _ in range(5):
                t0 = time.perf_counter()
                for _ in range(n):
                    obs.observe(master)
                times.append(time.perf_counter() - t0)
            best[name] = min(times) / n * 1e6
        sim.close()
    cost = best["monitor"] - best["nothing"]
    print(f"\nRunMonitor.observe: {best['monitor']:.2f} us per call ({len(monitor.recording)}"
          f" signals recorded), a call that does nothing {best['nothing']:.2f} us: "
          f"{cost:.2f} us per macro step = {cost / 10:.2f} % of a 1 ms macro step "
          f"(1,000 steps/s); load {os.getloadavg()[0]:.1f}")
