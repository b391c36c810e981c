"""A call's examples for an id that is not a question are refused before any
request; Retry-After given as an HTTP date is honoured like the SDK's own parser does."""

from __future__ import annotations

import email.utils
import time

import httpx
import pytest

from jev_shared import Example, InvalidQuestionError, Noul, SystemOneClient
from jev_shared.transport import retry_after_s
from tests.helpers import provider
from tests.helpers import replies as r

SPAM = {"spam": Noul(instructions="This is spam.")}


def test_examples_for_an_id_that_is_not_a_question_name_it_before_any_request():
    sent = []
    client = SystemOneClient(provider(lambda req: sent.append(req) or r.chat("yes")), model="m",
                             api="chat_completions", method="logprobs")
    with pytest.raises(InvalidQuestionError) as info:
        client.system_one("a ticket", SPAM, examples={"typo": [Example(state="buy now", answer=True)]})
    assert info.value.question_id == "typo" and "typo" in str(info.value) and sent == []
    with pytest.raises(InvalidQuestionError):
        client.check(SPAM, examples={"typo": []})


def test_client_level_examples_may_name_questions_a_call_does_not_ask():
    client = SystemOneClient(provider(lambda req: r.chat_tokens({"yes": -0.1, "no": -2.0})), model="m",
                             api="chat_completions", method="logprobs",
                             examples={"other": [Example(state="x", answer=True)]})
    assert 0.5 < client.system_one("a ticket", SPAM).answers["spam"].noul <= 1.0


class _Err(Exception):
    def __init__(self, headers: dict[str, str]) -> None:
        self.response = httpx.Response(429, headers=headers)


def test_retry_after_as_an_http_date_is_honoured():
    when = email.utils.formatdate(time.time() + 5, usegmt=True)
    assert retry_after_s(_Err({"retry-after": when})) == pytest.approx(5, abs=1.5)
    past = email.utils.formatdate(time.time() - 60, usegmt=True)
    assert retry_after_s(_Err({"retry-after": past})) == 0.0
    far = email.utils.formatdate(time.time() + 3600, usegmt=True)
    assert retry_after_s(_Err({"retry-after": far})) == 60.0  # capped like the seconds form
    assert retry_after_s(_Err({"retry-after": "7"})) == 7.0
    assert retry_after_s(_Err({"retry-after": "soon"})) is None
