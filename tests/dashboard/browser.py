"""A real browser for the dashboard tests: Debian's Chromium (``.ci/run`` installs it)
driven by Playwright (the ``test`` extra) with its own executable, never a downloaded one."""

from __future__ import annotations

import contextlib
import shutil

import numpy as np
import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@contextlib.contextmanager
def browser_page(width: int = 1300, height: int = 1000):
    """A fresh page; its console errors and uncaught exceptions are in ``page.errors``."""
    from playwright import sync_api
    if not shutil.which(CHROMIUM):
        pytest.fail(f"no Chromium at {CHROMIUM}: apt-get install -y chromium (.ci/run does)")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.errors = []
            page.on("pageerror", lambda e: page.errors.append(f"uncaught: {e} {e.stack}"))
            page.on("console", lambda m: page.errors.append(m.text)
                    if m.type == "error" else None)
            yield page
        finally:
            browser.close()


def non_blank(png_path) -> dict:
    """What a person would see in a screenshot: the share of non-background pixels and the
    number of distinct colours (a blank or one-colour page has ~0 and 1)."""
    from PIL import Image
    img = np.asarray(Image.open(png_path).convert("RGB")).reshape(-1, 3).astype(np.int64)
    background = np.bincount(img[:, 0] * 65536 + img[:, 1] * 256 + img[:, 2]).argmax()
    bg = np.array([background >> 16, (background >> 8) & 255, background & 255])
    ink = np.any(np.abs(img - bg) > 24, axis=1).mean()
    colours = len(np.unique(img[::7], axis=0))
    return {"ink": float(ink), "colours": int(colours)}
