"""Deprecated: ``BuiltinWorkers`` is ``mnemon_sm.BuiltinWorkers`` (see
:mod:`mnemon_sm.adapters.workers.builtin`)."""

from __future__ import annotations

import warnings

from mnemon_sm.adapters.workers.builtin import BuiltinWorkers

__all__ = ["BuiltinWorkers"]

warnings.warn(
    "mnemon_sm.workers.builtin is deprecated; import BuiltinWorkers from mnemon_sm",
    DeprecationWarning,
    stacklevel=2,
)
