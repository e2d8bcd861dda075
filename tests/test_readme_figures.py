"""The README's picture is what the Quickstart's command draws: ``docs/figures.py`` draws it
again with the command's own code and the result is compared with the description committed
beside the picture (``docs/electric_vehicle.json``: size, title, panels, legends, and a summary
of each line's data), and the committed PNG with that size. A change to the example or the
plotting that is not regenerated (``python docs/figures.py``) fails here."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs"))
try:
    import figures
finally:
    sys.path.pop(0)


def test_the_readme_shows_the_picture_the_script_writes():
    readme = (ROOT / "README.md").read_text()
    assert f"]({figures.PICTURE.relative_to(ROOT)})" in readme
    # ... and the Quickstart's first command draws it (the script runs that command's main).
    section = readme.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    first = re.findall(r"```bash\n(.*?)```", section, re.S)[0].strip()
    assert first.split(" && ", 1)[1].split()[:3] == ["python", "examples/electric_vehicle.py",
                                                     "--plot"]


def test_the_committed_picture_has_the_described_size():
    described = json.loads(figures.DESCRIPTION.read_text())
    assert figures.png_size(figures.PICTURE) == described["size"]


@pytest.mark.slow
def test_the_picture_drawn_again_is_the_committed_one(tmp_path):
    committed = json.loads(figures.DESCRIPTION.read_text())
    drawn = figures.draw(tmp_path / "ev.png")
    assert figures.png_size(tmp_path / "ev.png") == drawn["size"] == committed["size"]
    assert drawn["title"] == committed["title"]
    assert [(p["title"], p["ylabel"], p["legend"]) for p in drawn["panels"]] == \
        [(p["title"], p["ylabel"], p["legend"]) for p in committed["panels"]]
    for new, old in zip(drawn["panels"], committed["panels"]):
        assert [(ln["label"], ln["points"], ln["t"]) for ln in new["lines"]] == \
            [(ln["label"], ln["points"], ln["t"]) for ln in old["lines"]], new["title"]
        for a, b in zip(new["lines"], old["lines"]):
            for field in ("min", "max", "last"):
                # The same run; the tolerance covers another machine's libm.
                assert a[field] == pytest.approx(b[field], rel=1e-9, abs=1e-12), \
                    (new["title"], a["label"], field)
