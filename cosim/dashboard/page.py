"""The dashboard's one HTML page, live (served: scripts from ``/static``, state from the event
stream) or static (``cosim report``, ``cosim view -o``: scripts, styles and the state inline,
so the file opens anywhere without a network)."""

from __future__ import annotations

import html

from cosim.dashboard.server import STATIC

__all__ = ["render"]

_SCRIPTS = ("uPlot.iife.min.js", "dagre.min.js", "dashboard.js")
_STYLES = ("uPlot.min.css", "dashboard.css")

_BODY = """<div id="cosim-dashboard">
<header><h1 id="title">{title}</h1><span id="status" class="status"></span>
<span id="connection"></span></header>
<div id="progress-panel"><div class="bar"><div id="progress-fill"></div></div>
<div id="progress-text"><span id="p-time"></span><span id="p-rate"></span>
<span id="p-eta"></span><span id="p-wall"></span><span id="p-stats"></span></div></div>
<div id="error"></div>
<section id="sweep-panel" hidden><h2>Sweep</h2><p id="sweep-summary"></p>
<table id="workers-table"></table><h2>Results</h2><div style="overflow:auto;max-height:400px">
<table id="rows-table"></table></div></section>
<div id="run-panels">
<section id="diagram-panel"><h2>Model</h2><div id="legend"></div><div id="diagram"></div>
<p class="note">Click a subsystem to open or close it; boxes are coloured by where their
unit runs; red dashed wires are algebraic couplings; numbers on wires between units are
their latest values.</p></section>
<section id="units-panel"><h2>Units</h2><table id="units-table"></table>
<p class="note">The unit with the highest mean step time (the straggler) is highlighted.</p>
</section>
<section id="signals-panel"><h2>Signals</h2><input id="signal-filter" type="search"
placeholder="filter signals (unit.port, unit/block.port, block.port)" size="48">
<span id="signal-count" class="note"></span><div id="signal-picker"></div>
<div id="signal-plot"></div></section>
<section id="timing-panel"><h2>Wall time per macro step, per unit</h2>
<p id="timing-note" class="note"></p><div id="timing-plot"></div></section>
<section id="steps-panel"><h2>Coupling iterations, rejected steps, recoveries and events</h2>
<div id="steps-plot"></div><ul id="marks"></ul></section>
</div>
</div>"""


def _inline_script(text: str) -> str:
    return "<script>" + text.replace("</script", "<\\/script") + "</script>"


def render(title: str, state_json: str | None = None, extra: str = "") -> str:
    """The page's HTML.

    Parameters
    ----------
    title : str
    state_json : str, optional
        The board's state (:meth:`Board.snapshot <cosim.dashboard.board.Board.snapshot>`):
        a static page carrying it, its scripts and styles inline; None: the live page,
        which loads them from its server.
    extra : str
        HTML appended after the dashboard (the report's detailed sections).
    """
    head = ['<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
            f"<title>{html.escape(title)} - cosim dashboard</title>"]
    if state_json is None:
        head += [f'<link rel="stylesheet" href="static/{name}">' for name in _STYLES]
    else:
        head.append("<style>" + "\n".join((STATIC / name).read_text(encoding="utf-8")
                                          for name in _STYLES) + "</style>")
    head.append("</head><body>")
    body = [_BODY.format(title=html.escape(title))]
    if state_json is not None:
        # JSON in a script element: "</" could end it early, so it is written "<\/".
        body.append('<script type="application/json" id="cosim-state">'
                    + state_json.replace("</", "<\\/") + "</script>")
        body += [_inline_script((STATIC / name).read_text(encoding="utf-8"))
                 for name in _SCRIPTS]
    else:
        body += [f'<script src="static/{name}"></script>' for name in _SCRIPTS]
    body.append(extra)
    body.append("</body></html>\n")
    return "".join(head + body)
