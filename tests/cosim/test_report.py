"""``cosim report``: the page a user opens shows what it claims. Read as a browser reads it —
parsed as HTML, each inline figure parsed as SVG (XML) — and compared with the results file
read with numpy and with the co-simulation itself. (No headless browser here: none is
installed and Playwright's browsers cannot be fetched offline; the parse is the check.)"""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import numpy as np

from cosim import Model
from cosim.master.partition import partition

ROOT = Path(__file__).resolve().parents[2]
EV = str(ROOT / "examples" / "electric_vehicle.yaml")


def cosim(*args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cosim.cli", *args], capture_output=True,
                          text=True, timeout=600, cwd=cwd)


class Page(HTMLParser):
    """Sections (by id) with their tables (rows of cell texts) and inline SVG sources."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.text = text
        self.sections: dict[str, dict] = {}
        self.stack: list[str] = []
        self.tables: dict[str, list[list[str]]] = {}
        self.table = None
        self.cell = None
        self.external: list[str] = []
        self.svg_starts: list[tuple[str, int]] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag in ("img", "script", "link", "iframe") and (attrs.get("src") or
                                                           attrs.get("href")):
            self.external.append(tag)
        if tag == "section":
            self.stack.append(attrs.get("id", ""))
            self.sections[attrs.get("id", "")] = {"svgs": 0}
        elif tag == "svg" and self.stack:
            for sid in self.stack:
                self.sections[sid]["svgs"] += 1
        elif tag == "table":
            self.table = self.tables.setdefault(attrs.get("id", ""), [])
        elif tag == "tr" and self.table is not None:
            self.table.append([])
        elif tag in ("td", "th") and self.table is not None:
            self.cell = ""

    def handle_endtag(self, tag):
        if tag == "section":
            self.stack.pop()
        elif tag == "table":
            self.table = None
        elif tag in ("td", "th") and self.table is not None and self.cell is not None:
            self.table[-1].append(self.cell.strip())
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell += data


def test_report_of_a_cosimulation_shows_what_it_claims(tmp_path):
    r = cosim("run", EV, "--t-end", "3", "--adaptive", "--unit", "battery.process=power",
              "--out", "r.npz", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = cosim("report", "r.npz", "-o", "report.html", "--signals", "vehicle/speed.out",
              "battery/*", "motor/current_.out", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "report.html").read_text()
    page = Page(text)
    assert page.external == []                       # self-contained: nothing to fetch

    # Every inline figure is well-formed SVG with drawn paths.
    svgs = [text[i:text.index("</svg>", i) + 6] for i in
            [j for j in range(len(text)) if text.startswith("<svg", j)]]
    assert len(svgs) >= 5
    for svg in svgs:
        root = ET.fromstring(svg)
        assert root.tag.endswith("svg")
        assert len(root.findall(".//{http://www.w3.org/2000/svg}path")) > 0

    with np.load(tmp_path / "r.npz") as z:
        placement = json.loads(str(z["run.json"]))
        timing = {k[7:]: z[k] for k in z.files if k.startswith("timing/")}
        statuses = [str(s) for s in z["steps/status_names"]]
        status = z["steps/status"]
        iterations = z["steps/iterations"]

    # Placement: every unit of the model's partition, with the options given.
    model = Model.from_yaml(EV)
    units = [u.name for u in partition(model, model.simulation).units]
    rows = page.tables["placement-table"]
    assert rows[0] == ["unit", "backend", "options", "step [s]", "solver"]
    assert [row[0] for row in rows[1:]] == units
    assert dict((row[0], row[2]) for row in rows[1:])["battery"] == "process=power"
    assert placement["scheme"] == "gauss-seidel" and all(row[1] == "local" for row in rows[1:])

    # Signals: one section per unit of the chosen signals, each with its figure.
    for unit in ("vehicle", "battery", "motor"):
        assert page.sections[f"unit-{unit}"]["svgs"] == 1
    assert "unit-cycle" not in page.sections

    # Timing: a row per timed unit, its macro steps as many as the file's distinct times.
    trows = {row[0]: row for row in page.tables["timing-table"][1:]}
    assert set(trows) == set(timing) and set(timing) <= set(units)
    for unit, data in timing.items():
        assert int(trows[unit][1]) == len(np.unique(data[:, 0]))
        assert abs(float(trows[unit][2]) - data[:, 1].sum()) <= 1e-4
    assert page.sections["timing"]["svgs"] == 1

    # Steps: attempts, iterations and every status count as the step log says.
    srows = {row[0]: row[1] for row in page.tables["steps-table"][1:]}
    assert int(srows["macro step attempts"]) == len(status)
    assert int(srows["most iterations in a step"]) == int(iterations.max()) >= 2
    for code, name in enumerate(statuses):
        assert int(srows[name]) == int((status == code).sum())
    assert page.sections["steps"]["svgs"] == 1


def test_report_of_a_monolithic_csv_has_the_plots_and_says_what_is_missing(tmp_path):
    r = cosim("run", str(ROOT / "examples" / "servo.yaml"), "--out", "s.csv", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = cosim("report", "s.csv", "-o", "s.html", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    page = Page((tmp_path / "s.html").read_text())
    assert page.sections["signals"]["svgs"] >= 1
    assert "No per-unit timing in this file" in page.text
    assert "No step log in this file" in page.text
    r = cosim("report", "s.csv", "-o", "x.html", "--signals", "nope*", cwd=tmp_path)
    assert r.returncode == 2 and "'nope*' matches no logged signal" in r.stderr
