"""Text rules shared by every flow: whitespace, sizes, timestamps.

Whitespace is the JavaScript class (the one the reference implementation trims and collapses
with), not Python's: it includes U+FEFF and excludes U+001C..U+001F and U+0085. Sizes are UTF-8
bytes for budgets and UTF-16 code units for "characters", as in the reference. Timestamps are
ISO-8601 UTC with milliseconds and ``Z``.
"""

from __future__ import annotations

import re
import time

__all__ = [
    "BLOCK_TAGS",
    "WHITESPACE",
    "collapse_whitespace",
    "iso_ms",
    "quote_data",
    "quote_json",
    "strip_whitespace",
    "utf8_len",
    "utf16_len",
    "words",
]

# The JavaScript whitespace class (String.prototype.trim and \s).
WHITESPACE = "\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
_RUNS = re.compile(f"[{WHITESPACE}]+")
# The same class as plain characters, for str.strip (linear, unlike an anchored regex).
_STRIP = (
    "".join(c for c in map(chr, range(0x3001)) if re.fullmatch(f"[{WHITESPACE}]", c)) + "\ufeff"
)


_WORD = re.compile(r"[^\W_]+", re.UNICODE)
# Words too common to say anything about a topic (for routing by name and description).
_STOP_WORDS = (
    "a an and are as at be but by can do does for from has have how i in is it its me my of "
    "on or our so that the their them there these this to us was we were what when where "
    "which who why will with you your"
)
_STOP = frozenset(_STOP_WORDS.split())


def words(text: str) -> frozenset[str]:
    """Lowercased letter/digit runs of ``text`` minus common English stop words."""
    return frozenset(w for w in _WORD.findall(text.lower()) if w not in _STOP)


#: The tags of every data block the library writes into model input (the per-turn context and
#: the worker prompts). Data quoted with :func:`quote_data` can neither open nor close one.
BLOCK_TAGS = ("runtime-memory-file", "runtime-memory-snapshot")
_BLOCK_TAG = re.compile(rf"<(?=[{WHITESPACE}]*/?[{WHITESPACE}]*(?:{'|'.join(BLOCK_TAGS)}))", re.I)


def quote_data(text: str) -> str:
    """Make untrusted text safe inside a data block: every ``<`` that would start one of the
    :data:`BLOCK_TAGS` (opening or closing, any case, with spaces) becomes ``<\\``.

    Blocks are delimited by their tags alone, so nothing else is touched: ``{{``, ``}}``,
    ``${{ x }}``, ``{%`` and ``<%`` reach the model byte for byte, and text copied out of a
    block matches the stored text unless it held a block tag. The text is data, never a
    template: a host must not run it through a template engine."""
    if "<" not in text:
        return text
    return _BLOCK_TAG.sub("<\\\\", text)


def quote_json(text: str) -> str:
    """Make JSON text (from ``json.dumps``) safe as prompt data, with the same meaning: every
    ``<`` becomes ``\\u003c`` (it only ever occurs inside JSON strings), so no tag appears in
    it. ``{{`` needs no escaping: it opens no block, the prompt is data and never a template,
    and a JSON decoder gives back the exact string either way."""
    return text.replace("<", "\\u003c")


def collapse_whitespace(value: str) -> str:
    """Trim JavaScript whitespace and replace every inner run of it with one ASCII space.

    Quick path: every JavaScript whitespace character but the ASCII space is unprintable for
    Python (a separator or a control character), so printable text without two spaces in a
    row has nothing to collapse, only its ends to trim."""
    if value.isprintable() and "  " not in value:
        return value.strip(" ")
    return _RUNS.sub(" ", value).strip(" ")


def strip_whitespace(value: str) -> str:
    """Trim JavaScript whitespace from both ends, leaving inner runs alone."""
    return value.strip(_STRIP)


def utf8_len(value: str) -> int:
    """Length in UTF-8 bytes (raises UnicodeEncodeError on lone surrogates)."""
    return len(value.encode("utf-8"))


def utf16_len(value: str) -> int:
    """Length in UTF-16 code units, the JavaScript ``string.length``."""
    return len(value.encode("utf-16-le", "surrogatepass")) // 2


_SECOND: list[tuple[int, str]] = [(-1, "")]  # the last second formatted, and its text


def iso_ms(epoch_ms: int) -> str:
    """Format milliseconds since the epoch as ``YYYY-MM-DDTHH:MM:SS.mmmZ`` (UTC)."""
    seconds, millis = divmod(epoch_ms, 1000)
    last, text = _SECOND[0]  # one read: another thread may replace it meanwhile
    if seconds != last:
        t = time.gmtime(seconds)
        text = (
            f"{t.tm_year:04d}-{t.tm_mon:02d}-{t.tm_mday:02d}"
            f"T{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}"
        )
        _SECOND[0] = (seconds, text)
    return f"{text}.{millis:03d}Z"
