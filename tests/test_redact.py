"""Secret redaction at its edges: every pattern, what must survive, whitespace, the cap.

Each positive case gives the exact expected message, so a pattern that stops matching (or
starts swallowing its neighbours) fails by name. The negative cases are the ids, timestamps
and paths that failure messages are full of and that must stay readable.
"""

from __future__ import annotations

import pytest

from mnemon_sm.redact import MESSAGE_MAX, REDACTED, redact

R = REDACTED
UUID = "123e4567-e89b-12d3-a456-426614174000"
JWT_SIGNED = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
    "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
JWT_UNSIGNED = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJib2IifQ."

REDACTED_CASES = [
    # sk- keys (OpenAI, Anthropic)
    pytest.param(
        "Error code: 401 - {'error': {'message': 'Incorrect API key provided: "
        "sk-live-abcdef1234567890. You can find your API key at "
        "https://platform.openai.com/account/api-keys.'}}",
        "Error code: 401 - {'error': {'message': 'Incorrect API key provided: "
        f"{R}. You can find your API key at https://platform.openai.com/account/api-keys.'}}}}",
        id="sk-provider-error",
    ),
    pytest.param("key sk-proj-AbCdEf0123456789_xyz rejected", f"key {R} rejected", id="sk-proj"),
    pytest.param(
        "anthropic rejected (sk-ant-api03-AbC_dEf-0123456789)",
        f"anthropic rejected ({R})",
        id="sk-ant",
    ),
    # Bearer tokens
    pytest.param(
        'curl -H "Authorization: Bearer abc.DEF-123_xyz~+/="',
        f'curl -H "Authorization: Bearer {R}"',
        id="bearer-header",
    ),
    pytest.param(
        "sent bearer   abcdefgh12345678 upstream", f"sent bearer {R} upstream", id="bearer-lower"
    ),
    pytest.param("BEARER ZXhhbXBsZS10b2tlbg== denied", f"BEARER {R} denied", id="bearer-upper"),
    # key=value pairs
    pytest.param("api_key=abc123", f"api_key={R}", id="kv-api_key"),
    pytest.param('{"password": "hunter2"}', f'{{"password": "{R}"}}', id="kv-json-password"),
    pytest.param(
        "{'access_token': 'ya29.a0Af', 'refresh_token': '1//0gx'}",
        f"{{'access_token': '{R}', 'refresh_token': '{R}'}}",
        id="kv-python-repr",
    ),
    pytest.param("x-api-key: k-123, retrying", f"x-api-key: {R}, retrying", id="kv-x-api-key"),
    pytest.param(
        "GET /v1/items?apikey=abc&format=json failed",
        f"GET /v1/items?apikey={R}&format=json failed",
        id="kv-query-apikey",
    ),
    pytest.param(
        "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        f"AWS_SECRET_ACCESS_KEY={R}",
        id="kv-aws-secret",
    ),
    pytest.param('client_secret = "s3 cr3t"', f'client_secret = "{R}"', id="kv-client-secret"),
    pytest.param("secret_key:xyz; SECRET=abc", f"secret_key:{R}; SECRET={R}", id="kv-secret"),
    pytest.param("PGPASSWORD=hunter2 psql", f"PGPASSWORD={R} psql", id="kv-prefixed-password"),
    pytest.param(
        "passwd: 'p w' pwd=/root/x auth_token=t0k",
        f"passwd: '{R}' pwd={R} auth_token={R}",
        id="kv-passwd-pwd",
    ),
    pytest.param("token: 'abc\\'def' end", f"token: '{R}' end", id="kv-escaped-quote"),
    pytest.param(
        "private_key=abc&private-key=def", f"private_key={R}&private-key={R}", id="kv-pk"
    ),
    pytest.param(
        "Authorization: Basic dXNlcjpwYXNz", f"Authorization: Basic {R}", id="kv-auth-basic"
    ),
    pytest.param("Authorization: Bearer short", f"Authorization: Bearer {R}", id="kv-auth-bearer"),
    pytest.param("authorization=dXNlcjpwYXNz next", f"authorization={R} next", id="kv-auth-bare"),
    pytest.param('"token": "unterminated', f'"token": "{R}', id="kv-unclosed-quote"),
    # A scheme with nothing after it is the value; this one shows only once the trailing
    # newline is trimmed, so redaction and collapsing must repeat until nothing changes.
    pytest.param("Authorization: Basic\n", f"Authorization: {R}", id="kv-scheme-at-end"),
    # AWS access key ids
    pytest.param(
        "aws_access_key_id = AKIAIOSFODNN7EXAMPLE", f"aws_access_key_id = {R}", id="aws-akia"
    ),
    pytest.param("ASIAY34FZKBOKMUTVV7A:session", f"{R}:session", id="aws-asia"),
    # GitHub and Slack tokens (the short ones are too short for the base64 catch-all)
    pytest.param("ghs_abcdefghij0123456789AB expired", f"{R} expired", id="github-ghs-short"),
    pytest.param(
        "push failed for ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        f"push failed for {R}",
        id="github-ghp",
    ),
    pytest.param(
        "token gho_16C7e42F292c6912E7710c838347Ae178B4a, "
        "pat github_pat_11ABCDEFG0123456789_abcdef",
        f"token {R}, pat {R}",
        id="github-gho-pat",
    ),
    pytest.param("slack xoxb-1234567890-0987654321-AbCdEfGhIjKl!", f"slack {R}!", id="slack-xoxb"),
    pytest.param("(xoxp-9876543210-abc)", f"({R})", id="slack-xoxp"),
    # JSON Web Tokens
    pytest.param(f"jwt {JWT_SIGNED} expired", f"jwt {R} expired", id="jwt-signed"),
    pytest.param(f"[{JWT_UNSIGNED}]", f"[{R}]", id="jwt-unsigned"),
    # long hex runs
    pytest.param(
        "sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 done",
        f"sha256 {R} done",
        id="hex-sha256",
    ),
    pytest.param(
        "secret da39a3ee5e6b4b0d3255bfef95601890afd80709.", f"secret {R}.", id="hex-sha1"
    ),
    pytest.param(
        "deadbeefcafebabedeadbeefcafebabe/12345678901234567890123456789012",
        f"{R}/{R}",
        id="hex-letters-or-digits-only",
    ),
    # long base64 / base64url runs
    pytest.param(
        "b64 dGhpcyBpcyBhIHNlY3JldCB0b2tlbiB2YWx1ZTEyMw== end", f"b64 {R} end", id="b64-padded"
    ),
    pytest.param("url aB3_xY9-Qw8zLm4Np7Rt2Vk5Hj6Gf1Ds0Ae.", f"url {R}.", id="b64-url"),
    pytest.param(
        f"{UUID}-aB3_xY9-Qw8zLm4Np7Rt2Vk5Hj6Gf1Ds0Ae", f"{UUID}-{R}", id="b64-beside-uuid"
    ),
    # passwords in URLs
    pytest.param(
        "could not connect to postgresql://admin:hunter2@db:5432/app",
        f"could not connect to postgresql://admin:{R}@db:5432/app",
        id="url-password",
    ),
    pytest.param("redis://:s3cret@cache:6379/0", f"redis://:{R}@cache:6379/0", id="url-no-user"),
    # PEM private keys
    pytest.param(
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8Pbn\n"
        "Gy0AHB7MnKd+9sa/x1\n-----END RSA PRIVATE KEY-----",
        f"-----BEGIN RSA PRIVATE KEY-----{R} -----END RSA PRIVATE KEY-----",
        id="pem-newlines",
    ),
    pytest.param(
        "load failed: '-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADAN/Bgkq+hkiG9w\\n"
        "-----END PRIVATE KEY-----\\n'",
        f"load failed: '-----BEGIN PRIVATE KEY-----{R}-----END PRIVATE KEY-----\\n'",
        id="pem-escaped",
    ),
]

UNCHANGED_CASES = [
    pytest.param("The worker stopped after the lease expired; retry later.", id="prose"),
    pytest.param("started 2026-12-03T10:00:00.000Z, ended 2026-12-03T10:05:00.000Z", id="iso"),
    pytest.param(f"document {UUID} not found", id="uuid"),
    pytest.param("space 0F8FAD5B-D9CB-469F-A165-70867728950E archived", id="uuid-upper"),
    pytest.param(f"task-{UUID} and mem_{UUID}_v2", id="uuid-prefixed"),
    pytest.param(f"{UUID}-{UUID}", id="uuid-pair"),
    pytest.param("/root/project/documents/archived/Runbook-1234abcd.md", id="path"),
    pytest.param("C:\\Users\\bob\\AppData\\Local\\mnemon\\memories.json", id="windows-path"),
    pytest.param("pending-space-1 mnt-1786000000000-abcdef12", id="short-ids"),
    pytest.param("some_long_snake_case_identifier_without_any_digits_at_all", id="snake-case"),
    pytest.param("max_tokens: 4096, token_count=12, tokenizer: cl100k", id="token-lookalikes"),
    pytest.param("the risk-assessment-report and mask-12345678", id="sk-inside-words"),
    pytest.param("Bearer token missing", id="bearer-short"),
    pytest.param("http://localhost:8080/path?page=2", id="url-without-password"),
    pytest.param("commit abc1234 on v1.2.3, see bob@example.com", id="short-hex-email"),
    pytest.param("", id="empty"),
]


@pytest.mark.parametrize(("text", "expected"), REDACTED_CASES)
def test_secrets_are_redacted(text: str, expected: str) -> None:
    assert redact(text) == expected


@pytest.mark.parametrize(("text", "expected"), REDACTED_CASES)
def test_redaction_is_idempotent(text: str, expected: str) -> None:
    assert redact(redact(text)) == redact(text)


@pytest.mark.parametrize("text", UNCHANGED_CASES)
def test_ordinary_text_is_unchanged(text: str) -> None:
    assert redact(text) == text


def test_the_credential_of_an_authorization_header_never_survives() -> None:
    for scheme, credential in [("Bearer", "x" * 20), ("Basic", "dXNlcjpw"), ("Token", "t0k3n")]:
        out = redact(f"Authorization: {scheme} {credential}")
        assert credential not in out and out == f"Authorization: {scheme} {R}"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("line one\nline two\r\nline three", "line one line two line three"),
        ("\tcol\t\tcol\t", "col col"),
        ("para\u2028graph\u2029end", "para graph end"),
        ("nbsp\u00a0ideo\u3000bom\ufeffend", "nbsp ideo bom end"),
        ("python-only\x85next\x1cline", "python-only next line"),
        ("  many    spaces  ", "many spaces"),
        ("token:\n\tabc\ndone", f"token: {R} done"),
    ],
)
def test_whitespace_collapses_to_single_spaces(text: str, expected: str) -> None:
    out = redact(text)
    assert out == expected and " ".join(out.split()) == out


def test_long_text_is_capped_at_exactly_the_limit() -> None:
    out = redact("word " * 200)
    assert len(out) == MESSAGE_MAX and out.endswith("…") and out[:-1] == ("word " * 100)[:499]


def test_text_at_the_limit_is_not_capped() -> None:
    text = "w" * MESSAGE_MAX
    assert redact(text) == text


def test_a_secret_straddling_the_cap_is_redacted_and_leaves_no_prefix() -> None:
    text = "x" * 495 + " sk-live-abcdef1234567890 and more"
    out = redact(text)
    assert len(out) <= MESSAGE_MAX and out.endswith("…")
    assert "sk-" not in out and "live" not in out and "abcdef" not in out
    assert out == "x" * 495 + " …"


def test_a_secret_before_the_cap_keeps_its_marker() -> None:
    out = redact("x" * 480 + " sk-live-abcdef1234567890" + " tail" * 50)
    assert len(out) == MESSAGE_MAX and out.startswith("x" * 480 + f" {R} tail")


def test_the_cap_does_not_split_a_uuid() -> None:
    out = redact("y" * 480 + f" {UUID} tail")
    assert out == "y" * 480 + " …"


def test_a_cut_that_makes_a_secret_shape_is_redacted_again() -> None:
    # 42 hex letters then "g" is no hex secret; its first 38 letters before "…" are one.
    out = redact("x" * 460 + " " + "abcdef" * 7 + "g tail")
    assert out == "x" * 460 + f" {R}…" and redact(out) == out


@pytest.mark.parametrize(
    ("limit", "expected"), [(1, "…"), (2, "h…"), (5, "hell…"), (11, "hello world")]
)
def test_small_limits(limit: int, expected: str) -> None:
    assert redact("hello world", limit) == expected


def test_a_small_limit_never_shows_part_of_a_marker() -> None:
    assert redact("password=hunter2", 12) == "password=…"
    assert redact("password=hunter2", 19) == f"password={R}"


@pytest.mark.parametrize("limit", [0, -1, -500])
def test_a_limit_below_one_raises(limit: int) -> None:
    with pytest.raises(ValueError, match="limit"):
        redact("text", limit)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (12345, "12345"),
        (None, "None"),
        (ValueError("bad token=abc\nretry"), f"bad token={R} retry"),
        ({"api_key": "abc"}, f"{{'api_key': '{R}'}}"),
        (b"password=x", f"b'password={R}'"),
    ],
)
def test_non_strings_are_converted_with_str(value: object, expected: str) -> None:
    assert redact(value) == expected


class _Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no text for you: sk-live-abcdef1234567890")


class _NotAString:
    def __str__(self) -> str:
        return 42  # type: ignore[return-value]


class _LoudStr(str):
    def __str__(self) -> str:
        raise RuntimeError("a str is used as is")


def test_an_object_whose_str_raises_becomes_its_type_name() -> None:
    assert redact(_Unprintable()) == "<_Unprintable>"
    assert redact(_NotAString()) == "<_NotAString>"


def test_a_str_subclass_is_used_as_is() -> None:
    out = redact(_LoudStr("api_key=abc"))
    assert out == f"api_key={R}" and type(out) is str


def test_lone_surrogates_do_not_raise() -> None:
    out = redact("bad \ud800 token=abc\udfff\n\udc80")
    assert out == f"bad \ud800 token={R} \udc80"
    assert redact(out) == out
