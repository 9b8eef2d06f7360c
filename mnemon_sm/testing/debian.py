"""Installing a Debian package a test needs (a real PostgreSQL server, Chromium), when the
tests run as root on Debian: tests install what they use, nothing is installed by hand.

Several test processes (pytest-xdist workers) may ask at once; one file lock makes them
install one after the other, and the second finds the package there."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from filelock import FileLock

__all__ = ["ensure_installed"]


def ensure_installed(packages: tuple[str, ...], present: Callable[[], bool]) -> bool:
    """Install ``packages`` with apt-get unless ``present()`` already holds; whether it holds
    afterwards. Installs nothing when not root or not on Debian."""
    if present():
        return True
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return False
    with FileLock(str(Path(tempfile.gettempdir()) / "mnemon-sm-apt.lock"), timeout=900):
        if present():
            return True
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-qq"], check=False, env=env, capture_output=True)
        subprocess.run(
            ["apt-get", "install", "-y", "-qq", *packages],
            check=True,
            env=env,
            capture_output=True,
        )
    return present()
