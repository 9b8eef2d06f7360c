"""Take the README's screenshots of the inspector: the demo's root, served read-only, each
page in headless Chromium (Debian's package, driven by Playwright; the test extra has both).

    python docs/inspector/screenshots.py ROOT

ROOT must be empty or absent: the demo writes into it first. The pages show ROOT with the
home directory as ``~``; the PNG files are written beside this script.
"""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

from mnemon_sm import Config
from mnemon_sm.cli.demo import run_demo
from mnemon_sm.inspector import Running, open_read_only
from mnemon_sm.testing.browser import FLAGS, chromium_path

HERE = Path(__file__).parent
SHOTS = (
    ("hot-memory", "/"),
    ("recall", "/recall?q=staging+deploys&limit=5"),
    ("spaces", "/spaces"),
    ("documents", "/documents"),
    ("agents", "/agents"),
    ("live-flows", "/flows"),
    ("flow-hot-memory-mutation", "/flows/hot_memory_mutation"),
)


def main(root: Path) -> None:
    with contextlib.redirect_stdout(io.StringIO()):
        run_demo(root)
    reader = open_read_only(root, Config(documents_active_limit=6144))  # the demo's plan
    try:
        with Running(reader) as served, sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium_path(), args=list(FLAGS))
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            for name, path in SHOTS:
                page.goto(served.url + path)
                if path.startswith("/flows/"):
                    page.wait_for_selector('body[data-diagrams="ready"]', timeout=20_000)
                page.screenshot(path=str(HERE / f"{name}.png"))
                print(HERE / f"{name}.png")
            browser.close()
    finally:
        reader.close()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(Path(sys.argv[1]).expanduser())
