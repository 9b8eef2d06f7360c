"""Secret redaction for the messages the library records: worker and tool failures.

A failure message is built from whatever an exception, a provider or a tool said, and it ends
up in status files, logs and the agent's context, so :func:`redact` turns any value into one
short line that carries no credential. It converts the value to text (never raising, whatever
its ``__str__`` does), replaces every recognised secret with ``[redacted]`` while keeping what
makes the message readable (the key of a ``key=value`` pair, the ``Bearer`` word, the quotes
around a value), collapses whitespace to single spaces and caps the result at ``limit``
characters, the last one ``…``.

The specific shapes go first (PEM private keys, JSON Web Tokens, ``sk-`` keys, GitHub, Slack
and AWS tokens, URL passwords, ``Bearer`` tokens, ``key=value`` pairs), the two shape-free
catch-alls last: long hex runs and long base64 runs. The catch-alls never touch a UUID
(8-4-4-4-12 hex): ids of documents and memory spaces are UUIDs and must stay readable (a UUID
given as the value of a secret key, ``token=<uuid>``, is still redacted). Every pattern is
precompiled and starts at a fixed prefix or at the start of a token (a look-behind), so no
pattern backtracks over more than one token and the work grows linearly with the text.

Redaction runs on the whole text before the cap, so a secret is never cut into a prefix that
no longer looks like one. Redaction and collapsing repeat until nothing changes (trimming can
expose a value), the cap never ends inside a ``[redacted]`` marker or a UUID (it cuts just
before them), and a cut that leaves a new secret shape is redacted again, so the result is a
fixed point: ``redact(redact(x)) == redact(x)``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from mnemon_sm.text import WHITESPACE, collapse_whitespace

__all__ = ["MESSAGE_MAX", "REDACTED", "redact"]

REDACTED = "[redacted]"
MESSAGE_MAX = 500

_ELLIPSIS = "\u2026"
# Redaction and collapsing converge in two or three passes; the bound only guards the loop.
_MAX_PASSES = 16

# The JavaScript whitespace class collapse_whitespace uses, plus the characters only Python
# calls whitespace (U+001C..U+001F, U+0085, line breaks for str.splitlines): those become
# spaces too, so the result is one line however it is split.
_EXTRA_SPACE = "\x1c-\x1f\x85"
_SPACE = WHITESPACE + _EXTRA_SPACE
_EXTRA_SPACE_RUN = re.compile(f"[{_EXTRA_SPACE}]+")

# -- the specific shapes -------------------------------------------------------------------

# A PEM private key: the header stays, the base64 body (with real or escaped newlines) goes.
_PEM = re.compile(
    rf"(-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----)[A-Za-z0-9+/=\\{_SPACE}]*[A-Za-z0-9+/=]"
)
# A JSON Web Token: a base64url JSON header (``{"`` encodes as ``eyJ``), payload, signature.
_JWT = re.compile(r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]*")
# OpenAI and Anthropic keys (sk-live-..., sk-proj-..., sk-ant-api03-...), not "task-...".
_SK = re.compile(r"(?<![A-Za-z0-9])sk-[A-Za-z0-9_-]{8,}")
# GitHub tokens (classic ghp_/gho_/ghu_/ghs_/ghr_ and fine-grained github_pat_).
_GITHUB = re.compile(r"gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{22,}")
_SLACK = re.compile(r"xox[abprs]-[A-Za-z0-9-]{10,}")
_AWS_KEY_ID = re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b")
# The password of a URL's user info: postgres://user:PASSWORD@host.
_URL_PASSWORD = re.compile(rf"(://[^{_SPACE}/:@]*:)[^{_SPACE}/@]+(?=@)")
_BEARER = re.compile(rf"\b((?i:bearer)[{_SPACE}]+)[A-Za-z0-9._~+/=-]{{8,}}")

# key=value and "key": "value". The key may be quoted and carry a prefix (x-api-key,
# DB_PASSWORD, PGPASSWORD). An auth scheme before the value stays (Authorization: Basic ...);
# the value is quoted (backslash escapes allowed), an unclosed quote and a bare run, or a bare
# run. A bare run neither starts nor ends with the cap's ellipsis and a scheme needs a value
# after it, so a capped "password=…" or "Authorization: Bearer …" is left as it is.
_KEY_NAMES = "|".join(
    (
        r"api[_-]?key",
        r"access[_-]?token",
        r"refresh[_-]?token",
        r"auth[_-]?token",
        r"token",
        r"client[_-]?secret",
        r"secret[_-]?key",
        r"secret",
        r"password",
        r"passwd",
        r"pwd",
        r"authorization",
        r"aws[_-]?secret[_-]?access[_-]?key",
        r"private[_-]?key",
    )
)
_SCHEMES = "basic|bearer|digest|token|negotiate|ntlm|apikey|oauth|dpop|hoba|aws4-hmac-sha256"
_STOP = f"{_SPACE}'\",;&"
_BARE = f"[^{_STOP}{_ELLIPSIS}](?:[^{_STOP}]*[^{_STOP}{_ELLIPSIS}])?"
_KEY_VALUE = re.compile(
    r"(?<![A-Za-z0-9_-])"
    rf"(?P<key>(?P<q>[\"']?)(?i:[A-Za-z0-9_-]*?(?:{_KEY_NAMES}))(?P=q)"
    rf"[{_SPACE}]*[:=][{_SPACE}]*)"
    rf"(?P<scheme>(?i:{_SCHEMES})[{_SPACE}]+(?=[^{_SPACE}{_ELLIPSIS}]))?"
    r"(?:"
    r"\"(?P<dq>(?:[^\"\\]|\\.)+)\""
    r"|'(?P<sq>(?:[^'\\]|\\.)+)'"
    rf"|(?P<open>[\"']){_BARE}"
    rf"|(?(scheme)|(?!(?i:{_SCHEMES})[{_SPACE}])){_BARE}"
    r")",
    re.DOTALL,
)

# -- the catch-alls ------------------------------------------------------------------------

_HEX = re.compile(r"(?<![A-Za-z0-9_])[0-9A-Fa-f]{32,}(?![A-Za-z0-9_])")
# A maximal run of base64/base64url characters ('/' excluded: paths must survive) with its
# padding; _base64_run decides which parts of it are tokens.
_BASE64_RUN = re.compile(
    r"(?<![A-Za-z0-9+_-])[A-Za-z0-9+_-]{32,}(?![A-Za-z0-9+_-])(?:={1,2}(?![A-Za-z0-9+_=-]))?"
)
_UUID = re.compile(
    r"(?<![0-9A-Fa-f])[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}"
    r"(?![0-9A-Fa-f])"
)
# A UUID with the separators around it (doc-<uuid>_v2): the part of a run that is kept.
_UUID_SPAN = re.compile(rf"[_-]*{_UUID.pattern}[_-]*")
_DIGIT = re.compile(r"[0-9]")
_LETTER = re.compile(r"[A-Za-z]")
_TOKEN_MIN = 32


def _key_value(match: re.Match[str]) -> str:
    """Keep the key, the separator, the quotes and the auth scheme; redact the value."""
    kept = match["key"] + (match["scheme"] or "")
    if match["dq"] is not None:
        return f'{kept}"{REDACTED}"'
    if match["sq"] is not None:
        return f"{kept}'{REDACTED}'"
    return kept + (match["open"] or "") + REDACTED


def _base64_piece(piece: str) -> str:
    """``piece`` (part of a run, outside UUIDs) redacted if it is a token, else unchanged."""
    if len(piece.rstrip("=")) >= _TOKEN_MIN and _DIGIT.search(piece) and _LETTER.search(piece):
        return REDACTED
    return piece


def _base64_run(match: re.Match[str]) -> str:
    """Redact the parts of a base64 run outside its UUIDs that are long tokens themselves."""
    run = match.group()
    kept: list[str] = []
    start = 0
    for uuid in _UUID_SPAN.finditer(run):
        kept += (_base64_piece(run[start : uuid.start()]), uuid.group())
        start = uuid.end()
    kept.append(_base64_piece(run[start:]))
    return "".join(kept)


_RULES: tuple[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]], ...] = (
    (_PEM, rf"\g<1>{REDACTED}"),
    (_JWT, REDACTED),
    (_SK, REDACTED),
    (_GITHUB, REDACTED),
    (_SLACK, REDACTED),
    (_AWS_KEY_ID, REDACTED),
    (_URL_PASSWORD, rf"\g<1>{REDACTED}"),
    (_BEARER, rf"\g<1>{REDACTED}"),
    (_KEY_VALUE, _key_value),
    (_HEX, REDACTED),
    (_BASE64_RUN, _base64_run),
)


def _as_text(value: object) -> str:
    """``value`` as text; a ``__str__`` that raises yields ``<TypeName>``."""
    if isinstance(value, str):
        return str.__str__(value)  # a plain str, whatever a subclass overrides
    try:
        return str(value)
    except Exception:
        return f"<{type(value).__name__}>"


# Every secret shape above contains one of these; text without any is only collapsed (the
# common case of a worker's summary), which gives the same result much faster.
_SUSPECT = re.compile(
    r"-----BEGIN|eyJ|sk-|gh[pousr]_|github_pat_|xox[abprs]-|AKIA|ASIA|AGPA|AIDA|AROA|ANPA"
    r"|ANVA|AIPA|://|(?i:bearer|key|token|secret|passw|pwd|authorization)|[A-Za-z0-9+_-]{32}"
)


def _scrub(text: str) -> str:
    """Redact and collapse whitespace until nothing changes (a replacement can expose more)."""
    if _SUSPECT.search(text) is None:
        return collapse_whitespace(_EXTRA_SPACE_RUN.sub(" ", text))
    return _scrub_fully(text)


def _scrub_fully(text: str) -> str:
    """:func:`_scrub` without its shortcut (every rule, every pass)."""
    for _ in range(_MAX_PASSES):
        done = text
        for pattern, replacement in _RULES:
            done = pattern.sub(replacement, done)
        done = collapse_whitespace(_EXTRA_SPACE_RUN.sub(" ", done))
        if done == text:
            break
        text = done
    return text


def _cut(text: str, limit: int) -> str:
    """The first ``limit - 1`` characters and ``…``, cut before a marker or UUID it would split."""
    end = limit - 1
    marker = text.rfind(REDACTED, max(0, end - len(REDACTED) + 1), end + len(REDACTED) - 1)
    if marker != -1 and marker < end:
        end = marker
    for uuid in _UUID.finditer(text, max(0, end - 35)):
        if uuid.start() >= end:
            break
        if uuid.end() > end:
            end = uuid.start()
            break
    return text[:end] + _ELLIPSIS


def redact(value: object, limit: int = MESSAGE_MAX) -> str:
    """Collapse whitespace, redact secrets, cap at ``limit`` characters.

    ``value`` is used as is if it is a ``str``, else as ``str(value)`` (``<TypeName>`` if that
    raises). Every secret is replaced by :data:`REDACTED` before the cap, whitespace runs become
    one space, and a result longer than ``limit`` keeps its first ``limit - 1`` characters
    (fewer when the cut would split a marker or a UUID) followed by ``…``. Idempotent.

    Raises:
        ValueError: ``limit`` is less than 1 (the only exception raised).
    """
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    text = _scrub(_as_text(value))
    for _ in range(_MAX_PASSES):
        if len(text) <= limit:
            return text
        text = _scrub(_cut(text, limit))
    return text if len(text) <= limit else _cut(text, limit)
