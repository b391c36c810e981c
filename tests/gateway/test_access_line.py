"""The access line redacted in one pass is the line redacted field by field, whatever the fields hold."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jev_shared.gateway.observe import access_line, scrub
from jev_shared.redact import redact, remember_secrets

KEY = "gw-key-0123456789abcdef"
SECRETS = [KEY, "short", "presented-key-abcdef"]
remember_secrets(["remembered-backend-secret-xyz"])


def field_by_field(fields: dict[str, Any], secrets: list[str]) -> str:
    """The access line as it was written before: each field redacted, then the known keys scrubbed."""
    return scrub(json.dumps(redact(fields), separators=(",", ":"), default=str), secrets)


TRICKY = ["", "stub", "/v1/systemone", "POST", "sk-abcdefghijklmnop", "Bearer abcdefgh12345678", "basic  QWxhZGRpbjpvcGVu",
          "http://user:pass@host/x", "a\"quote", "back\\slash", "tab\there", "new\nline", "caf\u00e9", "\x7f",
          KEY, f"model-{KEY}", "presented-key-abcdef", "remembered-backend-secret-xyz", "pre sk-", "[REDACTED]"]
NAMES = ["request_id", "method", "path", "status", "model", "error", "authorization", "api_key", "x-api-key",
         "token", "max_tokens", "password", "note", "key_id", "n_questions"]
VALUES = st.one_of(st.sampled_from(TRICKY), st.text(max_size=30), st.integers(), st.floats(allow_nan=True),
                   st.booleans(), st.none(), st.lists(st.sampled_from(TRICKY), max_size=3),
                   st.dictionaries(st.sampled_from(NAMES), st.sampled_from(TRICKY), max_size=2),
                   st.tuples(st.sampled_from(TRICKY)), st.builds(object))


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.one_of(st.sampled_from(NAMES), st.text(max_size=12)), VALUES, max_size=9))
def test_one_pass_is_field_by_field(fields: dict[str, Any]) -> None:
    assert access_line(fields, SECRETS) == field_by_field(fields, SECRETS)


def test_the_usual_line_takes_one_pass_and_still_hides_a_key_in_any_field() -> None:
    line = {"ts": 1.5, "request_id": "abc", "method": "POST", "path": "/v1/systemone", "status": 200,
            "latency_ms": 2.31, "client": "127.0.0.1", "key_id": "1a2b3c4d", "model": "stub", "n_questions": 1}
    assert access_line(line, SECRETS) == field_by_field(line, SECRETS)
    for name in ("model", "path", "request_id"):
        for secret in (KEY, "sk-abcdefghijklmnop", "remembered-backend-secret-xyz", "Bearer abcdefgh12345678"):
            leaked = {**line, name: f"x{secret}y"}
            out = access_line(leaked, SECRETS)
            assert secret not in out and out == field_by_field(leaked, SECRETS)


def test_a_key_in_any_field_of_any_plain_type_is_redacted_on_the_one_pass() -> None:
    """The one pass looks at the names and the values' types, not at each text: a secret in a field the line did
    not have before, or beside floats, bools and None, is redacted all the same."""
    line = {"ts": 1.5, "status": 200, "ok": True, "none": None, "latency_ms": float("inf"), "error": "bad_request"}
    for name in ("client", "error", "key_id", "a_new_field", "method"):
        for secret in (KEY, "sk-abcdefghijklmnop", "SK-ABCDEFGHIJKLMNOP", "remembered-backend-secret-xyz",
                       "bearer abcdefgh12345678", "http://user:pass@host/x"):
            leaked = {**line, name: f"x {secret} y"}
            out = access_line(leaked, SECRETS)
            assert secret not in out and out == field_by_field(leaked, SECRETS), (name, secret)
