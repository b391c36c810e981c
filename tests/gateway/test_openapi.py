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
