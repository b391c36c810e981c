"""Every rule of ``jev_shared.faults``, table-driven over the documented error bodies in ``cassettes/``.

Each body is the one a cassette replays; it goes through the real openai SDK (a 4xx or 5xx raised as
the SDK raises it) and the engine's transport, so the rules read the ``ProviderError`` a real call
raises (whose ``body`` is the SDK's inner ``error`` object), and, beside it, the body as the wire
carried it (``{"error": {...}}``), which a proxy or the hosted API hands on unwrapped.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import pytest
import yaml

from jev_shared import ProviderError
from jev_shared.calls import Call
from jev_shared.errors import FieldRefusedError, LabelReadoutError
from jev_shared.faults import (
    READOUT_FIELDS,
    cannot_carry,
    error_fields,
    logprobs_value_complaint,
    refused_field,
    route_missing,
    sent_fields,
)
from jev_shared.transport import RetryPolicy, send
from tests.conftest import CASSETTES
from tests.helpers import Reply, provider

CHAT_FIELDS = ["temperature", "logprobs", "top_logprobs", "max_tokens", "chat_template_kwargs"]
RESPONSES_FIELDS = ["include", "max_output_tokens", "temperature", "top_logprobs", "chat_template_kwargs"]
PATHS = {"/v1/chat/completions": (("chat", "completions", "create"), "messages"),
         "/v1/responses": (("responses", "create"), "input")}


@cache
def documented(name: str) -> tuple[int, str, bytes]:
    """The first error a cassette replays: status, path and body, as recorded."""
    for it in yaml.safe_load((CASSETTES / f"{name}.yaml").read_text())["interactions"]:
        status = it["response"]["status"]["code"]
        if status >= 400:
            path = "/" + it["request"]["uri"].split("/", 3)[3]
            return status, path, it["response"]["body"]["string"].encode()
    raise AssertionError(f"{name} replays no error")


def raised(name: str) -> ProviderError:
    """The cassette's error as a real call raises it: the SDK over the wire, then the engine's transport."""
    status, path, body = documented(name)
    client = provider(lambda _req: Reply(status, body), surfaces=None).with_options(max_retries=0)
    with pytest.raises(ProviderError) as err:
        method, turns = PATHS[path]
        send(client, Call("x", {"model": "gpt-x", turns: []}, method), RetryPolicy(0, 0.0, 0.0))
    assert err.value.status_code == status
    return err.value


def on_the_wire(name: str) -> ProviderError:
    """The same error with the body as the wire carried it, unwrapped by nobody."""
    status, _, body = documented(name)
    wire = json.loads(body)
    return ProviderError(f"provider error {status}", status_code=status, provider_message=wire["error"]["message"],
                         body=wire)


BOTH = pytest.mark.parametrize("read", [raised, on_the_wire], ids=["sdk", "wire"])


def error(status: int, message: str, **fields: Any) -> ProviderError:
    return ProviderError(f"provider error {status}", status_code=status, provider_message=message,
                         body={"error": {"message": message, **fields}})


# --- error_fields --------------------------------------------------------------------------------------


@BOTH
@pytest.mark.parametrize(("name", "expected"), [
    ("documented_400_logprobs_refused", {"param": "logprobs", "code": "unsupported_parameter",
                                         "type": "invalid_request_error"}),
    ("documented_400_field_refused", {"param": "", "code": "", "type": "invalid_request_error"}),
    ("documented_responses_404", {"param": "", "code": "", "type": "not_found"}),
    ("documented_429_then_success", {"param": "", "code": "rate_limit_exceeded", "type": "invalid_request_error"}),
])
def test_error_fields_reads_param_code_and_type_from_either_body(read, name, expected):
    assert error_fields(read(name)) == expected


@pytest.mark.parametrize("body", [None, "Bad Gateway", ["x"], {"error": "a string"}])
def test_error_fields_are_empty_for_a_body_with_no_error_object(body):
    exc = ProviderError("x", status_code=400, body=body)
    assert error_fields(exc) == {"param": "", "code": "", "type": ""}


# --- refused_field ---------------------------------------------------------------------------------------


@BOTH
@pytest.mark.parametrize(("name", "sent", "surface", "expected"), [
    # param + a field code: the named field, when it was sent
    ("documented_400_logprobs_refused", CHAT_FIELDS, "chat_completions", "logprobs"),
    ("documented_400_logprobs_unsupported", CHAT_FIELDS, "chat_completions", "logprobs"),
    ("documented_400_logprobs_refused", ["temperature"], "chat_completions", None),  # named but never sent
    # no param: the longest sent name the message names as a word
    ("documented_400_field_refused", CHAT_FIELDS, "chat_completions", "chat_template_kwargs"),
    ("documented_400_field_refused", ["temperature"], "chat_completions", None),
    # a refused value is never a refused field
    ("documented_400_top_logprobs_value", CHAT_FIELDS, "chat_completions", None),
    # Responses carries logprobs as include: a refusal of logprobs refuses include
    ("documented_responses_400_logprobs", RESPONSES_FIELDS, "responses", "include"),
    ("documented_responses_400_logprobs", ["max_output_tokens"], "responses", None),
    # not a field refusal at all: a missing route, a throttle, an outage
    ("documented_responses_404", RESPONSES_FIELDS, "responses", None),
    ("documented_429_then_success", CHAT_FIELDS, "chat_completions", None),
    ("documented_500_outage", CHAT_FIELDS, "chat_completions", None),
])
def test_refused_field_over_the_documented_bodies(read, name, sent, surface, expected):
    assert refused_field(read(name), sent, surface) == expected


@pytest.mark.parametrize(("exc", "sent", "surface", "expected"), [
    # a field code names the field by param, with its path and index cut off
    (error(400, "bad", param="response_format.json_schema", code="unknown_parameter"), ["response_format"],
     "chat_completions", "response_format"),
    (error(400, "bad", param="tools[0]", code="extra_forbidden"), ["tools", "temperature"], "chat_completions", "tools"),
    (error(400, "whatever", param="top_logprobs", code="unsupported_parameter"), RESPONSES_FIELDS + ["x"], "responses",
     "top_logprobs"),
    (error(400, "whatever", param="logprobs", code="unsupported_parameter"), RESPONSES_FIELDS, "responses", "include"),
    # a value code wins over any wording
    (error(400, "top_logprobs is not supported", param="top_logprobs", code="integer_above_max_value"), CHAT_FIELDS,
     "chat_completions", None),
    # wording alone: each phrase the rule knows
    (error(400, "Extra inputs are not permitted: grammar"), ["grammar", "temperature"], "chat_completions", "grammar"),
    (error(400, "cannot find field `cache_prompt`"), ["cache_prompt"], "chat_completions", "cache_prompt"),
    (error(422, "Unknown parameter: reasoning_effort"), ["reasoning_effort"], "chat_completions", "reasoning_effort"),
    (error(400, "unsupported parameter 'seed'"), ["seed"], "chat_completions", "seed"),
    (error(400, "the server does not support response_format"), ["response_format"], "chat_completions",
     "response_format"),
    # wording with a param but no field code: the param, when sent
    (error(400, "this is not supported here", param="temperature"), CHAT_FIELDS, "chat_completions", "temperature"),
    # the longest name first: top_logprobs is not read as logprobs
    (error(400, "top_logprobs is not supported"), CHAT_FIELDS, "chat_completions", "top_logprobs"),
    # wording that names no sent field but logprobs: the logprobs field sent
    (error(400, "log-probabilities (logprob output) are not supported"), CHAT_FIELDS, "chat_completions", "logprobs"),
    # a field refusal that names nothing sent
    (error(400, "stream is not supported"), CHAT_FIELDS, "chat_completions", None),
    # a value complaint worded like a refusal is still a value complaint
    (error(400, "temperature not supported: must be between 0 and 1"), CHAT_FIELDS, "chat_completions", None),
    # only client errors refuse fields
    (error(503, "logprobs is not supported"), CHAT_FIELDS, "chat_completions", None),
    (ProviderError("connection reset"), CHAT_FIELDS, "chat_completions", None),
])
def test_refused_field_rules(exc, sent, surface, expected):
    assert refused_field(exc, sent, surface) == expected


# --- logprobs_value_complaint ----------------------------------------------------------------------------


@BOTH
@pytest.mark.parametrize(("name", "expected"), [
    ("documented_400_top_logprobs_value", True),  # "Invalid 'top_logprobs': integer must be between 0 and 5"
    ("documented_400_logprobs_refused", False),  # the field itself, not its value
    ("documented_400_field_refused", False),  # not about logprobs
    ("documented_500_outage", False),
])
def test_logprobs_value_complaint_over_the_documented_bodies(read, name, expected):
    assert logprobs_value_complaint(read(name)) is expected


@pytest.mark.parametrize(("exc", "expected"), [
    (error(400, "out of range", param="top_logprobs", code="integer_above_max_value"), True),  # param + value code
    (error(400, "top_logprobs must be at most 5"), True),  # message + value wording
    (error(400, "value out of range", param="top_logprobs", code="invalid_value"), True),
    (error(400, "temperature must be between 0 and 2", param="temperature"), False),  # a value, not of logprobs
    (error(500, "top_logprobs must be at most 5"), False),  # not a client error
])
def test_logprobs_value_complaint_rules(exc, expected):
    assert logprobs_value_complaint(exc) is expected


# --- cannot_carry -----------------------------------------------------------------------------------------


@BOTH
@pytest.mark.parametrize(("name", "expected"), [
    ("documented_responses_400_logprobs", True),  # a 4xx about logprobs
    ("documented_400_logprobs_unsupported", True),
    ("documented_400_field_refused", False),  # a 4xx about another field
    ("documented_responses_404", False),  # a missing route is route_missing's, not cannot_carry's
    ("documented_500_outage", False),  # the provider's health says nothing about the surface
])
def test_cannot_carry_over_the_documented_bodies(read, name, expected):
    assert cannot_carry(read(name)) is expected


@pytest.mark.parametrize(("exc", "expected"), [
    (LabelReadoutError("no logprobs in the reply", provider_cannot=True), True),
    (LabelReadoutError("the model answered off the labels"), False),
    *[(FieldRefusedError("refused", field=f, status_code=400, provider_message="refused"), True)
      for f in READOUT_FIELDS],
    (error(400, "include is not a valid parameter"), True),  # a 4xx naming include
    (error(400, "bad", param="top_logprobs"), True),  # a param naming logprobs
    (error(429, "slow down"), False),
    (ValueError("logprobs"), False),  # not a provider error at all
])
def test_cannot_carry_rules(exc, expected):
    assert cannot_carry(exc) is expected


# --- route_missing ------------------------------------------------------------------------------------------


@BOTH
def test_a_documented_404_that_names_no_model_is_a_missing_route(read):
    assert route_missing(read("documented_responses_404"), "gpt-x")


@pytest.mark.parametrize(("exc", "expected"), [
    (error(404, "The model `gpt-x` does not exist or you do not have access to it."), False),  # the model is missing
    (error(404, "Not Found"), True),
    (error(400, "Not Found"), False),  # only a 404
])
def test_route_missing_rules(exc, expected):
    assert route_missing(exc, "gpt-x") is expected


# --- sent_fields -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("kwargs", "expected"), [
    ({"model": "m", "messages": [], "logprobs": True, "top_logprobs": 20, "extra_body": {"chat_template_kwargs": {}}},
     ["logprobs", "top_logprobs", "chat_template_kwargs"]),
    ({"model": "m", "input": [], "include": ["message.output_text.logprobs"]}, ["include"]),
    ({"model": "m", "messages": [], "extra_body": None}, []),
])
def test_sent_fields_are_the_calls_own_fields_and_its_extra_body(kwargs, expected):
    assert sent_fields(kwargs) == expected
