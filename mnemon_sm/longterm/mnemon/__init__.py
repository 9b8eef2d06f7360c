"""The ``LongTermStore`` adapter over the real Mnemon CLI (see :mod:`.store`)."""

from .process import KILL_GRACE_S, ProcessOutput, run_process
from .store import MnemonCliStore
from .viz import VizGraph, parse_viz_html

__all__ = [
    "KILL_GRACE_S",
    "MnemonCliStore",
    "ProcessOutput",
    "VizGraph",
    "parse_viz_html",
    "run_process",
]
