"""Ray's own notices never break a progress bar: a notice logged by Ray's driver code (on the
logger Ray's token-authentication notice uses) while a tqdm bar is on stderr comes out as a
whole line, where Ray's plain handler writes it into the bar's line."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

SCRIPT = """
import logging, sys, time
from tqdm import tqdm
import cluster.ray_backend as rb
if sys.argv[1] == "fixed":
    rb.notices_beside_progress_bars()
bar = tqdm(total=4, desc="sweep", file=sys.stderr, mininterval=0, miniters=1)
bar.update(1)
logging.getLogger("ray._private.authentication.authentication_token_setup").warning(
    "Token authentication is enabled for this Ray cluster.")
bar.update(1)
bar.close()
"""


def segments(stderr: str) -> list[str]:
    """What a terminal shows line by line: text between carriage returns and newlines."""
    return [s for s in re.split(r"[\r\n]", stderr) if s.strip()]


@pytest.mark.parametrize("mode", ["fixed", "plain"])
def test_a_ray_notice_during_a_progress_bar(mode):
    r = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    notice = [s for s in segments(r.stderr) if "Token authentication" in s]
    assert len(notice) == 1
    if mode == "fixed":
        assert notice[0] == "ray: Token authentication is enabled for this Ray cluster."
        # The bar is drawn again below the notice and goes on.
        assert segments(r.stderr)[-1].startswith("sweep:  50%")
    else:   # Ray's own handler: the notice lands in the bar's line (what this fixes)
        assert notice[0].startswith("sweep:")


START = """
import logging, os
os.environ.pop("RAY_AUTH_MODE", None)
from cluster.ray_backend import ensure_ray
ensure_ray()
logging.getLogger("ray.util").warning("a notice after the start")
logging.getLogger("somebody.else").warning("not Ray's")
import ray
ray.shutdown()
"""


@pytest.mark.cluster
@pytest.mark.slow
def test_every_notice_of_a_real_ray_start_is_a_prefixed_line(tmp_path):
    """Starting Ray as cosim does (``ray.init(configure_logging=False)``, which removes Ray's
    own handler) prints Ray's notices as ``ray: ...`` lines, as the Ray guide says; another
    library's warnings keep their own form."""
    r = subprocess.run([sys.executable, "-c", START], capture_output=True, text=True,
                       timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = [s for s in r.stderr.splitlines() if s.strip()]
    assert "ray: a notice after the start" in lines
    assert "not Ray's" in lines
    assert all(s.startswith("ray: ") for s in lines if s != "not Ray's"), lines
