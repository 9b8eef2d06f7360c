"""The one check every caller-supplied text goes through first: a ``str`` that can be stored.

A Python string may hold a lone surrogate (from ``surrogateescape`` decoding, a JSON ``\\ud800``
escape, a careless slice); it cannot be encoded as UTF-8, so it would fail deep inside a write
with ``UnicodeEncodeError``, perhaps after something was already written. Every validator of
a text field (hot entries, document titles, bodies, descriptions, session ids and source
paths, space names and descriptions, long-term contents and filters) calls :func:`text`
before anything else, so such input is ``InvalidInput`` and nothing is touched.
"""

from __future__ import annotations

from mnemon_sm.errors import InvalidInput

__all__ = ["text", "texts_within"]


def text(value: object, field: str) -> str:
    """``value`` if it is a string holding valid Unicode, else ``InvalidInput`` naming
    ``field``."""
    if not isinstance(value, str):
        raise InvalidInput(f"{field} must be a string, not {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"{field} must be valid Unicode text (no lone surrogates)") from None
    return value


def texts_within(value: object, field: str) -> None:
    """:func:`text` on every string inside ``value`` (lists, tuples and mappings walked, keys
    included): a request is refused whole before any part of it is acted on."""
    if isinstance(value, str):
        text(value, field)
    elif isinstance(value, list | tuple):
        for item in value:
            texts_within(item, field)
    elif isinstance(value, dict):
        for key, item in value.items():
            texts_within(key, field)
            texts_within(item, f"{field}.{key}" if isinstance(key, str) else field)
