"""A person watching a dashboard, for the benchmark: the page open in headless Chromium in a
process of its own (as a browser would be), until told to close.

Run: ``python -m tests.dashboard.reader URL``. Prints ``open`` once the page shows the run's
first state (its diagram drawn), keeps it open (Playwright's connection served once a
second: the driver's own work stays small beside the page's) until a line arrives on stdin,
then prints the page's render count, its script's time per render and any errors, and
closes.
"""

from __future__ import annotations

import select
import sys

from tests.dashboard.browser import browser_page


def main(url: str) -> None:
    with browser_page() as page:
        page.goto(url)
        if url != "about:blank":                # (a browser with nothing to show: the reference)
            page.wait_for_selector("body[data-diagram=ready]", timeout=120_000)
        print("open", flush=True)
        while not select.select([sys.stdin], [], [], 0)[0]:
            page.wait_for_timeout(1000)
        if url == "about:blank":
            print("blank", flush=True)
            return
        renders, ms = page.evaluate("[cosimDashboard.renders, cosimDashboard.renderMs]")
        print(f"{renders} renders of {ms:.1f} ms, errors {page.errors}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
