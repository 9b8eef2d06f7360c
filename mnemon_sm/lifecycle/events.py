"""What a host may pass with each lifecycle event, checked at the public boundary before the
event reaches the statechart: a wrong shape is ``InvalidInput`` and nothing is recorded or
persisted (a string turn, a message that is not a mapping, ``None`` for a list).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .. import inputs
from ..errors import InvalidInput

__all__ = ["count", "mappings", "session_source"]

COUNT_MAX = 2**53  # a turn or step number JSON keeps exactly


def count(value: object, field: str) -> int:
    """A turn or step number: an ``int`` (not a bool) from 0 to 2**53."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= COUNT_MAX:
        raise InvalidInput(f"{field} must be a whole number from 0 to {COUNT_MAX}, not {value!r}")
    return value


def mappings(value: object, field: str) -> Sequence[Mapping[str, Any]]:
    """A list (or tuple) of mappings with string keys, every string in them valid text."""
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise InvalidInput(f"{field} must be a list of objects")
    for index, item in enumerate(value):
        if not isinstance(item, Mapping) or not all(isinstance(k, str) for k in item):
            raise InvalidInput(f"{field}[{index}] must be an object with string keys")
        inputs.texts_within(dict(item), f"{field}[{index}]")
    return value


def session_source(value: object) -> str:
    return inputs.text(value, "session start source")
