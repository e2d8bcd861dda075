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
import threading
import time
import urllib.request

import pytest

from cosim.dashboard import Dashboard
from cosim.master.cosimulation import CoSimulation
from tests.dashboard.models import chain, two_lags

pytestmark = pytest.mark.bench


def _timed_run(backend: str, t_end: float, with_board: bool) -> tuple[float, int]:
    model, config = two_lags(t_end=t_end, backend=backend)
    board = Dashboard() if with_board else None
    reader = None
    try:
        sim = CoSimulation(model, config, dashboard=board)
        if board is not None:           # a page listening all along
            stream = urllib.request.urlopen(board.url.replace("/?", "/events?"), timeout=30)
            reader = threading.Thread(target=lambda: [None for _ in stream], daemon=True)
            reader.start()
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


@pytest.mark.parametrize("backend,t_end", [("zmq", 5.0), ("local", 20.0)])
def test_dashboard_overhead(backend, t_end):
    best = {False: float("inf"), True: float("inf")}
    steps = 0
    for _ in range(4):                          # interleaved: the load drifts
        for with_board in (False, True):
            seconds, steps = _timed_run(backend, t_end, with_board)
            best[with_board] = min(best[with_board], seconds)
    rate = steps / best[False]
    ratio = best[True] / best[False]
    print(f"\ndashboard overhead, {backend} backend, {steps} macro steps: without "
          f"{best[False]:.3f} s ({rate:,.0f} steps/s), with {best[True]:.3f} s: "
          f"x{ratio:.3f} ({100 * (ratio - 1):+.1f} %); load {os.getloadavg()[0]:.1f}")


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
        # 100k samples per signal, three signals: the time of one redraw of the plot.
        redraw = page.evaluate("""() => {
            const n = 100000, t = [], a = [], b = [], c = [];
            for (let i = 0; i < n; i++) { t.push(i * 1e-3); a.push(Math.sin(i * 1e-3));
              b.push(Math.cos(i * 7e-4)); c.push(((i * 7919) % 1000) / 1000); }
            const D = cosimDashboard;
            D.apply({set: {selected: ["a", "b", "c"], signal_keys: ["a", "b", "c"]},
                     signals: {a: [t, a], b: [t.slice(), b], c: [t.slice(), c]}});
            return new Promise(done => setTimeout(() => {
              const times = [];
              for (let k = 0; k < 5; k++) {
                const t0 = performance.now();
                D.apply({signals: {a: [[n * 1e-3 + k * 1e-3], [0]]}});
                D.render_now();
                times.push(performance.now() - t0);
              }
              done(Math.min(...times));
            }, 500));
        }""")
    print(f"\n1,000-block model, cosim view page in Chromium: first contentful paint "
          f"{min(paints):.0f} ms (runs {', '.join(f'{p:.0f}' for p in paints)}), diagram "
          f"drawn by {min(diagrams):.0f} ms (dagre layout {min(layouts):.0f} ms); a plot of "
          f"3 x 100,000 samples redrawn in {redraw:.1f} ms; load {os.getloadavg()[0]:.1f}")
