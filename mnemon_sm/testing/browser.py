"""Headless Chromium for the inspector's browser tests: Debian's ``chromium`` package (installed
by the tests when missing, see :mod:`.debian`), driven by Playwright with that executable, so
no browser is downloaded. The flags keep it off the network (this machine may have none) and
away from any profile of the user.

:data:`ACCESSIBILITY_JS` is the accessibility check the tests run in each page: every form
control has a label, the page has a language, one ``h1`` and a ``main``, every image has an
alternative, tables have header cells, and every visible text reaches the WCAG AA contrast
against the background it is drawn on (4.5:1, 3:1 for large text)."""

from __future__ import annotations

import shutil
from pathlib import Path

from mnemon_sm.testing.debian import ensure_installed

__all__ = ["ACCESSIBILITY_JS", "FLAGS", "chromium_path"]

FLAGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
)


def _found() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def chromium_path() -> str:
    """The Chromium executable; installs Debian's ``chromium`` when missing (as root).
    Raises RuntimeError when there is none."""
    ensure_installed(("chromium",), lambda: _found() is not None)
    found = _found()
    if found is None:
        raise RuntimeError("Chromium not found: install Debian's chromium package")
    return found


#: The accessibility check (a JavaScript function returning ``{problems, checked}``).
ACCESSIBILITY_JS = "".join(
    line
    for line in (Path(__file__).parent / "accessibility.js").open(encoding="utf-8")
    if not line.startswith("//")
)
