"""The ``mnemon-sm`` command line (see :mod:`.main`)."""

from mnemon_sm.cli.main import main

__all__ = ["main"]
