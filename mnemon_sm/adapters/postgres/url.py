"""Root URLs: ``postgresql://user@host/db?root=NAME`` (``postgres://`` too)."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from mnemon_sm.errors import InvalidInput

__all__ = ["is_postgres_url", "parse_url", "redacted"]

_SCHEMES = ("postgresql://", "postgres://")
_ROOT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def is_postgres_url(text: object) -> bool:
    """Whether ``text`` names a root on PostgreSQL (else it is a directory)."""
    return isinstance(text, str) and text.startswith(_SCHEMES)


def parse_url(url: str) -> tuple[str, str]:
    """``(conninfo, root)``: the URL without its ``root`` parameter, for libpq, and the root's
    name (1-128 characters of letters, digits, ``.``, ``_`` and ``-``, starting with a letter or
    digit). Raises ``InvalidInput``."""
    if not is_postgres_url(url):
        raise InvalidInput("a PostgreSQL root URL starts with postgresql://")
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    roots = [value for key, value in query if key == "root"]
    if len(roots) != 1 or not _ROOT_NAME.fullmatch(roots[0]):
        raise InvalidInput(
            "a PostgreSQL root URL names its root once: ?root=NAME (letters, digits, '.', '_' "
            "and '-', at most 128)"
        )
    # percent-encoded, never '+' for a space: libpq decodes only the former
    rest = urlencode([(key, value) for key, value in query if key != "root"], quote_via=quote)
    return urlunsplit(parts._replace(query=rest)), roots[0]


def redacted(url: str) -> str:
    """``url`` without its password (what a root shows of where it lives)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}@{host}"))
