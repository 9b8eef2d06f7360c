"""Properties of :func:`mnemon_sm.redact.redact`.

- A generated secret of every kind, embedded among ordinary words at a generated position,
  never survives: its random part is absent from the output (each kind on its own, and all
  kinds together in one message).
- For any text and any limit the output is one line (no whitespace but single inner spaces),
  never longer than the limit, and a fixed point: ``redact(redact(x)) == redact(x)``.
- Short lowercase words separated by single spaces come back unchanged.

The secret kinds are enumerated with ``pytest.mark.parametrize``, so every kind is exercised
on every run rather than when sampling happens to pick it.
"""

from __future__ import annotations

import re
import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mnemon_sm.redact import MESSAGE_MAX, REDACTED, redact
from mnemon_sm.testing.strategies import JS_WHITESPACE, PYTHON_ONLY_WHITESPACE

# A generated secret: the text embedded in the message and the random parts of it that must
# not appear in the output (each at least 12 characters, so none occurs there by chance).
Secret = tuple[str, list[str]]

ALNUM = string.ascii_letters + string.digits
B64URL = ALNUM + "_-"
UUID = re.compile(r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}")


def chars(alphabet: str, min_size: int = 12, max_size: int = 40) -> st.SearchStrategy[str]:
    return st.text(alphabet=alphabet, min_size=min_size, max_size=max_size)


def plain(
    prefix: st.SearchStrategy[str], body: st.SearchStrategy[str]
) -> st.SearchStrategy[Secret]:
    """A secret that is ``prefix + body``, ``body`` being the random part."""
    return st.tuples(prefix, body).map(lambda pb: (pb[0] + pb[1], [pb[1]]))


@st.composite
def key_values(draw: st.DrawFn) -> Secret:
    key = draw(
        st.sampled_from(
            [
                "api_key", "API-KEY", "apikey", "x-api-key", "access_token", "refresh_token",
                "auth_token", "token", "secret", "client_secret", "secret_key", "password",
                "passwd", "pwd", "Authorization", "aws_secret_access_key", "private_key",
                "DB_PASSWORD", "x-auth-token",
            ]
        )
    )  # fmt: skip
    quote = draw(st.sampled_from(["", '"', "'"]))
    separator = draw(st.sampled_from(["=", ":", ": ", " = "]))
    value_quote = draw(st.sampled_from(["", '"', "'"]))
    if value_quote:
        inner = string.ascii_letters + string.digits + string.punctuation + " "
        value = draw(chars(inner.replace(value_quote, "").replace("\\", "")))
        shown = value_quote + value + value_quote
    else:
        value = draw(chars(ALNUM + "!#$%()*+-./:<=>?@^_{|}~"))
        shown = value
    scheme = draw(st.sampled_from(["", "Basic ", "Bearer "])) if key == "Authorization" else ""
    return f"{quote}{key}{quote}{separator}{scheme}{shown}", [value]


@st.composite
def json_web_tokens(draw: st.DrawFn) -> Secret:
    header = draw(chars(B64URL))
    payload = draw(chars(B64URL))
    signature = draw(chars(B64URL, min_size=0))
    parts = [header, payload] + ([signature] if len(signature) >= 12 else [])
    return f"eyJ{header}.{payload}.{signature}", parts


@st.composite
def base64_tokens(draw: st.DrawFn) -> Secret:
    head = draw(chars(ALNUM + "+_-", min_size=15, max_size=30))
    tail = draw(chars(ALNUM + "+_-", min_size=15, max_size=30))
    digit = draw(st.sampled_from(string.digits))
    letter = draw(st.sampled_from(string.ascii_letters))
    token = head + digit + tail + letter
    padding = draw(st.sampled_from(["", "=", "=="]))
    return token + padding, [token]


@st.composite
def pem_keys(draw: st.DrawFn) -> Secret:
    kind = draw(st.sampled_from(["", "RSA ", "EC ", "OPENSSH "]))
    newline = draw(st.sampled_from(["\n", "\\n", "\r\n"]))
    lines = draw(st.lists(chars(ALNUM + "+/", max_size=64), min_size=1, max_size=4))
    begin, end = f"-----BEGIN {kind}PRIVATE KEY-----", f"-----END {kind}PRIVATE KEY-----"
    return newline.join([begin, *lines, end]), lines


SECRET_KINDS: list[tuple[str, st.SearchStrategy[Secret]]] = [
    (
        "sk",
        plain(st.sampled_from(["sk-", "sk-live-", "sk-proj-", "sk-ant-api03-"]), chars(B64URL)),
    ),
    (
        "bearer",
        plain(
            st.sampled_from(["Bearer ", "bearer ", "BEARER  "]),
            chars(ALNUM + "._~+/=-", max_size=60),
        ),
    ),
    ("key-value", key_values()),
    (
        "aws",
        plain(
            st.sampled_from(["AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA"]),
            chars(string.ascii_uppercase + string.digits, min_size=16, max_size=16),
        ),
    ),
    ("github", plain(st.sampled_from(["ghp_", "gho_", "ghu_", "ghs_", "ghr_"]), chars(ALNUM, 20))),
    (
        "slack",
        plain(st.sampled_from(["xoxa-", "xoxb-", "xoxp-", "xoxr-", "xoxs-"]), chars(ALNUM + "-")),
    ),
    ("jwt", json_web_tokens()),
    ("hex", plain(st.just(""), chars("0123456789abcdefABCDEF", min_size=32, max_size=64))),
    ("base64", base64_tokens().filter(lambda secret: not UUID.search(secret[0]))),
    (
        "url-password",
        plain(
            st.sampled_from(["postgresql://admin:", "redis://:", "https://bot:"]),
            chars(ALNUM + "!$%*()+.~-"),
        ).map(lambda secret: (secret[0] + "@db.internal:5432/app", secret[1])),
    ),
    ("pem", pem_keys()),
]
KINDS = [pytest.param(strategy, id=name) for name, strategy in SECRET_KINDS]

WORDS = st.lists(st.text(alphabet=string.ascii_lowercase, min_size=1, max_size=7), max_size=20)


def assert_gone(out: str, parts: list[str]) -> None:
    for part in parts:
        assert part not in out, f"{part!r} survived in {out!r}"


@pytest.mark.parametrize("secrets", KINDS)
@given(data=st.data())
def test_an_embedded_secret_never_survives(
    secrets: st.SearchStrategy[Secret], data: st.DataObject
) -> None:
    words = data.draw(WORDS, label="words")
    secret, parts = data.draw(secrets, label="secret")
    at = data.draw(st.integers(0, len(words)), label="position")
    out = redact(" ".join([*words[:at], secret, *words[at:]]))
    assert_gone(out, parts)
    assert REDACTED in out


@given(data=st.data())
def test_secrets_of_every_kind_together_never_survive(data: st.DataObject) -> None:
    pieces = data.draw(WORDS, label="words")
    secrets = [data.draw(strategy, label=name) for name, strategy in SECRET_KINDS]
    for secret, _ in secrets:
        pieces.insert(data.draw(st.integers(0, len(pieces))), secret)
    out = redact(" ".join(pieces), limit=100_000)
    for _, parts in secrets:
        assert_gone(out, parts)


def assert_one_bounded_fixed_point(out: str, limit: int) -> None:
    assert len(out) <= limit
    assert "\n" not in out and "\t" not in out and "  " not in out
    assert " ".join(out.split()) == out
    assert redact(out, limit) == out


@given(st.text(), st.one_of(st.integers(1, 40), st.just(MESSAGE_MAX)))
def test_any_text_gives_one_short_line_that_is_a_fixed_point(text: str, limit: int) -> None:
    assert_one_bounded_fixed_point(redact(text, limit), limit)


# Pieces that meet at the edges of the patterns: markers (whole and cut), the ellipsis,
# UUIDs, prefixes of every kind of secret, separators, quotes and every kind of whitespace.
TRICKY = st.lists(
    st.one_of(
        st.sampled_from(
            [
                REDACTED, "[reda", "…", "123e4567-e89b-12d3-a456-426614174000", "sk-", "ghp_",
                "xoxb-", "eyJhbGciOiJIUzI1NiJ9.", "AKIA", "Bearer ", "Authorization: ",
                "Basic ", "token=", "password: ", '"', "'", "://u:", "@", "-", "_", "=", "/",
                "\\n", "-----BEGIN PRIVATE KEY-----", "deadbeef", "Z9", "abcdefgh",
            ]
        ),
        st.sampled_from(JS_WHITESPACE + PYTHON_ONLY_WHITESPACE),
        st.text(max_size=4),
    ),
    max_size=60,
).map("".join)  # fmt: skip


@given(TRICKY, st.one_of(st.integers(1, 80), st.just(MESSAGE_MAX)))
def test_text_at_the_pattern_edges_gives_a_bounded_fixed_point(text: str, limit: int) -> None:
    assert_one_bounded_fixed_point(redact(text, limit), limit)


@given(WORDS.map(" ".join))
def test_short_lowercase_words_come_back_unchanged(text: str) -> None:
    assert redact(text) == text


@given(
    st.lists(
        st.sampled_from(["sk-", "key", "=", ":", "a" * 31, "b", " ", "\n", "://"])
        | st.text(max_size=12),
        max_size=8,
    ).map("".join)
)
def test_the_shortcut_for_text_without_secret_shapes_changes_nothing(text: str) -> None:
    from mnemon_sm.redact import _scrub, _scrub_fully

    assert _scrub(text) == _scrub_fully(text)
