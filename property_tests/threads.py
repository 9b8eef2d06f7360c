"""Drawing from Hypothesis inside a worker, which runs on a thread of its own.

Hypothesis keeps the test's build context in a thread-local, so ``data.draw`` on a worker's
thread fails ("Cannot make notes outside of a test"). :class:`WorkerData` captures the context
on the test's thread and draws under it on any thread. This is safe because the test's thread
is blocked waiting for the worker while the worker draws: the data is never used by two
threads at once.
"""

from __future__ import annotations

from typing import Any, TypeVar

from hypothesis import strategies as st
from hypothesis.control import _current_build_context, current_build_context

T = TypeVar("T")


class WorkerData:
    """``st.data()`` usable from a worker's thread."""

    def __init__(self, data: st.DataObject) -> None:
        self._data, self._context = data, current_build_context()

    def draw(self, strategy: st.SearchStrategy[T], label: Any = None) -> T:
        with _current_build_context.with_value(self._context):
            return self._data.draw(strategy, label=label)
