"""Take the screenshot of docs/guides/dashboard.md: the electric-vehicle showcase
(examples/electric_vehicle.yaml) co-simulated on the zmq backend — motor and battery sharing
one server process, the other units one each — watched in headless Chromium while it runs.
Run: python docs/dashboard_figure.py (writes docs/dashboard.png; needs Chromium and the
``test`` extra's playwright)."""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

from cosim import Model
from cosim.config import UnitOptions
from cosim.dashboard import Dashboard
from cosim.master.cosimulation import CoSimulation
from tests.dashboard.browser import browser_page

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    model = Model.from_yaml(ROOT / "examples" / "electric_vehicle.yaml")
    sim_cfg = model.simulation
    config = replace(sim_cfg, cosim=replace(
        sim_cfg.cosim, backend="zmq",
        units={"motor": UnitOptions(process="power"), "battery": UnitOptions(process="power")}))
    # Two unit outputs and a signal logged inside the vehicle unit.
    with Dashboard(signals=["cycle.v_ref", "vehicle.v", "vehicle/accel.out"]) as board, \
            browser_page(width=1280, height=900) as page:
        sim = CoSimulation(model, config, dashboard=board)
        page.goto(board.url)
        run = threading.Thread(target=sim.run)
        run.start()
        run.join()
        page.wait_for_function("cosimDashboard.state.progress.status === 'done'")
        page.wait_for_function("cosimDashboard.lastPlotted('vehicle/accel.out') >= "
                               f"{config.t_end} - 0.02")
        page.wait_for_timeout(1500)             # the page renders once a second
        out = ROOT / "docs" / "dashboard.png"
        page.screenshot(path=str(out), full_page=True)
        sim.close()
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
