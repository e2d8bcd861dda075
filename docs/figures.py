"""The README's picture, drawn by the Quickstart's own command: the main of
``examples/electric_vehicle.py`` with ``--plot`` (its other options the defaults), as
``python examples/electric_vehicle.py --plot electric_vehicle.png`` draws it.

``python docs/figures.py`` (from the repository root) writes ``docs/electric_vehicle.png``
and ``docs/electric_vehicle.json``: what the picture shows — its size in pixels, its title,
and per panel the title, the y label, the legend and, per line, the number of points, the time
span and the range and last value of the data. ``tests/test_readme_figures.py`` draws the
picture again and compares it with the JSON (and the PNG's size with it): a change to the
example or to the plotting that is not regenerated here fails the tests.
"""

from __future__ import annotations

import contextlib
import io
import json
import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PICTURE = ROOT / "docs" / "electric_vehicle.png"
DESCRIPTION = PICTURE.with_suffix(".json")
#: Dots per inch of the saved picture (cosim.run.plotting saves at this resolution).
DPI = 110


def draw(path: Path) -> dict:
    """Run the Quickstart's command with the picture going to ``path``; what it shows."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import electric_vehicle
    finally:
        sys.path.pop(0)
    plt.close("all")
    with contextlib.redirect_stdout(io.StringIO()):
        electric_vehicle.main(["--plot", str(path)])
    fig = plt.gcf()
    try:
        return describe(fig)
    finally:
        plt.close(fig)


def describe(fig) -> dict:
    """A figure's structure and data summary (plain JSON values)."""
    width, height = (round(float(x) * DPI) for x in fig.get_size_inches())
    panels = []
    for ax in fig.axes:
        legend = ax.get_legend()
        lines = []
        for line in ax.get_lines():
            xy = line.get_xydata()
            lines.append({"label": line.get_label(), "points": int(len(xy)),
                          "t": [float(xy[0, 0]), float(xy[-1, 0])],
                          "min": float(xy[:, 1].min()), "max": float(xy[:, 1].max()),
                          "last": float(xy[-1, 1])})
        panels.append({"title": ax.get_title(loc="left"), "ylabel": ax.get_ylabel(),
                       "legend": [t.get_text() for t in legend.get_texts()] if legend else [],
                       "lines": lines})
    # The figure's own texts: its title (suptitle).
    return {"size": [width, height], "title": " ".join(t.get_text() for t in fig.texts),
            "panels": panels}


def png_size(path: Path) -> list[int]:
    """Width and height of a PNG file, in pixels (from its header)."""
    with open(path, "rb") as fh:
        head = fh.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path} is not a PNG file")
    return list(struct.unpack(">II", head[16:24]))


def main() -> None:
    description = draw(PICTURE)
    DESCRIPTION.write_text(json.dumps(description, indent=1) + "\n")
    print(f"wrote {PICTURE.relative_to(ROOT)} ({'x'.join(map(str, png_size(PICTURE)))} px, "
          f"{len(description['panels'])} panels) and {DESCRIPTION.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
