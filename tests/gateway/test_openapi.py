"""The wire around the decisions: the OpenAPI document validates and shows the
question union, ``/metrics`` is declared as text, a bearer scheme is declared, and ``/v1/models``
reads through both the openai SDK's ``models.list()`` and typesafe-sdk's.
"""

from __future__ import annotations

import httpx
import openai
import pytest

from tests.gateway.conftest import KEY, MODEL


@pytest.fixture(scope="module")
def spec(gateway_url):
    return httpx.get(gateway_url + "/openapi.json").json()


def test_the_document_validates(spec):
    validator = pytest.importorskip("openapi_spec_validator")
    validator.validate(spec)  # raises on any structural error (OpenAPI 3.1 schema)


def test_the_request_schema_shows_the_three_question_types(spec):
    schemas = spec["components"]["schemas"]
    request = schemas["SystemOneRequest"]["properties"]["questions"]
    assert request["additionalProperties"] == {"$ref": "#/components/schemas/Question"}
    union = schemas["Question"]
    assert {m["$ref"].rsplit("/", 1)[1] for m in union["oneOf"]} == {"ChoiceQuestion", "ScoreQuestion", "NoulQuestion"}
    assert union["discriminator"]["propertyName"] == "type"
    assert set(union["discriminator"]["mapping"]) == {"choice", "score", "noul"}
    for name, kind in (("ChoiceQuestion", "choice"), ("ScoreQuestion", "score"), ("NoulQuestion", "noul")):
        assert schemas[name]["properties"]["type"]["const"] == kind and "type" in schemas[name]["required"]
        assert "instructions" in schemas[name]["properties"]
    post = spec["paths"]["/v1/systemone"]["post"]
    body = post["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/SystemOneRequest"}
    assert post["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/SystemOneReply"}
    assert post["responses"]["422"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ErrorBody"}


def test_metrics_are_declared_as_text(spec):
    content = spec["paths"]["/metrics"]["get"]["responses"]["200"]["content"]
    assert list(content) == ["text/plain"]


def test_a_bearer_scheme_is_declared_on_the_v1_routes(spec):
    assert spec["components"]["securitySchemes"]["bearer"] == {
        "type": "http", "scheme": "bearer", "description": spec["components"]["securitySchemes"]["bearer"]["description"]}
    for path, method in (("/v1/systemone", "post"), ("/v1/models", "get")):
        assert spec["paths"][path][method]["security"] == [{"bearer": []}]
    assert "security" not in spec["paths"]["/healthz"]["get"]


def test_models_list_reads_through_the_openai_sdk(gateway_url):
    listed = openai.OpenAI(base_url=gateway_url + "/v1", api_key=KEY).models.list()
    assert [m.id for m in listed.data] == [MODEL] and listed.data[0].owned_by == "jev"


def test_models_list_reads_through_typesafe_sdk(gateway_url):
    typesafe = pytest.importorskip("typesafe_sdk")
    with typesafe.TypeSafeClient(api_key=KEY, base_url=gateway_url) as client:
        listed = client.models.list()
    assert [m.name for m in listed.models] == [MODEL]
    assert listed.models[0].release_date[:2] == "20" and listed.models[0].description


def _examples(spec, path):
    return spec["paths"][path]["post"]["requestBody"]["content"]["application/json"]["examples"]


def test_the_decision_routes_say_what_they_do_in_a_users_words(spec):
    from jev_shared.gateway.examples import DECISIONS_DESCRIPTION, SYSTEMONE_DESCRIPTION
    from jev_shared.gateway.routes import systemone

    systemone_post, decisions_post = spec["paths"]["/v1/systemone"]["post"], spec["paths"]["/v1/decisions"]["post"]
    assert systemone_post["description"] == SYSTEMONE_DESCRIPTION
    assert decisions_post["description"] == DECISIONS_DESCRIPTION
    for word in ("noul", "choice", "score", "GET /v1/models", "Authorization: Bearer"):
        assert word in SYSTEMONE_DESCRIPTION
    assert systemone.__doc__ is None  # the route's code notes are comments, never the operation's text
    for path, item in spec["paths"].items():
        for op in item.values():
            text = op.get("summary", "") + op.get("description", "")
            assert not any(w in text for w in ("``", "hot path", "middleware", "pydantic", "(.")), (path, text)


def test_every_request_example_is_a_valid_body_of_its_route(spec):
    from pydantic import TypeAdapter

    from jev_shared.gateway.decisions_wire import DecisionsRequest
    from jev_shared.gateway.schema import QuestionDoc, SystemOneRequest

    systemone, decisions = _examples(spec, "/v1/systemone"), _examples(spec, "/v1/decisions")
    kinds = set()
    for example in systemone.values():
        assert example["summary"]
        req = SystemOneRequest.model_validate(example["value"])
        kinds |= {TypeAdapter(QuestionDoc).validate_python(q).type for q in req.questions.values()}
    assert kinds == {"noul", "choice", "score"}  # a body to paste for each kind, not property1/property2
    assert {q["type"] for ex in decisions.values() for q in DecisionsRequest.model_validate(ex["value"]).model_dump()[
        "questions"]} == {"predicate", "choice", "score"}


def test_every_request_example_is_answered_when_sent(spec, gateway_url):
    headers = {"Authorization": f"Bearer {KEY}"}
    for path in ("/v1/systemone", "/v1/decisions"):
        for name, example in _examples(spec, path).items():
            body = {**example["value"], "model": MODEL}  # the examples name the embedded default; this serves a stub
            resp = httpx.post(gateway_url + path, json=body, headers=headers, timeout=30)
            assert resp.status_code == 200, (path, name, resp.text)
            answers = resp.json()["answers"]
            asked = body["questions"]
            assert (set(answers) == set(asked)) if path == "/v1/systemone" else (len(answers) == len(asked))
