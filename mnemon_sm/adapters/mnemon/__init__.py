"""The ``LongTermStore`` adapter over the real Mnemon CLI (see :mod:`.store`)."""

from mnemon_sm.adapters.mnemon.process import KILL_GRACE_S, ProcessOutput, run_process
from mnemon_sm.adapters.mnemon.store import MnemonCliStore
from mnemon_sm.adapters.mnemon.viz import VizGraph, parse_viz_html

__all__ = [
    "KILL_GRACE_S",
    "MnemonCliStore",
    "ProcessOutput",
    "VizGraph",
    "parse_viz_html",
    "run_process",
]
