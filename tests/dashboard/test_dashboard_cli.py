"""The dashboard from the command line: ``cosim view`` (the diagram of a model file without
running it), ``cosim run --dashboard`` (the address printed, the run unchanged) and
``cosim report`` (the same page, static, with the run's diagram and placement)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import numpy as np

from cosim import Model
from cosim.master.overview import overview

ROOT = Path(__file__).resolve().parents[2]
EV = str(ROOT / "examples" / "electric_vehicle.yaml")


def cosim(*args, cwd, timeout=600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cosim.cli", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=cwd)


def embedded_state(html: str) -> dict:
    found = re.search(r'<script type="application/json" id="cosim-state">(.*?)</script>',
                      html, re.S)
    assert found, "no state in the page"
    return json.loads(found.group(1).replace("<\\/", "</"))


def test_view_draws_the_model_file_with_its_units_facts_without_running(tmp_path):
    r = cosim("view", EV, "-o", "ev.html", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    html = (tmp_path / "ev.html").read_text()
    assert "<script src=" not in html and "<link " not in html     # one file, offline
    state = embedded_state(html)["set"]
    model = Model.from_yaml(EV)
    plan = overview(model, model.simulation)        # cosim plan's view: the oracle
    assert set(state["units"]) == {u.name for u in plan.units}
    for row in plan.units:
        unit = state["units"][row.name]
        assert unit["dt"] == row.dt and unit["solver"] == row.solver
        assert unit["kind"] == "planned" and "local" in unit["label"]
    assert sorted(map(sorted, state["couplings"])) == sorted(map(sorted, plan.couplings))
    assert state["units"]["battery"]["feedthrough"] == {"v_batt": ["current"]}
    assert state["progress"] == {} and state["mode"] == "view"
    ids = {n["id"] for n in state["diagram"]["nodes"]}
    assert {"motor", "battery", "vehicle/speed", "control/pi"} <= ids
    sample = {n["id"]: n.get("sample_time") for n in state["diagram"]["nodes"]}
    assert sample["control/pi"] == "0.01 s"


def test_view_serves_the_page_with_a_token(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "cosim.cli", "view", EV, "--seconds", "60"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tmp_path)
    try:
        line = proc.stdout.readline()
        url = re.search(r"(http://127\.0\.0\.1:\d+/\?token=\S+)", line).group(1)
        page = urllib.request.urlopen(url, timeout=30).read().decode()
        assert 'id="cosim-dashboard"' in page
        state = json.loads(urllib.request.urlopen(url.replace("/?", "/state.json?"),
                                                  timeout=30).read())
        assert state["set"]["mode"] == "view" and "motor" in state["set"]["units"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_run_with_a_dashboard_prints_its_address_and_runs_the_same(tmp_path):
    a = cosim("run", EV, "--t-end", "2", "--out", "a.npz", cwd=tmp_path)
    b = cosim("run", EV, "--t-end", "2", "--out", "b.npz", "--dashboard", cwd=tmp_path)
    assert a.returncode == 0 and b.returncode == 0, b.stderr
    assert re.search(r"cosim dashboard: http://127\.0\.0\.1:\d+/\?token=[\w-]{20,}", b.stderr)
    with np.load(tmp_path / "a.npz") as za, np.load(tmp_path / "b.npz") as zb:
        keys = [k for k in za.files if k.startswith("values/")]
        assert keys
        for k in keys:
            np.testing.assert_array_equal(za[k], zb[k], err_msg=k)
    bad = cosim("run", str(ROOT / "examples" / "servo.yaml"), "--dashboard", cwd=tmp_path)
    assert bad.returncode == 2 and "--dashboard shows co-simulations" in bad.stderr
    bad = cosim("run", EV, "--dashboard", "nohost:port", cwd=tmp_path)
    assert bad.returncode == 2 and "HOST:PORT" in bad.stderr


def test_report_is_the_dashboard_page_of_the_run(tmp_path):
    r = cosim("run", EV, "--t-end", "3", "--adaptive", "--out", "r.npz", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = cosim("report", "r.npz", "-o", "r.html", "--signals", "vehicle.v", "cycle.v_ref",
              cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    state = embedded_state((tmp_path / "r.html").read_text())
    with np.load(tmp_path / "r.npz") as z:
        names = [str(n) for n in z["steps/status_names"]]
        status = np.array([names[int(c)] for c in z["steps/status"]])
        iterations = z["steps/iterations"]
        v = z["values/vehicle.v"].ravel()
    s = state["set"]
    assert s["mode"] == "static"
    assert sorted(s["selected"]) == ["cycle.v_ref", "vehicle.v"]
    assert set(s["units"]) == {"cycle", "control", "motor", "battery", "vehicle"}
    assert all(u["kind"] == "in process" for u in s["units"].values())
    assert sorted(map(sorted, s["couplings"])) == [["battery", "motor"]]
    assert s["progress"]["stats"]["rejected"] == int((status == "rejected").sum())
    assert max(state["steps"]["iterations"]) == int(iterations.max())
    assert sum(state["steps"]["rejected"]) == int((status == "rejected").sum())
    t_v, v_v = state["signals"]["vehicle.v"]
    assert len(t_v) == len(v) < 4000 and v_v == v.tolist()     # not decimated: all of it
