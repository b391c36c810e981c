"""An integer of more digits than Python converts (4,300 by default) anywhere in a body is a 422 naming its
field, on both wires, never a 400 for the whole body ("There was an error parsing the body", which said
neither what nor where). Real HTTP on loopback, the real gateway in front of a loopback backend."""

from __future__ import annotations

import httpx
import pytest

from jev_shared.gateway.config import Backend, GatewayConfig
from tests.gateway.conftest import running
from tests.helpers.replies import chat_tokens
from tests.hostile.fast_stub import FastStub

pytestmark = pytest.mark.timeout(120)
LONG = "7" * 4301
TEAM = '{"team": {"type": "choice", "instructions": "Which?", "criteria": {"a": "x", "b": "y"}}}'
BODIES = {  # (path, body: @N the number and @Q the questions, the field named)
    "in the state": ("/v1/systemone", '{"model": "m", "state": {"n": @N}, "questions": @Q}', "state.n"),
    "as an option": ("/v1/systemone", '{"model": "m", "state": "x", "questions": @Q, "backend": '
                                      '{"max_concurrency": -@N}}', "backend.max_concurrency"),
    "in a list": ("/v1/systemone", '{"model": "m", "state": [1, 2, @N], "questions": @Q}', "state.2"),
    "on the Decisions wire": ("/v1/decisions", '{"model": "m", "input": "x", "questions": [{"type": "predicate", '
                                               '"instructions": "x", "name": @N}]}', "questions.0.name"),
}


def _body(template: str) -> str:
    return template.replace("@N", LONG).replace("@Q", TEAM)


@pytest.fixture(scope="module")
def url():
    with FastStub(chat_tokens({"a": -0.1, "b": -2.0})) as stub:
        config = GatewayConfig(backends={"m": Backend(stub.base_url, "m")}, method="logprobs", cache=False,
                               max_retries=0)
        with running(config) as base:
            yield base


@pytest.mark.parametrize("where", sorted(BODIES))
def test_a_number_too_long_to_read_is_422_naming_its_field(url, where):
    path, template, field = BODIES[where]
    resp = httpx.post(url + path, content=_body(template), headers={"content-type": "application/json"}, timeout=30)
    assert resp.status_code == 422, resp.text
    error = resp.json()["error"]
    assert error["field"] == field and "4,301 digits" in error["message"], error


def test_the_same_digits_in_a_text_are_only_text(url):
    body = _body('{"model": "m", "state": "@N", "questions": @Q}')
    resp = httpx.post(url + "/v1/systemone", content=body, headers={"content-type": "application/json"}, timeout=30)
    assert resp.status_code == 200, resp.text
