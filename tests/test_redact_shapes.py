"""``redact_text`` skips its two regexes only where neither can match: the same text as running them."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jev_shared.redact import REDACTED, SECRET_VALUES, URL_USERINFO, redact_text

#: Pieces of the shapes, their cases, and the letters IGNORECASE pairs with ASCII ones (long s, Kelvin, dotless i).
PIECES = ["sk-", "SK-", "sK-", "\u017fk-", "s\u212a-", "bearer ", "BEARER\t", "Bearer\u00a0", "basic ", "BaSiC\n",
          "ba\u017fic ", "://", "user:pass@", "a:b@", "abcdefgh", "0123456789", "_-~+/=.", " ", "\"", "\\", "caf\u00e9",
          "\u0130", "\u0131", "x", "@", ":", "/"]


def regexes(text: str) -> str:
    return URL_USERINFO.sub(REDACTED + "@", SECRET_VALUES.sub(REDACTED, text))


@pytest.mark.slow
@settings(max_examples=600, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=6)), max_size=12))
def test_the_marks_check_gives_what_the_regexes_give(pieces: list[str]) -> None:
    text = "".join(pieces)
    assert redact_text(text) == regexes(text)


def test_every_shape_is_still_redacted_in_any_case() -> None:
    tail = "Ab3-" * 4
    for text in (f"x sk-{tail} y", f"SK-{tail}", f"bEaReR {tail}", f"BASIC\t{tail}", "http://u:p@host/",
                 f"\u017fk-{tail}", f"caf\u00e9 sk-{tail}"):
        out = redact_text(text)
        assert REDACTED in out and out == regexes(text), text
