"""A Files port whose renames fail on demand: the failure an atomic replacement meets on a full
or failing disk, after its temporary file was written.

The per-flow port tests use it to reach the clean-up call such a failure makes (the temporary
file is removed, ``files.remove``) in the state the replacement runs in. Which renames fail is
a predicate of the rename's target, set by the test for the step it drives; a failing rename
raises ``StorageError`` and has no effect (it is not recorded: the inner port never sees it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mnemon_sm.errors import StorageError
from mnemon_sm.ports import Files

__all__ = ["FailingRenames"]


class FailingRenames:
    """Wraps a Files port; ``rename`` fails while ``fails(target)`` holds (never, at first)."""

    def __init__(self, inner: Files) -> None:
        self.inner = inner
        self.fails: Callable[[str], bool] = lambda target: False

    def fail_next(self, path: str) -> list[str]:
        """Make the next rename onto ``path`` fail, and only that one; the list returned holds
        ``path`` once it did."""
        failed: list[str] = []

        def fails(target: str) -> bool:
            if target != path or failed:
                return False
            failed.append(target)
            return True

        self.fails = fails
        return failed

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def rename(self, source: str, target: str) -> None:
        if self.fails(target):
            raise StorageError(f"injected failure: cannot rename onto {target}")
        self.inner.rename(source, target)
